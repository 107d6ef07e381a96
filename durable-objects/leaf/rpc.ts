/**
 * What the root of a sharded room and its leaves say to each other
 * (docs/sharded-rooms.md). These shapes are internal to the server: clients
 * see the wire protocol of protocol/, the same on every object of a room, and
 * none of this. A leaf knows which room and index it is from its own name
 * (`<room>/<index>`, common/edge-requests.ts).
 */
import type { RoomCounterValues, RoomLeafStats } from "../../protocol";
import type { Message } from "../engine/message";
import type { Roster } from "../engine/presence";

/** Where the room stands, for a leaf that opens or lost track (its sockets are level at `seq`). */
export interface LeafStart {
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
export interface LeafBatch {
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
export interface LeafMember {
  id: string;
  present: boolean;
  connections: number;
  info?: string;
  verified: boolean;
}

/** What a leaf tells the root, in answer to each push and on its own when its sockets change. */
export interface LeafReport {
  /** The leaf's sockets are level with the room up to this seq. */
  seq: number;
  connections: number;
  /** Sockets catching up from the leaf's ring. */
  behind: number;
  /** Members whose state changed since the last report (every member when the push asked for `full`). */
  members: LeafMember[];
  full: boolean;
  /** Counters that grew since the last report (deliveries, frames, kicks...), added to the room's. */
  delta: RoomCounterValues | null;
}

/** History from the root for a leaf whose ring does not reach back far enough, or that missed a push. */
export interface LeafHistory {
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
export interface LeafSnapshot extends Omit<RoomLeafStats, "reachable"> {
  unreported: RoomCounterValues | null;
}

/**
 * What the root of a room calls on an object that follows it (a leaf, or an
 * object holding multiplexed connections that follow the room among others):
 * each call names the room, for the objects that follow several.
 */
export interface FollowerRpc {
  open(start: LeafStart): Promise<void>;
  push(batch: LeafBatch): Promise<LeafReport>;
  /** The root stops pushing `room`: false when a socket of it arrived since the last report. */
  retire(room: string): Promise<boolean>;
  snapshot(room: string): Promise<LeafSnapshot>;
}
