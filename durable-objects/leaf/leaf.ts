import { logEvent } from "../../common/log";
import { SocketObject } from "../engine/socket-object";
import { LeafCore } from "./leaf-core";
import type { LeafBatch, LeafReport, LeafSnapshot, LeafStart } from "./rpc";

/**
 * One leaf of a sharded room (docs/sharded-rooms.md): it holds sockets, and
 * only that. The room's root assigns seqs, stores history and pushes every
 * flush to each leaf; the leaf keeps a ring of recent messages and runs the
 * same socket engine as a room, so a socket cannot tell a leaf from a room.
 * Its name is `<room>/<index>`; it stores nothing.
 *
 * This class is the object's face (the root's RPC calls, the edge's upgrades,
 * the runtime's lifecycle calls); leaf-core.ts wires its parts.
 */
export class RoomLeaf extends SocketObject<Record<string, unknown>> {
  readonly #core: LeafCore;

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env);
    this.#core = new LeafCore(ctx, env);
    this.runSockets(this.#core.engine);
  }

  /** Accepts a WebSocket upgrade the edge placed on this leaf (already validated there). */
  override async fetch(request: Request): Promise<Response> {
    if (this.#core.nameless) return this.#restarting();
    try {
      return await this.#core.upgrade(request);
    } catch (error) {
      logEvent("error", { room: this.#core.room, leaf: this.#core.index, where: "leaf_upgrade", error: String(error) });
      return Response.json({ error: "internal", message: "could not accept the socket" }, { status: 500 });
    }
  }

  /** The root opens this leaf (its first call, which places the leaf near the root). */
  async open(start: LeafStart): Promise<void> {
    await this.#nameless();
    await this.#core.open(start);
  }

  /** One push: the room's next messages (and member count). Answered with this leaf's report. */
  async push(batch: LeafBatch): Promise<LeafReport> {
    await this.#nameless();
    return this.#core.push(batch);
  }

  /** The root retires this leaf: it forgets where the room stands, unless a socket arrived since its last report. */
  async retire(_room?: string): Promise<boolean> {
    await this.#nameless();
    return this.#core.retire();
  }

  /** This leaf's figures for `GET /rooms/{room}`. */
  async snapshot(_room?: string): Promise<LeafSnapshot> {
    await this.#nameless();
    return this.#core.snapshot();
  }

  /** Closes every socket with `code` so clients reconnect and resume; returns how many. */
  async shutdown(code: number, reason: string): Promise<number> {
    await this.#nameless();
    return this.#core.engine.shutdown(code, reason);
  }

  override async alarm(): Promise<void> {
    if (this.#core.nameless) return this.#core.end();
    await super.alarm();
  }

  /** A call to an instance that does not know which leaf it is: it ends, and the caller's retry starts it afresh, named. */
  async #nameless(): Promise<void> {
    if (!this.#core.nameless) return;
    await this.#core.end();
    throw new Error("the leaf restarted: retry");
  }

  #restarting(): Response {
    this.#core.end().catch(() => {});
    return Response.json({ error: "over_capacity", message: "the room's leaf is restarting; retry" }, { status: 503, headers: { "Retry-After": "1" } });
  }

  /** Aborts this object as a crash would: its sockets drop (for fault tests on the local server). */
  async abort(): Promise<void> {
    this.#core.abort();
  }
}
