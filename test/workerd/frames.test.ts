/**
 * How frames are cut from runs of messages (engine/frames.ts), and the
 * message events they are made of (engine/message.ts). Live fan-out and
 * catch-up both cut here, so these shapes are what every socket receives.
 */
import { describe, expect, it } from "vitest";
import { MAX_TAG, type ServerMessage } from "../../protocol";
import { utf8Length } from "../../common/utf8";
import { cutFrame, runOf, type BatchLimits, type Frame, type Run } from "../../durable-objects/engine/frames";
import { messageEvent, tagOf, TagSource, type Message } from "../../durable-objects/engine/message";

const WIDE: BatchLimits = { maxBytes: 1 << 20, maxEvents: 1000 };

/** Messages `first`..`first + count - 1`, each tagged 1000 + its seq so a tag names its message. */
function messages(first: number, count: number, data: (seq: number) => unknown = (seq) => ({ n: seq })): Message[] {
  return Array.from({ length: count }, (_, i) => {
    const seq = first + i;
    return messageEvent(seq, JSON.stringify(data(seq)), 1_700_000_000_000, 1000 + seq);
  });
}

/** A stored run of several messages, as a history row holds it: their events joined by commas. */
function storedRun(batch: readonly Message[]): Run {
  const first = batch[0] as Message;
  const last = batch[batch.length - 1] as Message;
  const text = batch.map((m) => m.event).join(",");
  return { text, bytes: utf8Length(text), count: batch.length, firstSeq: first.seq, lastSeq: last.seq, lastTag: last.tag };
}

/** Every frame `runs` are cut into, from the first run to the last. */
function cutAll(runs: readonly Run[], limits: BatchLimits): Frame[] {
  const frames: Frame[] = [];
  for (let start = 0; start < runs.length; ) {
    const { frame, end } = cutFrame(runs, start, limits);
    expect(end).toBeGreaterThan(start);
    frames.push(frame);
    start = end;
  }
  return frames;
}

/** The events a frame carries on the wire. */
function eventsOf(frame: Frame): ServerMessage[] {
  const parsed: unknown = JSON.parse(frame.text);
  return (Array.isArray(parsed) ? parsed : [parsed]) as ServerMessage[];
}

describe("cutFrame", () => {
  it("sends a lone message as its own event text, not as an array of one", () => {
    const [only] = messages(7, 1);
    const run = runOf(only as Message);
    const { frame, end } = cutFrame([run], 0, WIDE);
    expect(end).toBe(1);
    // The very run: a lone event is sent as it was serialized at publish.
    expect(frame).toBe(run);
    expect(frame.text).toBe((only as Message).event);
    expect(frame).toMatchObject({ count: 1, firstSeq: 7, lastSeq: 7, lastTag: 1007 });
  });

  it("joins the events of several runs into one JSON array, byte for byte, ending with the last run's seq and tag", () => {
    const batch = messages(1, 3, (seq) => ({ text: "é😀".repeat(seq) }));
    const { frame, end } = cutFrame(batch.map(runOf), 0, WIDE);
    expect(end).toBe(3);
    expect(frame.text).toBe(`[${batch.map((m) => m.event).join(",")}]`);
    // Bytes are the UTF-8 length of what goes on the wire, not its UTF-16 length.
    expect(frame.bytes).toBe(utf8Length(frame.text));
    expect(frame.bytes).toBeGreaterThan(frame.text.length);
    expect(frame).toMatchObject({ count: 3, firstSeq: 1, lastSeq: 3, lastTag: 1003 });
    expect(eventsOf(frame).map((e) => [e.seq, e.tag])).toEqual([[1, 1001], [2, 1002], [3, 1003]]);
  });

  it("starts at the run it is given and reports where the next frame starts", () => {
    const runs = messages(1, 6).map(runOf);
    const { frame, end } = cutFrame(runs, 2, { maxBytes: WIDE.maxBytes, maxEvents: 3 });
    expect([frame.firstSeq, frame.lastSeq, end]).toEqual([3, 5, 5]);
    expect(cutFrame(runs, end, WIDE).frame).toMatchObject({ firstSeq: 6, lastSeq: 6 });
  });

  it("stops at maxEvents, counting the events inside stored runs", () => {
    const runs = messages(1, 7).map(runOf);
    expect(cutAll(runs, { maxBytes: WIDE.maxBytes, maxEvents: 3 }).map((f) => [f.firstSeq, f.lastSeq, f.count])).toEqual([
      [1, 3, 3],
      [4, 6, 3],
      [7, 7, 1],
    ]);
    // A stored run of two and then single messages: 2 + 1 fit three events, a second run of two does not.
    const mixed = [storedRun(messages(1, 2)), runOf(messages(3, 1)[0] as Message), storedRun(messages(4, 2))];
    expect(cutAll(mixed, { maxBytes: WIDE.maxBytes, maxEvents: 3 }).map((f) => [f.firstSeq, f.lastSeq, f.count])).toEqual([
      [1, 3, 3],
      [4, 5, 2],
    ]);
  });

  it("stops at maxBytes counting the brackets and commas: a frame that fits exactly is taken whole, one byte less splits it", () => {
    const runs = messages(1, 3).map(runOf);
    const whole = `[${runs.map((r) => r.text).join(",")}]`;
    const exact = cutFrame(runs, 0, { maxBytes: utf8Length(whole), maxEvents: 100 });
    expect(exact.end).toBe(3);
    expect(exact.frame.bytes).toBe(utf8Length(whole));

    const short = cutFrame(runs, 0, { maxBytes: utf8Length(whole) - 1, maxEvents: 100 });
    expect(short.end).toBe(2);
    expect(short.frame.text).toBe(`[${(runs[0] as Run).text},${(runs[1] as Run).text}]`);
    expect(short.frame.bytes).toBeLessThanOrEqual(utf8Length(whole) - 1);
  });

  it("keeps every cut frame within both limits unless it holds a single run, and loses or repeats no event", () => {
    const batch = messages(1, 40, (seq) => "x".repeat((seq * 37) % 90));
    const runs = batch.map(runOf);
    for (const limits of [
      { maxBytes: 200, maxEvents: 256 },
      { maxBytes: 400, maxEvents: 3 },
      { maxBytes: 1, maxEvents: 1 },
    ]) {
      const frames = cutAll(runs, limits);
      for (const frame of frames) {
        if (frame.count > 1) {
          expect(frame.bytes).toBeLessThanOrEqual(limits.maxBytes);
          expect(frame.count).toBeLessThanOrEqual(limits.maxEvents);
        }
        expect(frame.bytes).toBe(utf8Length(frame.text));
        const events = eventsOf(frame);
        expect(events.length).toBe(frame.count);
        expect((events[events.length - 1] as ServerMessage).tag).toBe(frame.lastTag);
      }
      expect(frames.flatMap(eventsOf).map((e) => e.seq)).toEqual(batch.map((m) => m.seq));
    }
  });

  it("sends a run larger than the limits alone, a stored run as an array", () => {
    const big = messageEvent(1, JSON.stringify("z".repeat(500)), 0, 77);
    const small = messages(2, 2);
    const tight = { maxBytes: 100, maxEvents: 10 };
    const frames = cutAll([runOf(big), ...small.map(runOf)], tight);
    expect(frames.map((f) => [f.firstSeq, f.lastSeq])).toEqual([[1, 1], [2, 2], [3, 3]]);
    expect((frames[0] as Frame).text).toBe(big.event);

    // A stored row of five events where a frame may hold two: it still goes out whole, in brackets.
    const row = storedRun(messages(10, 5));
    const { frame, end } = cutFrame([row, runOf(messages(15, 1)[0] as Message)], 0, { maxBytes: WIDE.maxBytes, maxEvents: 2 });
    expect(end).toBe(1);
    expect(frame.text).toBe(`[${row.text}]`);
    expect(frame).toMatchObject({ count: 5, firstSeq: 10, lastSeq: 14, lastTag: 1014, bytes: row.bytes + 2 });
  });
});

