import type { ErrorCode, ResumePoint } from "../../protocol";
import { logEvent } from "../../common/log";
import { historyRules, type Limits } from "../../common/settings";
import { retentionFor } from "../../common/retention";
import type { Cursor, FollowAs } from "../engine/cursor";
import type { SocketEngine } from "../engine/socket-engine";
import type { SocketState } from "../engine/socket-state";
import type { StreamShape } from "../engine/stream-shape";
import type { FollowerHost } from "../leaf/follower";
import type { LeafBatch, LeafReport, LeafSnapshot, LeafStart } from "../leaf/rpc";
import type { Room } from "../room/room";
import type { HubOccupancy } from "./hub-registration";
import { HubRoom } from "./hub-room";

/** What following rooms for an object's connections needs of the object. */
export interface FollowedRoomsHost {
  readonly engine: SocketEngine;
  /** This object's index among each room's followers (common/followers.ts). */
  readonly index: number;
  /** How a room's events look on this object's connections. */
  shapeOf(room: string): StreamShape;
  /** What the object holds changed (for its report to the coordinator). */
  occupancy(occupancy: HubOccupancy): void;
  /** For logs. */
  name(): string;
}

/** Why a connection could not follow a room: an `ErrorCode` and words for people. */
export interface FollowRefusal {
  code: ErrorCode;
  message: string;
}

/** How a connection follows a room, beyond its name. */
export interface FollowOptions {
  /** Where its cursor starts: a resume point, or one decided once the room is known here (a Pusher cache channel's last event). */
  start: ResumePoint | ((room: HubRoom) => ResumePoint);
  /** Who the connection is in this room's presence (its own identity when absent), and whether it only watches it. */
  as?: FollowAs;
  /** A last word, once the room is known here: a refusal, or null to follow it (a presence channel's member cap). */
  admit?: (room: HubRoom) => FollowRefusal | null;
}

/** A room's root refused to be followed from here (it holds its own sockets, with hooks). */
class FollowRefused extends Error {}

/**
 * The rooms an object's connections follow, each followed from its root as a
 * leaf follows its room (HubRoom: a ring, pushes, fetches, reports): what a
 * hub of multiplexed connections and a hub of Pusher connections share.
 * A connection follows a room here (`follow`) once its own protocol has said
 * it may; the room is asked where it stands once however many connections
 * wait, and forgotten once nobody here follows it.
 */
export class FollowedRooms implements FollowerHost {
  readonly #env: Record<string, unknown>;
  readonly #limits: Limits;
  readonly #host: FollowedRoomsHost;
  readonly #rooms = new Map<string, HubRoom>();
  /** Rooms each socket is waiting to follow (its root has not answered yet). */
  readonly #pending = new WeakMap<SocketState, Set<string>>();

  constructor(env: Record<string, unknown>, limits: Limits, host: FollowedRoomsHost) {
    this.#env = env;
    this.#limits = limits;
    this.#host = host;
  }

  get index(): number {
    return this.#host.index;
  }

  get engine(): SocketEngine {
    return this.#host.engine;
  }

