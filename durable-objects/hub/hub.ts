import { logEvent } from "../../common/log";
import { SocketObject } from "../engine/socket-object";
import type { LeafBatch, LeafReport, LeafSnapshot, LeafStart } from "../leaf/rpc";
import { HubCore } from "./hub-core";

/**
 * A hub of multiplexed connections (`GET /ws`, docs/multiplexing.md): it
 * holds connections that each follow many rooms, and follows each of those
 * rooms from its root as a leaf of a sharded room does, so a room's flush is
 * one push per hub however many of the hub's connections follow it, and the
 * room's leaves and hubs are one set of followers. It runs the same socket
 * engine as a room; every event names its room, and one window covers a
 * connection across its rooms. Its name is `hub-<n>`; it stores nothing.
 *
 * This class is the object's face (the edge's upgrades, the rooms' pushes,
 * the runtime's lifecycle calls); hub-core.ts wires its parts.
 */
export class RoomHub extends SocketObject<Record<string, unknown>> {
  readonly #core: HubCore;

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env);
    this.#core = new HubCore(ctx, env);
    this.runSockets(this.#core.engine);
  }

  /** Accepts a multiplexed connection the edge forwarded (already validated there). */
  override async fetch(request: Request): Promise<Response> {
    if (this.#core.nameless) return this.#restarting();
    try {
      return await this.#core.upgrade(request);
    } catch (error) {
      logEvent("error", { hub: this.#core.hub, where: "hub_upgrade", error: String(error) });
      return Response.json({ error: "internal", message: "could not accept the connection" }, { status: 500 });
    }
  }

  /** A room's root starts pushing to this hub. */
  async open(start: LeafStart): Promise<void> {
    await this.#nameless();
    await this.#core.open(start);
  }

  /** One push of a room: its next messages (and roster). Answered with this hub's report for the room. */
  async push(batch: LeafBatch): Promise<LeafReport> {
    await this.#nameless();
    return this.#core.push(batch);
  }

  /** A room's root stops pushing: false when a connection subscribed to the room since the last report. */
  async retire(room: string): Promise<boolean> {
    await this.#nameless();
    return this.#core.retire(room);
  }

  /** This hub's figures for one room (`GET /rooms/{room}`). */
  async snapshot(room: string): Promise<LeafSnapshot> {
    await this.#nameless();
    return this.#core.snapshot(room);
  }

  /** Closes every connection with `code` so clients reconnect and resume; returns how many. */
  async shutdown(code: number, reason: string): Promise<number> {
    await this.#nameless();
    return this.#core.engine.shutdown(code, reason);
  }

  override async alarm(): Promise<void> {
    if (this.#core.nameless) return this.#core.end();
    await super.alarm();
  }

  /** A call to an instance that does not know which hub it is: it ends, and the caller's retry starts it afresh, named. */
  async #nameless(): Promise<void> {
    if (!this.#core.nameless) return;
    await this.#core.end();
    throw new Error("the hub restarted: retry");
  }

  #restarting(): Response {
    this.#core.end().catch(() => {});
    return Response.json({ error: "over_capacity", message: "the hub is restarting; retry" }, { status: 503, headers: { "Retry-After": "1" } });
  }
}
