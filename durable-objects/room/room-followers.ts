import type { RoomCounterValues, RootRequests } from "../../protocol";
import { leafName } from "../../common/edge-requests";
import { followerAt, hubName, type FollowerKind } from "../../common/followers";
import type { Limits } from "../../common/settings";
import type { RoomCounters } from "../engine/counters";
import type { Message } from "../engine/message";
import type { Roster } from "../engine/presence";
import type { SocketEngine } from "../engine/socket-engine";
import type { Stream } from "../engine/stream";
import {
  followerBinding,
  leafBinding,
  type FollowAnswer,
  type FollowerHistory,
  type FollowerMember,
  type FollowerReport,
  type FollowerRpc,
  type FollowStart,
  type LeafRpc,
  type LostRange,
} from "../followers/contracts";
import { Followers, historyMessages, type FollowersHost } from "../followers/followers";
import type { RoomMembers } from "./room-members";
import type { RoomHistory } from "./storage/room-history";
import type { MetaStore } from "./storage/meta-store";

/** Largest answer to one follower's history request. */
const FOLLOWER_HISTORY_MAX_BYTES = 4 * 1024 * 1024;
/** The stored directory of followers (the key predates hubs following rooms). */
const DIRECTORY_KEY = "leaves";

/** The parts of the room its followers reach. */
export interface RootParts {
  readonly room: string;
  readonly env: Record<string, unknown>;
  readonly limits: Limits;
  readonly meta: MetaStore;
  readonly history: RoomHistory;
  readonly engine: SocketEngine;
  readonly stream: Stream;
  readonly members: RoomMembers;
  readonly counters: RoomCounters;
  /** What the root is asked, by kind (GET /rooms/{room}). */
  readonly requests: RootRequests;
}

/** What the room does when its followers change it. */
export interface RootEvents {
  /** Sockets on the followers changed: the room's occupancy may have. */
  occupancyChanged(): void;
  /** Members are about to join from a report: the room's sockets are counted first (webhooks say it in that order). */
  membersArriving(): void;
  /** The room is about to write: it lists itself first. */
  list(): Promise<void>;
}

/**
 * The room as its followers see it (docs/sharded-rooms.md,
 * docs/multiplexing.md): the calls they make on the root (RootRpc, but
 * publishes, which every publisher makes), the set of followers the root
 * pushes (Followers) and the room's parts that set works with, and the
 * roster shared with them.
 */
export class RoomFollowers implements FollowersHost {
  readonly set: Followers;
  readonly #parts: RootParts;
  readonly #events: RootEvents;
  /** Why the room refuses hubs (null: it takes them). */
  readonly #refusesHubs: string | null;
  /** Whether the room is a Pusher cache channel's: its last message goes to the hubs that start following it. */
  readonly #cacheChannel: boolean;
  /** Whether a roster update for the room's own sockets is queued. */
  #rosterQueued = false;

  constructor(parts: RootParts, events: RootEvents, options: { holdsOwnSockets: boolean; cacheChannel: boolean }) {
    this.#parts = parts;
    this.#events = events;
    this.#cacheChannel = options.cacheChannel;
    this.#refusesHubs = options.holdsOwnSockets ? "this room admits its sockets with hooks of its own: open /rooms/{room}/ws for it" : null;
    const { limits } = parts;
    this.set = new Followers(
      {
        // Connection hooks run where the sockets are, in the root: a room that has them keeps
        // every socket there (up to MAX_SOCKETS_PER_ROOM) rather than on leaves (docs/hooks.md).
        // So does a room of a worker that binds no LEAVES namespace.
        shardSockets: options.holdsOwnSockets || !leafBinding(parts.env.LEAVES) ? 0 : limits.ROOM_SHARD_SOCKETS,
        maxLeaves: limits.ROOM_MAX_LEAVES,
        maxSocketsPerObject: limits.MAX_SOCKETS_PER_ROOM,
        countIntervalMs: limits.PRESENCE_COUNT_INTERVAL_MS,
        retireAfterMs: limits.ROOM_LEAF_RETIRE_MS,
      },
      this,
      parts.meta.get(DIRECTORY_KEY),
      parts.history.seq,
    );
  }

  // -------------------------------------------------------------------------
  // The followers' calls (RootRpc)
  // -------------------------------------------------------------------------

  /** A leaf that does not know where the room stands: where it is level, and the room's epoch and members. */
  sync(index: number): FollowStart {
    this.#parts.requests.leafSyncs += 1;
    return this.set.sync(index);
  }

