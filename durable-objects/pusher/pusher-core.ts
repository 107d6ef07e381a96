import { CloseCode } from "../../protocol";
import { PUSHER_ACTIVITY_TIMEOUT_SECONDS, pusherFrame, channelOfRoom, parsePusherChannel } from "../../protocol/pusher";
import { HUB_FULL_HEADER } from "../../common/edge-requests";
import { followerIndex, parseHubName } from "../../common/followers";
import { logEvent } from "../../common/log";
import { pusherSettings, readLimits, type Limits, type PusherApp } from "../../common/settings";
import { MEMORY_ONLY, RoomCounters } from "../engine/counters";
import type { Cursor } from "../engine/cursor";
import { NO_FRAME_HOOKS, type FrameHooks } from "../engine/frame-hooks";
import type { ForeignFrames } from "../engine/client-frames";
import type { PublishOutcome } from "../engine/publish-outcome";
import { SocketEngine, type EngineHost } from "../engine/socket-engine";
import type { SocketState } from "../engine/socket-state";
import { ROOM_SHAPE, type StreamShape } from "../engine/stream-shape";
import { FollowedRooms, type FollowedRoomsHost } from "../hub/followed-rooms";
import { HubRegistration, type HubOccupancy } from "../hub/hub-registration";
import { endNameless, type FollowerCore } from "../leaf/follower-object";
import type { LeafBatch, LeafReport, LeafSnapshot, LeafStart } from "../leaf/rpc";
import { PUSHER_DIALECT } from "./pusher-dialect";
import { PusherFrames } from "./pusher-frames";
import { PusherShape } from "./pusher-shape";
import { SubscriptionRecords, type PusherAttachment } from "./subscriptions";

/** A socket id as Pusher's server SDKs accept it: two unsigned integers and a dot, unguessable. */
function newSocketId(): string {
  const words = crypto.getRandomValues(new Uint32Array(2));
  return `${words[0]}.${words[1]}`;
}

/**
 * A Pusher hub's parts and the one object they talk to: the socket engine in
 * Pusher's dialect (pusher-dialect.ts), the channels' rooms its connections
 * follow (FollowedRooms, as a hub of multiplexed connections follows them),
 * and what a Pusher connection's frames do (PusherFrames).
 */
