import type { ClientFrame, WelcomeEvent } from "../../protocol/index.js";
import { AckPacer, type Ackable } from "./acks.js";
import { RoomPosition } from "./position.js";
import { resumeUrl } from "./url.js";

export type { Ackable } from "./acks.js";
export type { Admission } from "./position.js";

/**
 * The ordered stream of a room's own socket: the position that every
 * reconnect resumes from (RoomPosition), and the acknowledgements that free
 * the room's window for this client (AckPacer, with the socket's one room).
 */
export class OrderedStream extends RoomPosition {
  #acks: AckPacer<null>;

  /**
   * @param start the position to resume after, if any.
   * @param ackDelayMs longest wait before acknowledging a frame.
   * @param send sends a frame on the current connection; false when it could not.
   */
  constructor(start: { since?: number; epoch?: string }, ackDelayMs: number, send: (text: string) => boolean) {
    super(start);
    this.#acks = new AckPacer(ackDelayMs, (_room, ack) => send(JSON.stringify({ type: "ack", seq: ack.seq, tag: ack.tag } satisfies ClientFrame)));
  }

  /** The room URL that continues after the position. */
  resumeUrl(base: string): string {
    return resumeUrl(base, this.lastSeq, this.epoch);
  }

  override welcome(welcome: WelcomeEvent): void {
    this.#acks.setWindow(welcome.window);
    super.welcome(welcome);
  }

  /**
   * A frame that counts against the window arrived as `text`; `last` is what
   * an ack for it names (its last message). Counts it, and acks in time.
   */
  received(last: Ackable, text: string): void {
    this.#acks.owe(null, last);
    this.#acks.count(text);
  }

  /** The connection ended: its window and what it owed acks for end with it. */
  override reset(): void {
    super.reset();
    this.#acks.reset();
  }
}
