import type { ClientFrame, LostEvent, ServerMessage, WelcomeEvent } from "../../protocol/index.js";
import { utf8Length } from "../../common/utf8.js";
import { resumeUrl } from "./url.js";

/** Until a welcome says otherwise: the room's default window. */
const DEFAULT_WINDOW_BYTES = 1024 * 1024;

/** What an ack names: a seq, and the tag that proves it was read. */
export interface Ackable {
  seq: number;
  tag: number;
}

/** What to do with a message that arrived. */
export type Admission =
  /** The next one in order: deliver it. */
  | "deliver"
  /** Already delivered (a hand-over from an older position): drop it. */
  | "duplicate"
  /** Beyond the next seq: a message is missing. */
  | "gap";

/**
 * The ordered stream of one room: the position (last seq delivered, and the
 * epoch of the history it belongs to) that every reconnect resumes from, and
 * the acknowledgements that free the room's window for this client.
 *
 * An ack names the last message received (or presence event, with the seq
 * read when it arrived), with its tag: proof that it was read, which
 * releases every frame up to it. Acks are billed like any
 * incoming message, and the room only needs them to free the window, so the
 * stream sends one as soon as half the announced window is unacknowledged
 * and otherwise at most `ackDelayMs` after the first frame not yet
 * acknowledged: a room with a trickle of traffic costs at most one ack per
 * `ackDelayMs`, and the room never waits on this client for long.
 */
export class OrderedStream {
  #lastSeq: number | undefined;
  #epoch: string | undefined;
  #ackDelayMs: number;
  #send: (text: string) => boolean;

  // Per connection, reset by `reset`.
  /** The epoch of this connection's welcome, when it differs from the client's (until the `lost` event). */
  #welcomeEpoch: string | undefined;
  #window = DEFAULT_WINDOW_BYTES;
  /** The last message received and not yet acknowledged: what the next ack names. */
  #toAck: Ackable | null = null;
  #unackedBytes = 0;
  #ackTimer: ReturnType<typeof setTimeout> | undefined;

  /**
   * @param start the position to resume after, if any.
   * @param ackDelayMs longest wait before acknowledging a frame.
   * @param send sends a frame on the current connection; false when it could not.
   */
  constructor(start: { since?: number; epoch?: string }, ackDelayMs: number, send: (text: string) => boolean) {
    this.#lastSeq = start.since;
    this.#epoch = start.epoch;
    this.#ackDelayMs = ackDelayMs;
    this.#send = send;
  }

  /** Seq of the last message delivered (or the room's position when none was yet). */
  get lastSeq(): number | undefined {
    return this.#lastSeq;
  }

  /** Identity of the room history `lastSeq` belongs to. */
  get epoch(): string | undefined {
    return this.#epoch;
  }

  /** The room URL that continues after the position. */
  resumeUrl(base: string): string {
    return resumeUrl(base, this.#lastSeq, this.#epoch);
  }

  welcome(welcome: WelcomeEvent): void {
    this.#window = welcome.window > 0 ? welcome.window : Number.POSITIVE_INFINITY;
    if (this.#epoch !== undefined && this.#epoch !== welcome.epoch && this.#lastSeq !== undefined) {
      // The room's history changed: a `lost` event follows, and the position moves with it.
      // Until then the old epoch stays, so a reconnect in between is told again.
      this.#welcomeEpoch = welcome.epoch;
    } else {
      this.#epoch = welcome.epoch;
    }
    this.#lastSeq ??= welcome.seq;
  }

  /** Whether `message` is the next in order; the position moves past it when it is. */
  admit(message: ServerMessage): Admission {
    const last = this.#lastSeq ?? message.seq - 1;
    if (message.seq <= last) return "duplicate";
    // The room never skips a message for a socket that acknowledges: a gap is a server fault,
    // and resuming from the last delivered seq gets the rest (or a `lost` naming it).
    if (message.seq !== last + 1) return "gap";
    this.#lastSeq = message.seq;
    return "deliver";
  }

  /** The seq `admit` expects next. */
  get expected(): number | undefined {
    return this.#lastSeq === undefined ? undefined : this.#lastSeq + 1;
  }

  /** Moves the position past messages that will never come; true when the application should hear of it. */
  lost(lost: LostEvent): boolean {
    if (lost.reason === "epoch") {
      // Another history: seqs restarted, and the position moves to the room's present.
      if (this.#welcomeEpoch !== undefined) this.#epoch = this.#welcomeEpoch;
      this.#welcomeEpoch = undefined;
      this.#lastSeq = lost.to;
      return true;
    }
    const last = this.#lastSeq ?? lost.from - 1;
    if (lost.to <= last) return false;
    this.#lastSeq = lost.to;
    return true;
  }

  /**
   * A frame that counts against the window arrived as `text`; `last` is what
   * an ack for it names (its last message). Counts it, and acks in time.
   */
  received(last: Ackable, text: string): void {
    this.#toAck = last;
    this.#unackedBytes += utf8Length(text);
    if (this.#unackedBytes * 2 >= this.#window) this.#ack();
    else this.#ackTimer ??= setTimeout(() => this.#ack(), this.#ackDelayMs);
  }

  /** The connection ended: its window and what it owed acks for end with it. */
  reset(): void {
    clearTimeout(this.#ackTimer);
    this.#ackTimer = undefined;
    this.#welcomeEpoch = undefined;
    this.#toAck = null;
    this.#unackedBytes = 0;
  }

  #ack(): void {
    clearTimeout(this.#ackTimer);
    this.#ackTimer = undefined;
    const message = this.#toAck;
    if (!message) return;
    if (this.#send(JSON.stringify({ type: "ack", seq: message.seq, tag: message.tag } satisfies ClientFrame))) {
      this.#toAck = null;
      this.#unackedBytes = 0;
    }
  }
}
