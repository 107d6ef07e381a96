import { CloseCode, type AuthFrame, type AuthorizedEvent, type ErrorCode, type SubscribeFrame, type UnsubscribeFrame } from "../../protocol";
import { grantsFromHeaders, HUB_FOLLOWER_BASE, HUB_FULL_HEADER, parseHubName } from "../../common/edge-requests";
import { logEvent } from "../../common/log";
import { accessSettings, historyRules, readLimits, type Limits } from "../../common/settings";
import { retentionFor } from "../../common/retention";
import { accessTo, grantsOf, verifyToken, type RoomGrant } from "../../common/tokens";
import { attachmentFromEdge, type SocketAttachment } from "../engine/attachment";
import { MEMORY_ONLY, RoomCounters } from "../engine/counters";
import type { Cursor } from "../engine/cursor";
import { NO_FRAME_HOOKS, type FrameHooks } from "../engine/frame-hooks";
import type { MultiplexFrames } from "../engine/client-frames";
import type { PublishOutcome, RetryKey } from "../engine/publish-outcome";
import { SocketEngine, type EngineHost } from "../engine/socket-engine";
import type { SocketState } from "../engine/socket-state";
import { TokenBucket, type RatePolicy } from "../engine/token-bucket";
import { endNameless, type FollowerCore } from "../leaf/follower-object";
import type { LeafBatch, LeafReport, LeafSnapshot, LeafStart } from "../leaf/rpc";
import type { Room } from "../room/room";
import { HubRegistration } from "./hub-registration";
import { HubRoom } from "./hub-room";

/** A multiplexed connection's attachment: the socket's, plus what its token grants and the rooms it follows. */
interface HubAttachment extends SocketAttachment {
  /** The rooms the connection's token opens (null: every room, with publishing: the service has no TOKEN_SECRET). */
  grants: RoomGrant[] | null;
  /** The rooms it follows, so that they are followed again when the hub wakes. */
  rooms: string[];
  /**
   * The start of the epoch each of `rooms` was followed under (same order), so
   * that a hub that wakes can tell a room whose history started over meanwhile
   * (an ephemeral room that restarted) and close the connection, as it would
   * awake. Absent in attachments written before it was kept.
   */
  epochs?: string[];
}

/** Characters of an epoch a connection's attachment keeps per room: enough to tell two apart, small beside 100 room names. */
const EPOCH_PREFIX = 8;

/** A room's root refused to be followed from here (it holds its own sockets, with hooks). */
class FollowRefused extends Error {}

/**
 * A hub's parts and the one object they talk to: the socket engine (whose
 * sockets are multiplexed connections), the rooms those follow (HubRoom: a
 * follower of each room's root, as a leaf follows its room), and what a
 * connection's own frames do (subscribe, unsubscribe, a fresh token).
 */
export class HubCore implements EngineHost, MultiplexFrames, FollowerCore {
  readonly #ctx: DurableObjectState;
  readonly #env: Record<string, unknown>;
  readonly #limits: Limits;
  /** This hub's number (`hub-<n>`), and its index among each room's followers. */
  readonly hub: number;
  readonly index: number;
  readonly #counters = new RoomCounters(MEMORY_ONLY);
  readonly engine: SocketEngine;
  readonly #rooms = new Map<string, HubRoom>();
  readonly #subscribeBudgets = new WeakMap<SocketState, TokenBucket>();
  /** Subscribes of each socket still waiting for their room's root. */
  readonly #pending = new WeakMap<SocketState, Set<string>>();
  readonly #subscribeRate: RatePolicy;
  readonly #registration: HubRegistration;

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    this.#ctx = ctx;
    this.#env = env;
    const limits = readLimits(env);
    this.#limits = limits;
    // As a leaf: an instance its alarm starts after a restart has no name, and ends itself (hub.ts).
    this.hub = parseHubName(ctx.id.name ?? "") ?? -1;
    this.index = HUB_FOLLOWER_BASE + this.hub;
    this.#subscribeRate = { perSecond: limits.SUBSCRIBES_PER_SECOND, burst: Math.max(1, limits.SUBSCRIBE_BURST) };
    this.engine = new SocketEngine(ctx, limits, this.#counters, this);
    this.#registration = new HubRegistration(env, ctx, this.#counters, this.hub);
    // Connections that were here when the hub woke follow their rooms again; where each room
    // stands is asked of its root before anything is served (beforeFrame, or the root's next push).
    this.engine.restore((attachment) => {
      const { rooms = [], epochs } = attachment as HubAttachment;
      return rooms.map((room, i) => {
        const follower = this.#roomFor(room).follower;
        const epoch = epochs?.[i];
        if (epoch) follower.expect(epoch);
        return { stream: follower.stream, seq: 0 };
      });
    });
  }

  get nameless(): boolean {
    return this.hub < 0;
  }