  /** A hub follows the room for its subscribers; a room whose class has connection hooks refuses. */
  async follow(index: number): Promise<FollowAnswer> {
    if (this.#refusesHubs !== null) return { refused: this.#refusesHubs };
    const kind = followerAt(index).kind;
    if (kind === "leaf" || !this.binds(kind)) return { refused: `the service binds no namespace for ${kind} hubs` };
    this.#parts.requests.leafSyncs += 1;
    // Following writes the room's directory of followers: its name is stored first, so that an
    // instance its alarm starts after a restart knows which room it is.
    await this.#events.list();
    const start = this.set.sync(index);
    if (this.#cacheChannel && start.seq > 0) {
      const [last] = this.read(start.seq, 1).messages;
      if (last?.seq === start.seq) start.last = last;
    }
    return { start };
  }

  /** A follower's report outside a push; answered with the room's member count. */
  report(index: number, report: FollowerReport): number {
    this.#parts.requests.leafReports += 1;
    return this.set.report(index, report);
  }

  /** Messages from `from` on, for a follower's ring. */
  history(from: number, budget: number): FollowerHistory {
    this.#parts.requests.leafFetches += 1;
    return this.set.history(from, Math.min(budget, FOLLOWER_HISTORY_MAX_BYTES));
  }

  /** Whether the worker binds the hubs of `kind`. */
  binds(kind: Exclude<FollowerKind, "leaf">): boolean {
    return followerBinding(kind === "hub" ? this.#parts.env.HUBS : this.#parts.env.PUSHER_HUBS) !== null;
  }

  // -------------------------------------------------------------------------
  // The roster the followers share
  // -------------------------------------------------------------------------

  /**
   * The room's roster changed (a member came or went here or on another
   * object): the other objects hear of it with their next push, the room's
   * own sockets a turn later (a change that started with one of them has
   * been shown to it by then, as its own join or leave).
   */
  rosterChanged(): void {
    if (!this.set.sharded) return;
    this.set.membersChanged(this.roster().members !== null);
    if (this.#rosterQueued) return;
    this.#rosterQueued = true;
    queueMicrotask(() => {
      this.#rosterQueued = false;
      if (this.set.sharded) this.#share(this.roster());
    });
  }

  // -------------------------------------------------------------------------
  // The followers' host
  // -------------------------------------------------------------------------

  roomName(): string {
    return this.#parts.room;
  }

  leafStub(index: number): LeafRpc | null {
    const namespace = leafBinding(this.#parts.env.LEAVES);
    return namespace ? namespace.get(namespace.idFromName(leafName(this.#parts.room, index))) : null;
  }

  hubStub(kind: Exclude<FollowerKind, "leaf">, n: number): FollowerRpc | null {
    const namespace = followerBinding(kind === "hub" ? this.#parts.env.HUBS : this.#parts.env.PUSHER_HUBS);
    return namespace ? namespace.get(namespace.idFromName(hubName(kind, n))) : null;
  }

  epoch(): string {
    return this.#parts.history.issueEpoch();
  }

  latest(): number {
    return this.#parts.stream.flushedSeq;
  }

  members(): number {
    return this.#parts.engine.presence(this.#parts.stream).count;
  }

  roster(): Roster {
    return this.#parts.members.roster(this.#parts.limits.PRESENCE_MAX_MEMBERS);
  }

  read(from: number, budget: number): { messages: Message[]; lost: LostRange | null } {
    const read = historyMessages(this.#parts.history, from, budget, this.#parts.stream.flushedSeq);
    this.#parts.counters.rowsRead(read.rowsRead);
    return read;
  }

  saveDirectory(indices: readonly number[]): void {
    this.#parts.meta.set(DIRECTORY_KEY, JSON.stringify(indices));
  }

  connectionsChanged(): void {
    this.#events.occupancyChanged();
  }

  membersReported(index: number, members: readonly FollowerMember[], full: boolean): void {
    // The report's sockets are counted already: the room is occupied before its members join.
    this.#events.membersArriving();
    if (full) this.#parts.members.replaceLeaf(index, members);
    else this.#parts.members.setLeaf(index, members);
  }

  leafDropped(index: number): void {
    this.#parts.members.dropLeaf(index);
  }

  countersReported(delta: RoomCounterValues): void {
    this.#parts.counters.add(delta);
  }

  shardedChanged(sharded: boolean): void {
    this.#share(sharded ? this.roster() : null);
  }

  #share(roster: Roster | null): void {
    this.#parts.engine.presence(this.#parts.stream).share(roster);
  }
}