  /** The room followed here as `name` (made on first use). */
  roomFor(name: string): HubRoom {
    let room = this.#rooms.get(name);
    if (!room) {
      // As far back as the room's history reaches (its HISTORY_RULES rule, by its name).
      room = new HubRoom(name, this, this.#host.shapeOf(name), {
        maxMessages: retentionFor(name, historyRules(this.#env), this.#limits).maxMessages,
        batch: { maxBytes: this.#limits.BATCH_MAX_BYTES, maxEvents: this.#limits.BATCH_MAX_EVENTS },
      });
      this.#rooms.set(name, room);
    }
    return room;
  }

  /** Whether `socket` follows `room`, or waits to. */
  follows(socket: SocketState, room: string): boolean {
    return socket.cursors.has(room) || (this.#pending.get(socket)?.has(room) ?? false);
  }

  /** Rooms `socket` follows and waits to follow. */
  countOf(socket: SocketState): number {
    return socket.cursors.size + (this.#pending.get(socket)?.size ?? 0);
  }

  /**
   * `socket` follows `room`: once the room's root has said where it stands,
   * its engine cursor starts where `options` say. A refusal when the root
   * refused or could not be reached, when the socket already follows
   * MAX_ROOMS_PER_CONNECTION rooms or this one, or when `admit` refuses; null
   * when the socket left meanwhile.
   */
  async follow(socket: SocketState, room: string, options: FollowOptions): Promise<Cursor | FollowRefusal | null> {
    if (this.follows(socket, room)) return { code: "bad_request", message: "the connection already follows this room" };
    if (this.countOf(socket) >= this.#limits.MAX_ROOMS_PER_CONNECTION) {
      return { code: "too_many_rooms", message: `a connection follows at most ${this.#limits.MAX_ROOMS_PER_CONNECTION} rooms` };
    }
    const hubRoom = this.roomFor(room);
    let pending = this.#pending.get(socket);
    if (!pending) this.#pending.set(socket, (pending = new Set()));
    pending.add(room);
    try {
      await hubRoom.follower.ensureKnown();
    } catch (error) {
      this.#dropIfUnused(hubRoom);
      if (error instanceof FollowRefused) return { code: "forbidden", message: error.message };
      logEvent("error", { room, hub: this.#host.name(), where: "hub_follow", error: String(error) });
      return { code: "internal", message: "the room could not be reached; subscribe again" };
    } finally {
      pending.delete(room);
    }
    // Closed while the root answered.
    if (this.engine.delivery.get(socket.ws) !== socket) return null;
    const refused = options.admit?.(hubRoom) ?? null;
    if (refused) {
      this.#dropIfUnused(hubRoom);
      return refused;
    }
    const resume = typeof options.start === "function" ? options.start(hubRoom) : options.start;
    const cursor = this.engine.subscribe(socket, hubRoom.follower.stream, resume, hubRoom.follower.epoch, options.as);
    if (cursor) hubRoom.changed();
    return cursor;
  }

  /** The connection stops following `cursor`'s room (`why`: the server ended it); the root retires the room here once nobody follows it. */
  end(cursor: Cursor, why?: { code: ErrorCode; reason: string }): void {
    const room = cursor.stream.room;
    this.engine.unsubscribe(cursor, why);
    this.#rooms.get(room)?.changed();
  }

  /** A socket left: the rooms it followed report it. */
  left(socket: SocketState): void {
    for (const cursor of socket.cursors.values()) this.#rooms.get(cursor.stream.room)?.changed();
  }

  /** The sweep's heartbeat: every room reports, and so does the object. */
  heartbeat(): void {
    for (const room of this.#rooms.values()) room.changed();
    this.report();
  }

  /** Before a connection's frame: each of its rooms must know where it stands (an ack is checked against its cursor). */
  async ensureKnown(socket: SocketState): Promise<void> {
    await Promise.all([...socket.cursors.values()].map((cursor) => this.#rooms.get(cursor.stream.room)?.follower.ensureKnown()));
  }

  /** What the object holds, to the coordinator (GET /metrics). */
  report(): void {
    let subscriptions = 0;
    let rooms = 0;
    for (const room of this.#rooms.values()) {
      subscriptions += room.subscribers;
      if (room.subscribers > 0) rooms += 1;
    }
    this.#host.occupancy({ connections: this.engine.size, subscriptions, rooms });
  }

  // -------------------------------------------------------------------------
  // From a room's root
  // -------------------------------------------------------------------------

  open(start: LeafStart): Promise<void> {
    return this.roomFor(start.room).follower.open(start);
  }

  async push(batch: LeafBatch): Promise<LeafReport> {
    const room = this.roomFor(batch.room);
    await room.follower.push(batch);
    return room.report(batch.full);
  }

  retire(name: string): boolean {
    const room = this.#rooms.get(name);
    if (!room) return true;
    if (!room.retire()) return false;
    this.#rooms.delete(name);
    this.engine.closeStream(room.follower.stream);
    return true;
  }

  snapshot(name: string): LeafSnapshot {
    return this.roomFor(name).snapshot();
  }

  // -------------------------------------------------------------------------
  // The followers' host
  // -------------------------------------------------------------------------

  root(room: string): DurableObjectStub<Room> {
    const namespace = this.#env.ROOMS as DurableObjectNamespace<Room>;
    return namespace.get(namespace.idFromName(room));
  }

  async sync(room: string): Promise<LeafStart> {
    const answer = (await this.root(room).follow(this.index)) as { start: LeafStart } | { refused: string };
    if ("refused" in answer) throw new FollowRefused(answer.refused);
    return answer.start;
  }

  /** A hub keeps no mark: after hibernation it asks each room's root where it stands. */
  moved(): void {}

  name(): string {
    return this.#host.name();
  }

  // -------------------------------------------------------------------------

  /** A room no connection here follows, which the root was never asked about, is forgotten at once. */
  #dropIfUnused(room: HubRoom): void {
    if (room.subscribers > 0 || room.follower.known) return;
    this.#rooms.delete(room.room);
    this.engine.closeStream(room.follower.stream);
  }
}