  end(): Promise<void> {
    return endNameless(this.#ctx, "hub");
  }

  get logFields(): Record<string, unknown> {
    return { hub: this.hub };
  }

  // -------------------------------------------------------------------------
  // Connections, from the edge
  // -------------------------------------------------------------------------

  async upgrade(request: Request): Promise<Response> {
    if (this.engine.size >= this.#limits.MAX_CONNECTIONS_PER_HUB) {
      return Response.json(
        { error: "over_capacity", message: "this hub holds its maximum of connections" },
        { status: 503, headers: { [HUB_FULL_HEADER]: String(this.engine.size), "Retry-After": "1" } },
      );
    }
    const attachment: HubAttachment = { ...attachmentFromEdge(request.headers, Date.now()), grants: grantsFromHeaders(request.headers), rooms: [] };
    return this.engine.acceptConnection(attachment);
  }

  // -------------------------------------------------------------------------
  // From a room's root
  // -------------------------------------------------------------------------

  open(start: LeafStart): Promise<void> {
    return this.#roomFor(start.room).follower.open(start);
  }

  async push(batch: LeafBatch): Promise<LeafReport> {
    const room = this.#roomFor(batch.room);
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
    return this.#roomFor(name).snapshot();
  }

  // -------------------------------------------------------------------------
  // A connection's own frames
  // -------------------------------------------------------------------------

  async subscribe(socket: SocketState, frame: SubscribeFrame): Promise<void> {
    const { room } = frame;
    const refuse = (code: ErrorCode, message: string): void => {
      this.#counters.refused(`subscribe_${code}`);
      this.engine.delivery.sendControl(socket, JSON.stringify({ type: "error", room, code, message, ...(frame.id === undefined ? {} : { id: frame.id }) }));
    };
    let budget = this.#subscribeBudgets.get(socket);
    if (!budget) this.#subscribeBudgets.set(socket, (budget = new TokenBucket()));
    if (!budget.take(Date.now(), this.#subscribeRate)) return refuse("rate_limited", `over ${this.#subscribeRate.perSecond} subscribes per second`);
    const pending = this.#pendingOf(socket);
    if (socket.cursors.has(room) || pending.has(room)) return refuse("bad_request", "the connection already follows this room");
    if (socket.cursors.size + pending.size >= this.#limits.MAX_ROOMS_PER_CONNECTION) {
      return refuse("too_many_rooms", `a connection follows at most ${this.#limits.MAX_ROOMS_PER_CONNECTION} rooms`);
    }
    const attachment = socket.attachment as HubAttachment;
    if (attachment.grants !== null && accessTo(attachment.grants, room) === null) return refuse("forbidden", "the connection's token does not open this room");
    const hubRoom = this.#roomFor(room);
    pending.add(room);
    try {
      await hubRoom.follower.ensureKnown();
    } catch (error) {
      if (error instanceof FollowRefused) refuse("forbidden", error.message);
      else {
        logEvent("error", { room, hub: this.hub, where: "hub_follow", error: String(error) });
        refuse("internal", "the room could not be reached; subscribe again");
      }
      this.#dropIfUnused(hubRoom);
      return;
    } finally {
      pending.delete(room);
    }
    // Closed while the root answered.
    if (this.engine.delivery.get(socket.ws) !== socket) return;
    const cursor = this.engine.subscribe(socket, hubRoom.follower.stream, { since: frame.since ?? null, epoch: frame.epoch ?? null, rewind: null }, hubRoom.follower.epoch);
    if (!cursor) return;
    // Rooms followed before epochs were kept have none (""): nothing to compare them with.
    attachment.epochs ??= attachment.rooms.map(() => "");
    attachment.rooms.push(room);
    attachment.epochs.push(hubRoom.follower.epoch.slice(0, EPOCH_PREFIX));
    this.#persist(socket);
    hubRoom.changed();
  }

  unsubscribe(socket: SocketState, frame: UnsubscribeFrame): void {
    const cursor = socket.cursors.get(frame.room);
    if (!cursor) {
      this.engine.delivery.sendControl(socket, JSON.stringify({ type: "error", room: frame.room, code: "not_subscribed", message: "the connection does not follow this room", ...(frame.id === undefined ? {} : { id: frame.id }) }));
      return;
    }
    this.#end(cursor);
  }

  async authorize(socket: SocketState, frame: AuthFrame): Promise<void> {
    const secret = accessSettings(this.#env).tokenSecret;
    if (secret === null) {
      this.engine.delivery.sendControl(socket, JSON.stringify({ type: "error", code: "bad_request", message: "the service takes no tokens (no TOKEN_SECRET)" }));
      return;
    }
    const check = await verifyToken(frame.token, secret);
    if (this.engine.delivery.get(socket.ws) !== socket) return;
    if (!check.ok) {
      this.#counters.refused(check.reason);
      this.engine.delivery.close(socket.ws, CloseCode.UNAUTHORIZED, check.message);
      return;
    }
    const attachment = socket.attachment as HubAttachment;
    // The connection is one member in every room it follows: a token for another would change who it is.
    if ((attachment.member?.verified ? attachment.member.id : undefined) !== check.claims.sub) {
      this.#counters.refused("token_member_changed");
      this.engine.delivery.close(socket.ws, CloseCode.FORBIDDEN, "a fresh token must be for the same member (sub)");
      return;
    }
    attachment.grants = grantsOf(check.claims);
    attachment.expiresAt = Math.min(Math.floor(check.claims.exp * 1000), Number.MAX_SAFE_INTEGER);
    for (const cursor of [...socket.cursors.values()]) {
      if (accessTo(attachment.grants, cursor.stream.room) === null) this.#end(cursor, { code: "forbidden", reason: "the connection's new token does not open this room" });
    }
    this.#persist(socket);
    const authorized: AuthorizedEvent = { type: "authorized", exp: check.claims.exp };
    this.engine.delivery.sendControl(socket, JSON.stringify(authorized));
  }

  mayPublish(socket: SocketState, room: string): boolean {
    const grants = (socket.attachment as HubAttachment).grants;
    if (grants === null) return socket.attachment.canPublish;
    return accessTo(grants, room)?.pub === true;
  }

  // -------------------------------------------------------------------------
  // The engine's host
  // -------------------------------------------------------------------------

  get multiplexed(): MultiplexFrames {
    return this;
  }

  get hooks(): FrameHooks {
    return NO_FRAME_HOOKS;
  }

  name(): string {
    return `hub-${this.hub}`;
  }

  /** A connection publishes into a room: the room's root runs beforePublish, if its class has one, and may refuse. */
  async publishFrom(cursor: Cursor, dataJson: string, retry?: RetryKey): Promise<PublishOutcome> {
    // The root hashes the data itself (it arrives as the connection sent it) and looks the key up.
    return (await this.root(cursor.stream.room).publish(dataJson, retry ? { source: "multiplexed", retryKey: retry.key } : { source: "multiplexed" })) as PublishOutcome;
  }

  occupancyChanged(): void {
    this.#report();
  }

  left(socket: SocketState): void {
    for (const cursor of socket.cursors.values()) this.#rooms.get(cursor.stream.room)?.changed();
  }

  heartbeat(): void {
    for (const room of this.#rooms.values()) room.changed();
    this.#report();
  }

  otherSockets(): number {
    return 0;
  }

  /** A hub stores nothing: it has no work of its own on its alarm. */
  alarmWanted(): null {
    return null;
  }

  async onAlarm(): Promise<void> {}

  /** Before a connection's frame: an ack is checked against the room's cursor, so each room must know where it stands. */
  async beforeFrame(socket: SocketState): Promise<boolean> {
    try {
      await Promise.all([...socket.cursors.values()].map((cursor) => this.#rooms.get(cursor.stream.room)?.follower.ensureKnown()));
      return true;
    } catch (error) {
      logEvent("error", { hub: this.hub, where: "hub_sync", error: String(error) });
      this.engine.delivery.close(socket.ws, CloseCode.INTERNAL_ERROR, "internal error");
      return false;
    }
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

  // -------------------------------------------------------------------------

  #roomFor(name: string): HubRoom {
    let room = this.#rooms.get(name);
    if (!room) {
      // As far back as the room's history reaches (its HISTORY_RULES rule, by its name).
      room = new HubRoom(name, this, { maxMessages: retentionFor(name, historyRules(this.#env), this.#limits).maxMessages, batch: { maxBytes: this.#limits.BATCH_MAX_BYTES, maxEvents: this.#limits.BATCH_MAX_EVENTS } });
      this.#rooms.set(name, room);
    }
    return room;
  }

  /** A room no connection here follows, which the root was never asked about, is forgotten at once. */
  #dropIfUnused(room: HubRoom): void {
    if (room.subscribers > 0 || room.follower.known) return;
    this.#rooms.delete(room.room);
    this.engine.closeStream(room.follower.stream);
  }

  /** What the hub holds, to the coordinator (GET /metrics). */
  #report(): void {
    let subscriptions = 0;
    let rooms = 0;
    for (const room of this.#rooms.values()) {
      subscriptions += room.subscribers;
      if (room.subscribers > 0) rooms += 1;
    }
    this.#registration.report({ connections: this.engine.size, subscriptions, rooms });
  }

  #pendingOf(socket: SocketState): Set<string> {
    let pending = this.#pending.get(socket);
    if (!pending) this.#pending.set(socket, (pending = new Set()));
    return pending;
  }

  /** The connection stops following `cursor`'s room; the root retires the room here once nobody follows it. */
  #end(cursor: Cursor, why?: { code: ErrorCode; reason: string }): void {
    const { socket, stream } = cursor;
    this.engine.unsubscribe(cursor, why);
    const attachment = socket.attachment as HubAttachment;
    const at = attachment.rooms.indexOf(stream.room);
    if (at >= 0) {
      attachment.rooms.splice(at, 1);
      attachment.epochs?.splice(at, 1);
    }
    this.#persist(socket);
    this.#rooms.get(stream.room)?.changed();
  }

  #persist(socket: SocketState): void {
    try {
      socket.ws.serializeAttachment(socket.attachment);
    } catch {
      // Closing meanwhile: nothing of it needs to survive.
    }
  }
}