describe("messageEvent", () => {
  it("serializes the event once, with the data's JSON text as given and the tag last", () => {
    // Data text is kept verbatim: spacing and key order are the publisher's.
    const dataJson = '{ "b": 1, "a": [true, null] }';
    const message = messageEvent(42, dataJson, 1_700_000_000_123, 9);
    expect(message.event).toBe(`{"type":"message","seq":42,"data":${dataJson},"ts":1700000000123,"tag":9}`);
    expect(JSON.parse(message.event)).toEqual({ type: "message", seq: 42, data: { b: 1, a: [true, null] }, ts: 1_700_000_000_123, tag: 9 });
    expect(message).toMatchObject({ seq: 42, tag: 9 });
  });

  it("counts its bytes in UTF-8", () => {
    const message = messageEvent(1, JSON.stringify("é😀"), 0, 1);
    expect(message.bytes).toBe(new TextEncoder().encode(message.event).length);
    expect(message.bytes).toBe(message.event.length + 1 + 2);
  });
});

describe("tagOf", () => {
  it("reads the tag back from a stored event, whatever colons and braces the data holds", () => {
    for (const tag of [0, 1, 123_456_789, MAX_TAG]) {
      for (const data of [1, "a:b}", { "k:1": { "x}": "y:2" } }, [":", "}:}"]]) {
        const { event } = messageEvent(3, JSON.stringify(data), 5, tag);
        expect(tagOf(event)).toBe(tag);
        expect(tagOf(event)).toBe((JSON.parse(event) as ServerMessage).tag);
      }
    }
  });
});

describe("TagSource", () => {
  it("draws unsigned 32-bit integers over the whole range, and fresh ones after each block", () => {
    const source = new TagSource();
    const draws = Array.from({ length: 4096 }, () => source.next());
    for (const tag of draws) {
      expect(Number.isInteger(tag)).toBe(true);
      expect(tag).toBeGreaterThanOrEqual(0);
      expect(tag).toBeLessThanOrEqual(MAX_TAG);
    }
    // Both halves of the range occur (a 31-bit or signed source would miss one: odds 2^-4096 otherwise).
    expect(draws.some((t) => t >= 2 ** 31)).toBe(true);
    expect(draws.some((t) => t < 2 ** 31)).toBe(true);
    // The source draws blocks of 1024; the next block is new randomness, not the same block again.
    expect(draws.slice(1024, 2048)).not.toEqual(draws.slice(0, 1024));
    // Nearly all distinct: at most a handful of birthday collisions among 4096 draws of 2^32.
    expect(new Set(draws).size).toBeGreaterThan(4090);
  });
});
