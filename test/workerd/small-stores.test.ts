import { env, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { TotalsStore } from "../../durable-objects/coordinator/totals-store";
import { MetaStore } from "../../durable-objects/room/storage/meta-store";
import type { Room } from "../../durable-objects/room/room";

/**
 * The room's small persistent values (epoch, counters every few seconds, the
 * leaf directory): rows written are what a busy room's bill is made of, so
 * rewriting a value must cost the one row it changes, not a delete and an
 * insert.
 */
const rooms = (env as unknown as { ROOMS: DurableObjectNamespace<Room> }).ROOMS;

describe("MetaStore", () => {
  it("rewrites a value for one row written, and reads back what was written last", async () => {
    const stub = rooms.get(rooms.idFromName("meta-store-rows"));
    const written = await runInDurableObject(stub, (_room: Room, state) => {
      const meta = new MetaStore(state.storage.sql);
      const first = meta.set("counters", JSON.stringify({ n: 1 }));
      const again = [2, 3, 4].map((n) => meta.set("counters", JSON.stringify({ n })));
      return { first, again, value: meta.get("counters"), other: meta.get("absent") };
    });
    expect(written.again).toEqual([1, 1, 1]);
    expect(written.first).toBeLessThanOrEqual(2);
    expect(written.value).toBe(JSON.stringify({ n: 4 }));
    expect(written.other).toBeNull();
  });
});

describe("TotalsStore", () => {
  it("adds a report's counters for one row written", async () => {
    const stub = rooms.get(rooms.idFromName("totals-store-rows"));
    const written = await runInDurableObject(stub, (_room: Room, state) => {
      const totals = new TotalsStore(state.storage.sql);
      const rows = [1, 2, 3].map((n) => totals.add({ published: n }));
      return { rows, published: new TotalsStore(state.storage.sql).values.published };
    });
    expect(written.rows.slice(1)).toEqual([1, 1]);
    expect(written.published).toBe(6);
  });
});
