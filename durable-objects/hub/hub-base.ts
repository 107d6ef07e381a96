import { CloseCode } from "../../protocol";
import { HUB_FULL_HEADER } from "../../common/edge-requests";
import { followerIndex, hubName, parseHubName } from "../../common/followers";
import { logEvent } from "../../common/log";
import { readLimits, type Limits } from "../../common/settings";
import { MEMORY_ONLY, RoomCounters } from "../engine/counters";
import type { Cursor } from "../engine/cursor";
import { NO_FRAME_HOOKS, type FrameHooks } from "../engine/frame-hooks";
import type { PublishOutcome, RetryKey } from "../engine/publish-outcome";
import { SocketEngine, type EngineHost, type SocketDialect } from "../engine/socket-engine";
import type { SocketState } from "../engine/socket-state";
import type { StreamShape } from "../engine/stream-shape";
import { endNameless, type FollowerCore } from "../leaf/follower-object";
import type { LeafBatch, LeafReport, LeafSnapshot, LeafStart } from "../leaf/rpc";
import { FollowedRooms, type FollowedRoomsHost } from "./followed-rooms";
import { HubRegistration, type HubOccupancy } from "./hub-registration";

/**
 * What every hub is, whatever protocol its connections speak: a socket
 * engine whose connections follow many rooms, the rooms they follow
 * (FollowedRooms, pushed by each room's root), and its reports. A hub of
 * multiplexed connections (hub-core.ts) and a hub of Pusher connections
 * (pusher/pusher-core.ts) add what their connections' frames do, how a room's
 * events look on them, and how a connection is accepted.
 */
export abstract class HubBase implements EngineHost, FollowerCore, FollowedRoomsHost {
  protected readonly ctx: DurableObjectState;
  protected readonly limits: Limits;
  readonly kind: "hub" | "pusher";
  /** This hub's number (`<kind>-<n>`), and its index among each room's followers. */
  readonly hub: number;
  readonly index: number;
  protected readonly counters = new RoomCounters(MEMORY_ONLY);
  readonly engine: SocketEngine;
  readonly rooms: FollowedRooms;
  readonly #registration: HubRegistration;

  constructor(ctx: DurableObjectState, env: Record<string, unknown>, kind: "hub" | "pusher", dialect?: SocketDialect) {
    this.ctx = ctx;
    this.kind = kind;
    this.limits = readLimits(env);
    // As a leaf: an instance its alarm starts after a restart has no name, and ends itself (follower-object.ts).
    const named = parseHubName(ctx.id.name ?? "");
    this.hub = named?.kind === kind ? named.n : -1;
    this.index = followerIndex(kind, this.hub);
    this.engine = new SocketEngine(ctx, this.limits, this.counters, this, dialect);
    this.rooms = new FollowedRooms(env, this.limits, this);
    this.#registration = new HubRegistration(env, ctx, this.counters, kind, this.hub);
    // Counted on the local server only (LOCAL_ADMIN_TOKEN is the launcher's): every wake-up of an idle hub is one.
    if (env.LOCAL_ADMIN_TOKEN !== undefined && this.hub >= 0) logEvent("instance_started", { hub: this.name() });
  }

  /** A connection forwarded by the edge (validated there): accepted in the hub's protocol. */
  abstract upgrade(request: Request): Promise<Response>;
  /** How a room's events look on this hub's connections. */
  abstract shapeOf(room: string): StreamShape;
  /** A connection's publish through the engine's publish frames (a hub of Pusher connections has none). */
  abstract publishFrom(cursor: Cursor, dataJson: string, retry?: RetryKey): Promise<PublishOutcome>;

  get nameless(): boolean {
    return this.hub < 0;
  }

  end(): Promise<void> {
    return endNameless(this.ctx, this.kind === "hub" ? "hub" : "Pusher hub");
  }

  get logFields(): Record<string, unknown> {
    return { [this.kind === "hub" ? "hub" : "pusherHub"]: this.hub };
  }

  name(): string {
    return hubName(this.kind, this.hub);
  }

  /** The hub's answer to one more connection when it holds its maximum: the edge tries another. */
  protected full(): Response | null {
    if (this.engine.size < this.limits.MAX_CONNECTIONS_PER_HUB) return null;
    return Response.json(
      { error: "over_capacity", message: "this hub holds its maximum of connections" },
      { status: 503, headers: { [HUB_FULL_HEADER]: String(this.engine.size), "Retry-After": "1" } },
    );
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

  get hooks(): FrameHooks {
    return NO_FRAME_HOOKS;
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

  /** A hub keeps nothing that falls due: no work of its own on its alarm. */
  alarmWanted(): null {
    return null;
  }

  async onAlarm(): Promise<void> {}

  /** Before a connection's frame: an ack is checked against the room's cursor, so each of its rooms must know where it stands. */
  async beforeFrame(socket: SocketState): Promise<boolean> {
    try {
      await this.rooms.ensureKnown(socket);
      return true;
    } catch (error) {
      logEvent("error", { ...this.logFields, where: "hub_sync", error: String(error) });
      this.engine.delivery.close(socket.ws, CloseCode.INTERNAL_ERROR, "internal error");
      return false;
    }
  }

  // -------------------------------------------------------------------------
  // The followed rooms' host
  // -------------------------------------------------------------------------

  occupancy(occupancy: HubOccupancy): void {
    this.#registration.report(occupancy);
  }
}
