import { CloseCode, type AuthFrame, type AuthorizedEvent, type ErrorCode, type SubscribeFrame, type UnsubscribeFrame } from "../../protocol";
import { grantsFromHeaders, HUB_FULL_HEADER } from "../../common/edge-requests";
import { followerIndex, parseHubName } from "../../common/followers";
import { accessSettings, readLimits, type Limits } from "../../common/settings";
import { accessTo, grantsOf, verifyToken, type RoomGrant } from "../../common/tokens";
import { attachmentFromEdge, type SocketAttachment } from "../engine/attachment";
import { MEMORY_ONLY, RoomCounters } from "../engine/counters";
import type { Cursor } from "../engine/cursor";
import { NO_FRAME_HOOKS, type FrameHooks } from "../engine/frame-hooks";
import type { MultiplexFrames } from "../engine/client-frames";
import type { PublishOutcome, RetryKey } from "../engine/publish-outcome";
import { SocketEngine, type EngineHost } from "../engine/socket-engine";
import type { SocketState } from "../engine/socket-state";
import { scopedShape, type StreamShape } from "../engine/stream-shape";
import { TokenBucket, type RatePolicy } from "../engine/token-bucket";
import { endNameless, type FollowerCore } from "../leaf/follower-object";
import type { LeafBatch, LeafReport, LeafSnapshot, LeafStart } from "../leaf/rpc";
import { FollowedRooms, type FollowedRoomsHost } from "./followed-rooms";
import { HubRegistration, type HubOccupancy } from "./hub-registration";
import { isPrivatePusherRoom } from "../../protocol/pusher";
import { logEvent } from "../../common/log";

/** A multiplexed connection's attachment: the socket's, plus what its token grants and the rooms it follows. */
interface HubAttachment extends SocketAttachment {
  /** The rooms the connection's token opens (null: every room, with publishing: the service has no TOKEN_SECRET). */
  grants: RoomGrant[] | null;
  /** The rooms it follows, so that they are followed again when the hub wakes. */
  rooms: string[];
}

/**
 * A hub's parts and the one object they talk to: the socket engine (whose
 * sockets are multiplexed connections), the rooms those follow
 * (FollowedRooms), and what a connection's own frames do (subscribe,
 * unsubscribe, a fresh token).
 */
export class HubCore implements EngineHost, MultiplexFrames, FollowerCore, FollowedRoomsHost {
  readonly #ctx: DurableObjectState;
  readonly #env: Record<string, unknown>;
  readonly #limits: Limits;
  /** This hub's number (`hub-<n>`), and its index among each room's followers. */
  readonly hub: number;
  readonly index: number;
  readonly #counters = new RoomCounters(MEMORY_ONLY);
  readonly engine: SocketEngine;
  readonly rooms: FollowedRooms;
  readonly #subscribeBudgets = new WeakMap<SocketState, TokenBucket>();
  readonly #subscribeRate: RatePolicy;
  readonly #registration: HubRegistration;

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    this.#ctx = ctx;
    this.#env = env;
    const limits = readLimits(env);
    this.#limits = limits;
    // As a leaf: an instance its alarm starts after a restart has no name, and ends itself (hub.ts).
    const named = parseHubName(ctx.id.name ?? "");
    this.hub = named?.kind === "hub" ? named.n : -1;
    this.index = followerIndex("hub", this.hub);
    this.#subscribeRate = { perSecond: limits.SUBSCRIBES_PER_SECOND, burst: Math.max(1, limits.SUBSCRIBE_BURST) };
    this.engine = new SocketEngine(ctx, limits, this.#counters, this);
    this.rooms = new FollowedRooms(env, limits, this);
    this.#registration = new HubRegistration(env, ctx, this.#counters, "hub", this.hub);
    // Connections that were here when the hub woke follow their rooms again; where each room
    // stands is asked of its root before anything is served (beforeFrame, or the root's next push).
    this.engine.restore((attachment) => {
      const rooms = (attachment as HubAttachment).rooms ?? [];
      return rooms.map((room) => ({ stream: this.rooms.roomFor(room).follower.stream, seq: 0 }));
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
    return this.rooms.open(start);
  }

  push(batch: LeafBatch): Promise<LeafReport> {
    return this.rooms.push(batch);
  }

  retire(name: string): boolean {
    return this.rooms.retire(name);
  }

  snapshot(name: string): LeafSnapshot {
    return this.rooms.snapshot(name);
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
    const attachment = socket.attachment as HubAttachment;
    if (attachment.grants === null ? isPrivatePusherRoom(room) : accessTo(attachment.grants, room) === null) {
      return refuse("forbidden", "the connection's token does not open this room");
    }
    const followed = await this.rooms.follow(socket, room, { start: { since: frame.since ?? null, epoch: frame.epoch ?? null, rewind: null } });
    if (followed === null) return;
    if (!("socket" in followed)) return refuse(followed.code, followed.message);
    attachment.rooms.push(room);
    this.#persist(socket);
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
    if (grants === null) return socket.attachment.canPublish && !isPrivatePusherRoom(room);
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
    return (await this.rooms.root(cursor.stream.room).publish(dataJson, retry ? { source: "multiplexed", retryKey: retry.key } : { source: "multiplexed" })) as PublishOutcome;
  }

  occupancyChanged(): void {
    this.rooms.report();
  }

  left(socket: SocketState): void {
    this.rooms.left(socket);
  }

  heartbeat(): void {
    this.rooms.heartbeat();
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
      await this.rooms.ensureKnown(socket);
      return true;
    } catch (error) {
      logEvent("error", { hub: this.hub, where: "hub_sync", error: String(error) });
      this.engine.delivery.close(socket.ws, CloseCode.INTERNAL_ERROR, "internal error");
      return false;
    }
  }

  // -------------------------------------------------------------------------
  // The followed rooms' host
  // -------------------------------------------------------------------------

  shapeOf(room: string): StreamShape {
    return scopedShape(room);
  }

  occupancy(occupancy: HubOccupancy): void {
    this.#registration.report(occupancy);
  }

  // -------------------------------------------------------------------------

  /** The connection stops following `cursor`'s room. */
  #end(cursor: Cursor, why?: { code: ErrorCode; reason: string }): void {
    const { socket, stream } = cursor;
    this.rooms.end(cursor, why);
    const attachment = socket.attachment as HubAttachment;
    attachment.rooms = attachment.rooms.filter((room) => room !== stream.room);
    this.#persist(socket);
  }

  #persist(socket: SocketState): void {
    try {
      socket.ws.serializeAttachment(socket.attachment);
    } catch {
      // Closing meanwhile: nothing of it needs to survive.
    }
  }
}
