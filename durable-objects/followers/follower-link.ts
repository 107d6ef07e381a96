import { backoffCeiling } from "../../common/jitter";
import type { Message } from "../engine/message";
import type { Roster } from "../engine/presence";
import type { FollowerRpc, FollowerBatch, FollowerReport, LostRange } from "./contracts";

/** A stub of an object that follows the room: a leaf, or a hub of multiplexed connections. */
export type FollowerStub = FollowerRpc;

/** Largest push, bytes of events: a backlog goes out in pushes of this size, one at a time. */
export const PUSH_MAX_BYTES = 1024 * 1024;
/**
 * Bytes queued for one leaf while its previous push is in flight; past this
 * the leaf is served from history instead (as a socket past its window is).
 * Queues hold references to the same messages, so memory is this once, not
 * once per leaf.
 */
export const QUEUE_MAX_BYTES = 4 * 1024 * 1024;
/** Retries of a failed push back off from 100 ms to 5 s. */
const RETRY = { baseMs: 100, maxMs: 5000 };

/** What a link needs from the root. */
export interface LinkHost {
  /** A stub for the leaf; asked again after a failure (a broken stub stays broken). */
  stub(index: number): FollowerStub;
  epoch(): string;
  /** The room's name, for the calls on objects that follow several rooms. */
  roomName(): string;
  /** The last seq handed to the live path. */
  latest(): number;
  /** The room's member count. */
  members(): number;
  /** The room's roster, for a push that carries it. */
  roster(): Roster;
  /** Messages from `from` on from the room's history, about `budget` bytes. */
  read(from: number, budget: number): { messages: Message[]; lost: LostRange | null };
  reported(link: FollowerLink, report: FollowerReport): void;
  failed(link: FollowerLink, error: unknown): void;
}

/**
 * The root's side of one leaf: a leaf is to the root what a socket is to a
 * room. It has a cursor (`acked`, the seq the leaf confirmed), and the root
 * moves it forward by one of two paths:
 *
 * - Live: each flush's messages are queued and pushed, one push in flight
 *   at a time, so a leaf that is slow to fan out gets the next messages as
 *   one larger push when it answers (coalescing per leaf).
 * - Catch-up: a leaf whose push failed, or whose queue outgrew
 *   QUEUE_MAX_BYTES, is behind; the root pushes it what follows its cursor
 *   from history, a push at a time, until it is level and rejoins the live path.
 *
 * Pushes, never pulls: a leaf needs no timer to stay current, so it can
 * hibernate. Each answer is the leaf's report (sockets, members, counters),
 * so a busy leaf needs no separate reports. A leaf de-duplicates by seq, so
 * a push that is repeated after a lost answer sends nothing twice.
 */
export class FollowerLink {
  readonly index: number;
  readonly #host: LinkHost;
  #stub: FollowerStub;
  /** The leaf's sockets are level up to this seq, as the leaf last said. */
  acked: number;
  /** Sockets on the leaf, members it holds, as of its last report. */
  connections = 0;
  behindSockets = 0;
  /** Sockets granted to the edge and not yet seen in a report: on their way. */
  placed = 0;
  /** When the last grant lapses. */
  placedUntil = 0;
  /** Since when the leaf has had no socket (null while it has some). */
  emptySince: number | null = null;
  /** Pushes sent to this leaf. */
  pushes = 0;
  /** When a push last failed while the leaf had not answered since (null when it answers). */
  failingSince: number | null = null;
  #sent: number;
  #queue: Message[] = [];
  #queuedBytes = 0;
  #inFlight = false;
  #behind = false;
  #membersDue = false;
  /** The roster goes with the next push: it changed, or the leaf does not have it (a new link, a failed push). */
  #rosterDue = true;
  #fullDue: boolean;
  #failures = 0;
  #retry: ReturnType<typeof setTimeout> | null = null;
  #closed = false;

  /** `full`: ask for every member with the first push (the root does not know them). */
  constructor(index: number, host: LinkHost, acked: number, full: boolean) {
    this.index = index;
    this.#host = host;
    this.#stub = host.stub(index);
    this.acked = acked;
    this.#sent = acked;
    this.#fullDue = full;
  }

  get stub(): FollowerStub {
    return this.#stub;
  }

  /** Whether the leaf is being caught up from history. */
  get behind(): boolean {
    return this.#behind;
  }

  /** Whether a push is in flight or waiting to be retried: the root must stay awake for it. */
  get busy(): boolean {
    return this.#inFlight || this.#retry !== null || this.#queue.length > 0;
  }