export class PusherCore implements EngineHost, FollowerCore, FollowedRoomsHost, ForeignFrames {
  readonly #ctx: DurableObjectState;
  readonly #limits: Limits;
  /** The app the front door serves; null when it is off (no connection reaches a hub then). */
  readonly #app: PusherApp | null;
  /** This hub's number (`pusher-<n>`), and its index among each room's followers. */
  readonly hub: number;
  readonly index: number;
  readonly #counters = new RoomCounters(MEMORY_ONLY);
  readonly engine: SocketEngine;
  readonly rooms: FollowedRooms;
  readonly #records: SubscriptionRecords;
  readonly #frames: PusherFrames;
  readonly #registration: HubRegistration;

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    this.#ctx = ctx;
    const limits = readLimits(env);
    this.#limits = limits;
    this.#app = pusherSettings(env).app;
    const named = parseHubName(ctx.id.name ?? "");
    this.hub = named?.kind === "pusher" ? named.n : -1;
    this.index = followerIndex("pusher", this.hub);
    this.engine = new SocketEngine(ctx, limits, this.#counters, this, PUSHER_DIALECT);
    this.rooms = new FollowedRooms(env, limits, this);
    this.#records = new SubscriptionRecords(ctx.storage.sql);
    this.#frames = new PusherFrames(this.#app, limits, this.engine, this.rooms, this.#records, this.#counters);
    this.#registration = new HubRegistration(env, ctx, this.#counters, "pusher", this.hub);
    // Connections that were here when the hub woke follow their channels again, each as the
    // member it was there; where each room stands is asked of its root before anything is served.
    const live = new Set<string>();
    this.engine.restore((attachment) => {
      const pusher = attachment as PusherAttachment;
      live.add(pusher.id);
      return this.#records.list(pusher).map((subscription) => ({
        stream: this.rooms.roomFor(this.#roomOf(subscription.channel)).follower.stream,
        seq: 0,
        as: { ...(subscription.member ? { member: subscription.member } : {}), ...(subscription.watch ? { watching: true as const } : {}) },
      }));
    });
    this.#records.prune(live);
  }

  get nameless(): boolean {
    return this.hub < 0;
  }

  end(): Promise<void> {
    return endNameless(this.#ctx, "Pusher hub");
  }

  get logFields(): Record<string, unknown> {
    return { pusherHub: this.hub };
  }

  // -------------------------------------------------------------------------
  // Connections, from the edge
  // -------------------------------------------------------------------------

  /** A Pusher connection the edge checked (app key, protocol version): `pusher:connection_established` with its socket id. */
  async upgrade(): Promise<Response> {
    if (this.#app === null) return Response.json({ error: "not_found", message: "the Pusher front door is off" }, { status: 404 });
    if (this.engine.size >= this.#limits.MAX_CONNECTIONS_PER_HUB) {
      return Response.json(
        { error: "over_capacity", message: "this hub holds its maximum of connections" },
        { status: 503, headers: { [HUB_FULL_HEADER]: String(this.engine.size), "Retry-After": "1" } },
      );
    }
    const now = Date.now();
    const attachment: PusherAttachment = { id: newSocketId(), connectedAt: now, canPublish: false, expiresAt: null };
    const welcome = pusherFrame("pusher:connection_established", { socket_id: attachment.id, activity_timeout: PUSHER_ACTIVITY_TIMEOUT_SECONDS });
    return this.engine.acceptConnection(attachment, welcome);
  }

  /** Closes the connections of a signed-in user (`terminate_connections`); returns how many. */
  terminate(user: string): number {
    let closed = 0;
    for (const socket of [...this.engine.delivery.sockets()]) {
      if ((socket.attachment as PusherAttachment).user !== user) continue;
      this.engine.delivery.close(socket.ws, CloseCode.FORBIDDEN, "connections of this user were terminated by the app");
      closed += 1;
    }
    return closed;
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
  // The engine's host
  // -------------------------------------------------------------------------

  get foreign(): ForeignFrames {
    return this;
  }

  frame(socket: SocketState, text: string, now: number): Promise<void> {
    return this.#frames.handle(socket, text, now);
  }

  get hooks(): FrameHooks {
    return NO_FRAME_HOOKS;
  }

  name(): string {
    return `pusher-${this.hub}`;
  }

  /** Pusher connections publish client events through PusherFrames, never through the engine's publish frames. */
  async publishFrom(_cursor: Cursor): Promise<PublishOutcome> {
    return { refused: { error: "forbidden", message: "a Pusher connection publishes client events" } };
  }

  occupancyChanged(): void {
    this.rooms.report();
  }

  left(socket: SocketState): void {
    this.rooms.left(socket);
    this.#records.forget(socket.attachment as PusherAttachment);
  }

  heartbeat(): void {
    this.rooms.heartbeat();
  }

  otherSockets(): number {
    return 0;
  }

  /** A hub stores nothing of its own but its connections' channels: no work on its alarm. */
  alarmWanted(): null {
    return null;
  }

  async onAlarm(): Promise<void> {}

  async beforeFrame(socket: SocketState): Promise<boolean> {
    try {
      await this.rooms.ensureKnown(socket);
      return true;
    } catch (error) {
      logEvent("error", { pusherHub: this.hub, where: "hub_sync", error: String(error) });
      this.engine.delivery.close(socket.ws, CloseCode.INTERNAL_ERROR, "internal error");
      return false;
    }
  }

  // -------------------------------------------------------------------------
  // The followed rooms' host
  // -------------------------------------------------------------------------

  shapeOf(room: string): StreamShape {
    const held = channelOfRoom(room);
    const channel = held === null ? null : parsePusherChannel(held.channel);
    // Only channels' rooms are followed from here; anything else would reach no Pusher client.
    return channel ? new PusherShape(channel) : ROOM_SHAPE;
  }

  occupancy(occupancy: HubOccupancy): void {
    this.#registration.report(occupancy);
  }

  // -------------------------------------------------------------------------

  #roomOf(channel: string): string {
    return this.#frames.roomOf(channel);
  }
}
