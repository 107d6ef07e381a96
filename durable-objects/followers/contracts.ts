/**
 * What the root of a room and the objects that follow it (leaves of a sharded
 * room, hubs of multiplexed and of Pusher connections: common/followers.ts)
 * say to each other (docs/sharded-rooms.md, docs/multiplexing.md): RootRpc is
 * what a follower calls on the root, FollowerRpc what the root calls on a
 * follower. Both sides hold these contracts, never each other's classes.
 * These shapes are internal to the server, and change only with a deploy that
 * changes both sides: clients see the wire protocol of protocol/, the same on
 * every object of a room, and none of this. A leaf knows which room and index
 * it is from its own name (`<room>/<index>`, common/edge-requests.ts).
 */
import type { RoomCounterValues, RoomLeafStats } from "../../protocol";
import type { Message, MessageFields } from "../engine/message";
import type { Roster } from "../engine/presence";
import type { PublishOutcome } from "../engine/publish-outcome";

/** Where the room stands, for a follower that opens or lost track (its sockets are level at `seq`). */
export interface FollowStart {
  room: string;
  epoch: string;
  seq: number;
  /** The room's member count, over the root and every leaf. */
  members: number;
  /** The room's roster (its members over every object, or only their count above the cap). */
  roster: Roster;
  /**
   * A Pusher cache channel's room: its message `seq`, when its history still holds it, so that
   * a hub that just started following can hand a new subscriber the channel's last event.
   */
  last?: Message;
}

/** A range of seqs the root's history no longer holds. */
export interface LostRange {
  from: number;
  to: number;
}

/**
 * One push from the root: the messages after `after`, in seq order, as the
 * root stored them (each event serialized once, at publish). A push may carry
 * no message: it then only brings the member count, or asks for a report.
 */
export interface FollowerBatch {
  room: string;
  epoch: string;
  /** The seq the root believes this leaf is level at: the messages follow it. */
  after: number;
  /** Seqs before the first message that history no longer holds (the leaf was unreachable for long). */
  lost: LostRange | null;
  messages: Message[];
  /** The room's member count. */
  members: number;
  /** The room's roster, when it changed since the last push (absent: unchanged). */
  roster?: Roster;
  /** Report every member, not only those that changed (the root lost its picture). */
  full: boolean;
}

/** One member as one leaf sees it; `connections: 0` with `present: true` is a member in its leave delay. */
export interface FollowerMember {
  id: string;
  present: boolean;
  connections: number;
  info?: string;
  verified: boolean;
}

/** What a leaf tells the root, in answer to each push and on its own when its sockets change. */
export interface FollowerReport {
  /** The leaf's sockets are level with the room up to this seq. */
  seq: number;
  connections: number;
  /** Sockets catching up from the leaf's ring. */
  behind: number;
  /** Members whose state changed since the last report (every member when the push asked for `full`). */
  members: FollowerMember[];
  full: boolean;
  /** Counters that grew since the last report (deliveries, frames, kicks...), added to the room's. */
  delta: RoomCounterValues | null;
}

/** History from the root for a leaf whose ring does not reach back far enough, or that missed a push. */
export interface FollowerHistory {
  epoch: string;
  latest: number;
  lost: LostRange | null;
  messages: Message[];
}

/**
 * What a leaf answers for `GET /rooms/{room}` (RoomStats.leaves): its line,
 * less `reachable` (the root decides that), plus the counters the root has
 * not yet been sent (the room's totals add them when read).
 */
export interface FollowerSnapshot extends Omit<RoomLeafStats, "reachable"> {
  unreported: RoomCounterValues | null;
}

/**
 * What the root of a room calls on an object that follows it (a leaf, or an
 * object holding multiplexed connections that follow the room among others):
 * each call names the room, for the objects that follow several.
 */
export interface FollowerRpc {
  open(start: FollowStart): Promise<void>;
  push(batch: FollowerBatch): Promise<FollowerReport>;
  /** The root stops pushing `room`: false when a socket of it arrived since the last report. */
  retire(room: string): Promise<boolean>;
  snapshot(room: string): Promise<FollowerSnapshot>;
}

/** What only a leaf answers (a hub holds sockets of other rooms too: it closes its own). */
export interface LeafRpc extends FollowerRpc {
  /** Closes every socket of the leaf with `code`; returns how many. */
  shutdown(code: number, reason: string): Promise<number>;
  /** Aborts the leaf's object as a crash would (fault tests on the local server). */
  abort(): Promise<void>;
}

/** A publish from a follower's socket: the root runs the room's beforePublish, if it has one, and may refuse. */
export interface FollowerPublish {
  /** Where the socket is: a leaf's sockets share the room's retry keys, a hub's have their own. */
  source: "leaf" | "multiplexed" | "pusher";
  /** The socket's retry key; the root hashes the data itself. */
  retryKey?: string;
  /** A Pusher client event's name, the socket it skips and its member. */
  fields?: MessageFields;
}

/** The root's answer to a hub that asks to follow the room. */
export type FollowAnswer = { start: FollowStart } | { refused: string };

/**
 * What an object that follows a room calls on the room's root: each call
 * names the follower by its index in the root's directory (common/followers.ts).
 */
export interface RootRpc {
  publish(dataJson: string, options: FollowerPublish): Promise<PublishOutcome>;
  /** A leaf that does not know where the room stands. */
  followerSync(index: number): Promise<FollowStart>;
  /** A hub starts following the room (a room with connection hooks refuses). */
  follow(index: number): Promise<FollowAnswer>;
  /** A follower's report outside a push; answered with the room's member count. */
  followerReport(index: number, report: FollowerReport): Promise<number>;
  /** Messages from `from` on, about `budget` bytes, for a follower's ring. */
  followerHistory(from: number, budget: number): Promise<FollowerHistory>;
  /** A Pusher hub's subscriber to the room's cache channel found no last event. */
  cacheMiss(): Promise<void>;
}

/** The bindings' object types: a stub of one is its contract (the runtime types each call of a stub from them). */
type RootObject = Rpc.DurableObjectBranded & RootRpc;
type FollowerObject = Rpc.DurableObjectBranded & FollowerRpc;
type LeafObject = Rpc.DurableObjectBranded & LeafRpc;

/** The roots of rooms (the ROOMS binding), as a follower calls them. */
export function rootOf(env: Record<string, unknown>, room: string): RootRpc {
  const namespace = bindingOf<RootObject>(env.ROOMS);
  if (!namespace) throw new Error("no ROOMS binding");
  return namespace.get(namespace.idFromName(room));
}

/** A follower binding (LEAVES, HUBS, PUSHER_HUBS) as the root calls it, or null when the worker binds none. */
export function followerBinding(value: unknown): DurableObjectNamespace<FollowerObject> | null {
  return bindingOf<FollowerObject>(value);
}

/** The LEAVES binding as the root calls it, or null when the worker binds none. */
export function leafBinding(value: unknown): DurableObjectNamespace<LeafObject> | null {
  return bindingOf<LeafObject>(value);
}

function bindingOf<T extends Rpc.DurableObjectBranded>(value: unknown): DurableObjectNamespace<T> | null {
  return isNamespace<T>(value) ? value : null;
}

function isNamespace<T extends Rpc.DurableObjectBranded>(value: unknown): value is DurableObjectNamespace<T> {
  return typeof (value as { idFromName?: unknown } | null | undefined)?.idFromName === "function";
}
