import type { Message } from "./message";

/**
 * A run of consecutive messages whose event texts are joined by commas: one
 * message (the live path), or a stored row of history, or a frame-sized piece
 * of one (catch-up). Frames are cut from runs, so stored text is sent as it is.
 */
export interface Run {
  /** The events, comma-separated (a lone event is just its text). */
  text: string;
  bytes: number;
  count: number;
  firstSeq: number;
  lastSeq: number;
  /** Tag of the last message: an ack naming `lastSeq` must carry it. */
  lastTag: number;
  /** A run of one message not sent to this socket (Message.skip); such a run is always a frame of its own. */
  skip?: string;
}

/** One frame as it goes on the wire: a lone event, or a JSON array of events (`text`). */
export type Frame = Run;

export interface BatchLimits {
  maxBytes: number;
  maxEvents: number;
}

/**
 * Two frames' texts as one frame: `first`'s events, then `second`'s. Either is
 * a lone event or a JSON array of events; the result is an array.
 */
export function joinFrames(first: string, second: string): string {
  const inner = (text: string): string => (text.startsWith("[") ? text.slice(1, -1) : text);
  return `[${inner(first)},${inner(second)}]`;
}

/** A message is a run of one. */
export function runOf(message: Message): Run {
  const run: Run = { text: message.event, bytes: message.bytes, count: 1, firstSeq: message.seq, lastSeq: message.seq, lastTag: message.tag };
  if (message.skip !== undefined) run.skip = message.skip;
  return run;
}

/**
 * Cuts the next frame from `runs`, starting at `start`: runs are added while
 * the frame stays within the batch limits, and the first is always taken (a
 * run larger than the limits goes alone). Live fan-out and catch-up from
 * history both cut their frames here, so a socket gets the same shapes
 * whichever path served it.
 */
export function cutFrame(runs: readonly Run[], start: number, limits: BatchLimits): { frame: Frame; end: number } {
  const head = runs[start] as Run;
  let end = start + 1;
  let bytes = head.bytes;
  let count = head.count;
  while (end < runs.length && head.skip === undefined) {
    const next = runs[end] as Run;
    if (next.skip !== undefined || count + next.count > limits.maxEvents || bytes + next.bytes + 1 + 2 > limits.maxBytes) break;
    bytes += next.bytes + 1;
    count += next.count;
    end += 1;
  }
  const last = runs[end - 1] as Run;
  if (end === start + 1 && head.count === 1) return { frame: head, end };
  const inner = end === start + 1 ? head.text : runs.slice(start, end).map((r) => r.text).join(",");
  return {
    frame: { text: `[${inner}]`, bytes: bytes + 2, count, firstSeq: head.firstSeq, lastSeq: last.lastSeq, lastTag: last.lastTag },
    end,
  };
}