  /**
   * A flush's messages, for the live path. Returns false when the leaf will
   * get them from history instead (it is behind).
   */
  offer(messages: readonly Message[]): boolean {
    const first = messages[0];
    if (this.#behind || this.#closed || first === undefined) return false;
    if (first.seq !== this.#sent + 1) {
      // Not contiguous with what the leaf has or will have: history closes the gap.
      this.#fallBehind();
      this.pump();
      return false;
    }
    for (const message of messages) {
      this.#queue.push(message);
      this.#queuedBytes += message.bytes;
    }
    this.#sent = (messages[messages.length - 1] as Message).seq;
    if (this.#queuedBytes > QUEUE_MAX_BYTES) this.#fallBehind();
    this.pump();
    return !this.#behind;
  }

  /** The leaf is behind the room (it was adopted below the latest seq): history brings it level. */
  catchUp(): void {
    this.#fallBehind();
    this.pump();
  }

  /** The member count changed: a push carries it, with messages or alone. */
  membersChanged(): void {
    this.#membersDue = true;
    this.#rosterDue = true;
    this.pump();
  }

  /** The next push asks the leaf for every member (the root lost its picture). */
  requestFull(): void {
    this.#fullDue = true;
    this.pump();
  }

  /** Stops pushing (the leaf was retired). */
  close(): void {
    this.#closed = true;
    this.#queue = [];
    this.#queuedBytes = 0;
    if (this.#retry !== null) clearTimeout(this.#retry);
    this.#retry = null;
  }

  /** Sends the next push when none is in flight. Never throws. */
  pump(): void {
    if (this.#inFlight || this.#retry !== null || this.#closed) return;
    const batch = this.#nextBatch();
    if (batch === null) return;
    const last = batch.messages[batch.messages.length - 1]?.seq ?? batch.lost?.to ?? batch.after;
    this.#inFlight = true;
    this.pushes += 1;
    let sent: Promise<FollowerReport>;
    try {
      sent = this.#stub.push(batch) as Promise<FollowerReport>;
    } catch (error) {
      sent = Promise.reject(error);
    }
    sent.then(
      (report) => this.#answered(report, last),
      (error: unknown) => this.#failed(error),
    );
  }

  #nextBatch(): FollowerBatch | null {
    const after = this.acked;
    let lost: LostRange | null = null;
    let messages: Message[] = [];
    if (this.#behind) {
      if (after >= this.#host.latest()) {
        // Level again: the next flush goes out live.
        this.#behind = false;
        this.#sent = after;
      } else {
        ({ messages, lost } = this.#host.read(after + 1, PUSH_MAX_BYTES));
      }
    }
    if (!this.#behind && messages.length === 0) {
      // What the leaf already has (it may have fetched ahead) is not sent again.
      while (this.#queue.length > 0 && (this.#queue[0] as Message).seq <= after) this.#queuedBytes -= (this.#queue.shift() as Message).bytes;
      let bytes = 0;
      let take = 0;
      while (take < this.#queue.length && (take === 0 || bytes + (this.#queue[take] as Message).bytes <= PUSH_MAX_BYTES)) {
        bytes += (this.#queue[take] as Message).bytes;
        take += 1;
      }
      messages = this.#queue.splice(0, take);
      this.#queuedBytes -= bytes;
    }
    if (messages.length === 0 && lost === null && !this.#membersDue && !this.#fullDue && !this.#rosterDue) return null;
    const full = this.#fullDue;
    const batch: FollowerBatch = { room: this.#host.roomName(), epoch: this.#host.epoch(), after, lost, messages, members: this.#host.members(), full };
    if (this.#rosterDue) batch.roster = this.#host.roster();
    this.#membersDue = false;
    this.#fullDue = false;
    this.#rosterDue = false;
    return batch;
  }

  #answered(report: FollowerReport, last: number): void {
    this.#inFlight = false;
    this.#failures = 0;
    this.failingSince = null;
    this.acked = report.seq;
    if (report.seq < last) {
      // The leaf did not take everything (it could not close a gap): history follows.
      this.#fallBehind();
    } else if (!this.#behind && this.#sent < report.seq) {
      this.#sent = report.seq;
    }
    try {
      this.#host.reported(this, report);
    } finally {
      this.pump();
    }
  }

  #failed(error: unknown): void {
    this.#inFlight = false;
    this.#failures += 1;
    this.failingSince ??= Date.now();
    // Whatever the leaf made of the lost push, the next one asks for its whole picture, and gives the roster.
    this.#fullDue = true;
    this.#rosterDue = true;
    this.#fallBehind();
    // A stub whose object broke stays broken: the next attempt gets a fresh one.
    this.#stub = this.#host.stub(this.index);
    this.#host.failed(this, error);
    if (this.#closed) return;
    // Half of the ceiling at least: a leaf that is down is not asked again at once.
    const ceiling = backoffCeiling(this.#failures - 1, RETRY);
    this.#retry = setTimeout(() => {
      this.#retry = null;
      this.pump();
    }, ceiling / 2 + Math.random() * (ceiling / 2));
  }

  #fallBehind(): void {
    this.#behind = true;
    this.#queue = [];
    this.#queuedBytes = 0;
    this.#sent = this.acked;
  }
}
