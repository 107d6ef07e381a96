import type { LostEvent, ServerMessage, WelcomeEvent } from "../../protocol/index.js";

/** What to do with a message that arrived. */
export type Admission =
  /** The next one in order: deliver it. */
  | "deliver"
  /** Already delivered (a hand-over from an older position): drop it. */
  | "duplicate"
  /** Beyond the next seq: a message is missing. */
  | "gap";

/**
 * Where the client stands in one room: the last seq delivered, and the epoch
 * of the history it belongs to. Every reconnect (or resubscribe) continues
 * after it, so the room sends each message once and in order; a `lost`
 * moves it past what will never come.
 */
export class RoomPosition {
  #lastSeq: number | undefined;
  #epoch: string | undefined;
  /** The epoch the room announced on this connection, when it differs from the client's (until the `lost` event). */
  #announcedEpoch: string | undefined;

  /** @param start the position to resume after, if any. */
  constructor(start: { since?: number; epoch?: string }) {
    this.#lastSeq = start.since;
    this.#epoch = start.epoch;
  }

  /** Seq of the last message delivered (or the room's position when none was yet). */
  get lastSeq(): number | undefined {
    return this.#lastSeq;
  }

  /** Identity of the room history `lastSeq` belongs to. */
  get epoch(): string | undefined {
    return this.#epoch;
  }

  /** The seq `admit` expects next. */
  get expected(): number | undefined {
    return this.#lastSeq === undefined ? undefined : this.#lastSeq + 1;
  }

  /** Where the room stands on this connection: its welcome, or the `subscribed` event of a multiplexed connection. */
  welcome(where: Pick<WelcomeEvent, "seq" | "epoch">): void {
    if (this.#epoch !== undefined && this.#epoch !== where.epoch && this.#lastSeq !== undefined) {
      // The room's history changed: a `lost` event follows, and the position moves with it.
      // Until then the old epoch stays, so a reconnect in between is told again.
      this.#announcedEpoch = where.epoch;
    } else {
      this.#epoch = where.epoch;
    }
    this.#lastSeq ??= where.seq;
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

  /** Moves the position past messages that will never come; true when the application should hear of it. */
  lost(lost: LostEvent): boolean {
    if (lost.reason === "epoch") {
      // Another history: seqs restarted, and the position moves to the room's present.
      if (this.#announcedEpoch !== undefined) this.#epoch = this.#announcedEpoch;
      this.#announcedEpoch = undefined;
      this.#lastSeq = lost.to;
      return true;
    }
    const last = this.#lastSeq ?? lost.from - 1;
    if (lost.to <= last) return false;
    this.#lastSeq = lost.to;
    return true;
  }

  /** The connection ended: what its room announced ends with it; the position is the client's and stays. */
  reset(): void {
    this.#announcedEpoch = undefined;
  }
}
