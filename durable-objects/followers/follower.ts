import { CloseCode, type LostEvent } from "../../protocol";
import { logEvent } from "../../common/log";
import type { RoomCounters } from "../engine/counters";
import type { Delivery } from "../engine/delivery";
import { cutFrame, runOf, type BatchLimits } from "../engine/frames";
import type { Message } from "../engine/message";
import type { PresenceHooks, SocketEngine } from "../engine/socket-engine";
import type { Stream } from "../engine/stream";
import type { StreamShape } from "../engine/stream-shape";
import { MessageRing } from "./ring";
import type { FollowerBatch, FollowStart, LostRange, RootRpc } from "./contracts";

/** Bytes a follower keeps in its ring, the live part and a backfill together. */
export const RING_MAX_BYTES = 8 * 1024 * 1024;
/** Bytes of history a follower asks the root for at once; the ring keeps this much room for a backfill. */
export const FETCH_BYTES = 2 * 1024 * 1024;
/** A fetch that made no progress is retried after this long. */
const FETCH_RETRY_MS = 500;

/** What following a room needs of the object that does it. */
export interface FollowerHost {
  /** The room's root object. */
  root(room: string): RootRpc;
  /** This object's index among the room's followers (a leaf's index, or a hub's number past HUB_FOLLOWER_BASE). */
  readonly index: number;
  /** Asks the root where the room stands (a leaf's sync, a hub's follow, which the root may refuse: it throws then). */
  sync(room: string): Promise<FollowStart>;
  /** Where the follower stands moved: the object records it where it survives hibernation. */
  moved(room: string): void;
}

/** How an object follows a room: its messages as its sockets get them, and where the room's deliveries are counted. */
export interface FollowOptions {
  maxMessages: number;
  batch: BatchLimits;
  /** How the room's events look on this object's sockets (multiplexed connections: every event names the room). */
  shape: StreamShape;
  /** The room's own counters on this object (null: the object's). */
  counters: RoomCounters | null;
}

/**
 * One room as an object that follows it from the room's root sees it (a leaf
 * of a sharded room): a ring of the room's recent messages and a stream of
 * the engine fed from it.
 *
 * - Pushes arrive one at a time (the root waits for each answer) and are
 *   applied in seq order: what the follower already has is dropped, a gap is
 *   fetched from the root's history first. Nothing is stored: after a
 *   restart the ring starts empty.
 * - Resumes and cursors behind read the ring; what it does not hold is
 *   fetched from the root once and kept, so a reconnect storm costs the root
 *   a few fetches per follower rather than one per socket.
 * - A follower that does not know where the room stands (it woke without a
 *   mark, or was retired) asks the root before serving anyone.
 */
export class RoomFollower {
  readonly ring: MessageRing;
  readonly stream: Stream;
  readonly #engine: SocketEngine;
  readonly #delivery: Delivery;
  readonly #counters: RoomCounters;
  readonly #batch: BatchLimits;
  readonly #host: FollowerHost;
  readonly #room: string;
  /** A message as this object's sockets get it. */
  readonly #shape: (message: Message) => Message;
  #epoch = "";
  /** Whether the ring's seq is where this object's sockets are (false: ask the root before serving). */
  #known = false;
  /**
   * The start of the epoch this object's sockets followed when it woke not
   * knowing where the room stands (a hub keeps it in its connections'
   * attachments): a room whose history started over meanwhile (an ephemeral
   * room that restarted) closes them, as a known follower would.
   */
  #expected: string | null = null;
  #syncing: Promise<void> | null = null;
  #pushes: Promise<unknown> = Promise.resolve();
  #fetching = false;
  #fetchFrom = Number.POSITIVE_INFINITY;

