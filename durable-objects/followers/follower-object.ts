import { logEvent } from "../../common/log";
import { SocketObject } from "../engine/socket-object";
import type { SocketEngine } from "../engine/socket-engine";
import type { FollowerBatch, FollowerReport, FollowerRpc, FollowerSnapshot, FollowStart } from "./contracts";

/**
 * What an object that follows rooms wires behind its face: a leaf (one room)
 * or a hub (many). Room-scoped calls name the room; a leaf ignores the name.
 */
export interface FollowerCore {
  readonly engine: SocketEngine;
  /** The instance does not know which follower it is (started by its alarm after a restart). */
  readonly nameless: boolean;
  /** Ends a nameless instance, its alarm first, so that the next call, which names it, starts it afresh. */
  end(): Promise<void>;
  /** An upgrade the edge forwarded here (validated there). */
  upgrade(request: Request): Promise<Response>;
  open(start: FollowStart): Promise<void>;
  push(batch: FollowerBatch): Promise<FollowerReport>;
  retire(room: string): boolean;
  snapshot(room: string): FollowerSnapshot;
  /** Fields that name this object in logs. */
  readonly logFields: Record<string, unknown>;
}

/** Ends a nameless instance: its alarm goes first, or the alarm would start it nameless again. */
export async function endNameless(ctx: DurableObjectState, what: string): Promise<void> {
  await ctx.storage.deleteAlarm();
  ctx.abort(`a ${what} instance without its name ends itself`);
}

/**
 * The face of an object that follows rooms from their roots (docs/sharded-rooms.md,
 * docs/multiplexing.md): the edge's upgrades, the roots' calls (open, push,
 * retire, snapshot, shutdown) and the runtime's lifecycle calls, answered by
 * its core. A call to an instance that does not know its name ends it, and the
 * caller's retry starts it afresh, named; handlers never throw into the runtime.
 */
export abstract class FollowerObject<Core extends FollowerCore> extends SocketObject<Record<string, unknown>> implements FollowerRpc {
  protected readonly core: Core;
  /** What the object is called in its answers and logs ("room's leaf", "hub"). */
  readonly #what: string;

  constructor(ctx: DurableObjectState, env: Record<string, unknown>, core: Core, what: string) {
    super(ctx, env);
    this.core = core;
    this.#what = what;
    this.runSockets(core.engine);
  }

  /** Accepts a WebSocket upgrade the edge placed here (already validated there). */
  override async fetch(request: Request): Promise<Response> {
    if (this.core.nameless) {
      this.core.end().catch(() => {});
      return Response.json({ error: "over_capacity", message: `the ${this.#what} is restarting; retry` }, { status: 503, headers: { "Retry-After": "1" } });
    }
    try {
      return await this.core.upgrade(request);
    } catch (error) {
      logEvent("error", { ...this.core.logFields, where: "follower_upgrade", error: String(error) });
      return Response.json({ error: "internal", message: "could not accept the socket" }, { status: 500 });
    }
  }

  /** A room's root opens this follower for the room (its first call). */
  async open(start: FollowStart): Promise<void> {
    await this.#named();
    await this.core.open(start);
  }

  /** One push of a room: its next messages (and roster). Answered with this follower's report for it. */
  async push(batch: FollowerBatch): Promise<FollowerReport> {
    await this.#named();
    return this.core.push(batch);
  }

  /** A room's root stops pushing: false when a socket arrived for the room since the last report. */
  async retire(room: string): Promise<boolean> {
    await this.#named();
    return this.core.retire(room);
  }

  /** This follower's figures for one room (`GET /rooms/{room}`). */
  async snapshot(room: string): Promise<FollowerSnapshot> {
    await this.#named();
    return this.core.snapshot(room);
  }

  /** Closes every socket with `code` so clients reconnect and resume; returns how many. */
  async shutdown(code: number, reason: string): Promise<number> {
    await this.#named();
    return this.core.engine.shutdown(code, reason);
  }

  override async alarm(): Promise<void> {
    if (this.core.nameless) return this.core.end();
    await super.alarm();
  }

  async #named(): Promise<void> {
    if (!this.core.nameless) return;
    await this.core.end();
    throw new Error(`the ${this.#what} restarted: retry`);
  }
}
