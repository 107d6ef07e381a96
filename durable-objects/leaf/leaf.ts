import { FollowerObject } from "./follower-object";
import { LeafCore } from "./leaf-core";

/**
 * One leaf of a sharded room (docs/sharded-rooms.md): it holds sockets, and
 * only that. The room's root assigns seqs, stores history and pushes every
 * flush to each leaf; the leaf keeps a ring of recent messages and runs the
 * same socket engine as a room, so a socket cannot tell a leaf from a room.
 * Its name is `<room>/<index>`; it stores nothing.
 *
 * Its face is every follower's (follower-object.ts); leaf-core.ts wires its parts.
 *
 * @example
 * ```ts
 * // Exported from the worker and bound as LEAVES (in a migration of its own) in wrangler.toml.
 * export { RoomLeaf } from "edge-fanout";
 * ```
 *
 * @see docs/sharded-rooms.md
 */
export class RoomLeaf extends FollowerObject<LeafCore> {
  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env, new LeafCore(ctx, env), "room's leaf");
  }

  /** Aborts this object as a crash would: its sockets drop (for fault tests on the local server). */
  async abort(): Promise<void> {
    this.core.abort();
  }
}