  constructor(room: string, engine: SocketEngine, counters: RoomCounters, options: FollowOptions, host: FollowerHost, presence: PresenceHooks) {
    this.#engine = engine;
    this.#delivery = engine.delivery;
    this.#room = room;
    this.#counters = options.counters ?? counters;
    this.#batch = options.batch;
    this.#host = host;
    this.#shape = (message) => options.shape.message(message);
    this.ring = new MessageRing({ maxMessages: options.maxMessages, maxBytes: RING_MAX_BYTES, backfillBytes: FETCH_BYTES }, (from) => this.#fetch(from));
    this.stream = engine.openStream(room, this.ring, presence, options.shape, options.counters);
  }

  get epoch(): string {
    return this.#epoch;
  }

  get known(): boolean {
    return this.#known;
  }

  /**
   * The follower is level with the room at `start.seq`. An object that had
   * sockets of another history closes them (their seqs mean nothing now):
   * they reconnect and are told so.
   */
  restart(start: FollowStart, closeStale = true): void {
    const stale = this.#known ? start.epoch !== this.#epoch : this.#expected !== null && !start.epoch.startsWith(this.#expected);
    if (closeStale && stale) {
      for (const ws of [...this.stream.cursors.keys()]) this.#delivery.close(ws, CloseCode.SERVICE_RESTART, "room history restarted: resume");
    }
    this.#expected = null;
    this.#epoch = start.epoch;
    this.ring.reset(start.seq);
    // A cache channel's last event, for the subscribers that ask for it first.
    if (start.last?.seq === start.seq) this.ring.backfill([this.#shape(start.last)], null);
    for (const cursor of this.stream.cursors.values()) cursor.sentSeq = start.seq;
    this.stream.reset();
    this.#known = true;
    // A follower is always part of a room of several objects: its sockets see the room's roster.
    this.#engine.presence(this.stream).share(start.roster);
    this.#host.moved(this.#room);
  }

  /** This object's sockets followed the room under an epoch that starts with `prefix` (they were here when it woke). */
  expect(prefix: string): void {
    if (!this.#known) this.#expected = prefix;
  }

  /** Forgets where the room stands (the root retired this follower). */
  forget(): void {
    this.#known = false;
    this.ring.reset(0);
  }

  /** Makes sure the follower knows where the room stands, asking the root once however many callers wait. */
  async ensureKnown(): Promise<void> {
    if (this.#known) return;
    this.#syncing ??= (async () => {
      const start = await this.#host.sync(this.#room);
      // A push may have arrived meanwhile; it knows better.
      if (!this.#known) this.restart(start);
    })().finally(() => (this.#syncing = null));
    return this.#syncing;
  }

  /** The root opens this follower. */
  open(start: FollowStart): Promise<void> {
    return this.#serial(async () => {
      if (this.#known && start.epoch === this.#epoch) return;
      this.restart(start);
    });
  }

  /** One push from the root, applied in order after any push still applying. */
  push(batch: FollowerBatch): Promise<void> {
    return this.#serial(async () => {
      const roster = batch.roster ?? { members: null, count: batch.members };
      if (!this.#known || batch.epoch !== this.#epoch) this.restart({ room: batch.room, epoch: batch.epoch, seq: batch.after, members: batch.members, roster });
      else if (batch.roster) this.#engine.presence(this.stream).share(batch.roster);
      const before = this.ring.seq;
      await this.#apply(batch.lost, batch.messages, Date.now());
      if (this.ring.seq !== before) this.#host.moved(this.#room);
    });
  }

  /** Applies pushed (or fetched) messages in seq order: drops what the ring has, fetches a gap first, fans out the rest. */
  async #apply(lost: LostRange | null, pushed: readonly Message[], now: number): Promise<void> {
    if (lost && lost.to > this.ring.seq) this.#skipLost(Math.max(lost.from, this.ring.seq + 1), lost.to);
    let messages = pushed.filter((m) => m.seq > this.ring.seq).map(this.#shape);
    const first = messages[0];
    if (first !== undefined && first.seq > this.ring.seq + 1) {
      const got = await this.#host.root(this.#room).followerHistory(this.ring.seq + 1, FETCH_BYTES);
      if (got.epoch === this.#epoch) await this.#apply(got.lost, got.messages.filter((m) => m.seq < first.seq), now);
      messages = messages.filter((m) => m.seq > this.ring.seq);
      // Still a gap: the report says where the follower is, and the root catches it up from history.
      if (messages[0] !== undefined && (messages[0] as Message).seq !== this.ring.seq + 1) return;
    }
    if (messages.length === 0) return;
    this.ring.append(messages);
    const runs = messages.map(runOf);
    for (let i = 0; i < runs.length; ) {
      const { frame, end } = cutFrame(runs, i, this.#batch);
      this.#delivery.fanOut(this.stream, frame, 0, now);
      i = end;
    }
  }

  /** History lost seqs `from`..`to` before this follower had them: cursors level here are told, as catch-up tells a cursor. */
  #skipLost(from: number, to: number): void {
    const level = this.ring.seq;
    const lost: LostEvent = { type: "lost", reason: "history", from, to };
    for (const cursor of [...this.stream.cursors.values()]) {
      if (cursor.sentSeq !== level || cursor.behind) continue;
      const text = this.stream.text(lost, cursor);
      if (text !== null && !this.#delivery.sendControl(cursor.socket, text)) continue;
      cursor.sentSeq = to;
      this.#counters.lost(to - from + 1);
    }
    this.ring.skipLost(to);
    this.stream.reset();
  }

  /**
   * A cursor needs a message the ring does not hold: fetch it from the root
   * (one fetch at a time, from the lowest seq asked for), then resume every
   * cursor that is behind.
   */
  #fetch(from: number): void {
    this.#fetchFrom = Math.min(this.#fetchFrom, from);
    if (this.#fetching) return;
    this.#fetching = true;
    const epoch = this.#epoch;
    const run = async (): Promise<boolean> => {
      let progressed = true;
      while (this.#fetchFrom !== Number.POSITIVE_INFINITY) {
        const want = this.#fetchFrom;
        this.#fetchFrom = Number.POSITIVE_INFINITY;
        if (this.ring.covers(want)) continue;
        const got = await this.#host.root(this.#room).followerHistory(want, FETCH_BYTES);
        if (got.epoch !== epoch || got.epoch !== this.#epoch) return false;
        this.ring.backfill(got.messages.map(this.#shape), got.lost);
        progressed = this.ring.covers(want);
      }
      return progressed;
    };
    run()
      .catch((error: unknown) => {
        logEvent("error", { room: this.stream.room, leaf: this.#host.index, where: "leaf_fetch", error: String(error) });
        return false;
      })
      .then((progressed) => {
        this.#fetching = false;
        const resume = (): void => this.#delivery.resume(this.stream, Date.now());
        // Cursors that get nothing for long enough have their sockets closed as slow consumers, and resume.
        if (progressed) resume();
        else setTimeout(resume, FETCH_RETRY_MS);
      });
  }

  /** Pushes run one after another, in arrival order, even when one waits for a fetch. */
  #serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.#pushes.then(work, work);
    this.#pushes = next.catch(() => undefined);
    return next;
  }
}
