import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type LocalServer } from "../helpers/server";
import { readUntil } from "../helpers/wait";
import { roomStats, TestSocket } from "../helpers/socket";

// Objects of 100 sockets: a burst of 500 upgrades needs the root and 4 leaves, 300 more another 3.
const SHARD = 100;
const FIRST = 500;
const SECOND = 300;
let server: LocalServer;

beforeAll(async () => {
  server = await startServer({ vars: { ROOM_SHARD_SOCKETS: String(SHARD) } });
});

afterAll(async () => {
  await server?.stop();
});

describe("placement under a burst of upgrades", () => {
  it("opens only the leaves bursts need, and upgrades of a placed room that arrive while the edge asks the root share its placement", async () => {
    const room = "placement-burst";
    const burst = async (count: number, total: number, spareLeaves: number) => {
      const sockets = await Promise.all(Array.from({ length: count }, () => TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`)));
      for (const socket of sockets) await socket.waitFor((s) => s.events.length > 0, 20_000, "the welcome");
      const stats = await readUntil(() => roomStats(server.url, room), (s) => s.connections >= total, { timeoutMs: 10_000, everyMs: 0, what: `${total} connections` });
      expect(stats.connections).toBe(total);
      // Parallel placements reserve sockets on every leaf; shared ones keep leaves from looking full.
      expect(stats.leaves?.length).toBeLessThanOrEqual(Math.ceil((total - SHARD) / SHARD) + spareLeaves);
      return { sockets, placements: stats.rootRequests?.placements ?? 0 };
    };
    // The first crossing: upgrades already on their way to the root each get a placement (the
    // edge has not seen the room sharded yet); the root's shared openings keep the leaves near
    // what the burst needs.
    const first = await burst(FIRST, FIRST, 2);
    // Once the edge has had a placement for the room, a burst's upgrades share asks: each
    // placement grants up to 64 sockets per leaf, so far fewer placements than sockets placed.
    const second = await burst(SECOND, FIRST + SECOND, 2);
    expect(second.placements - first.placements).toBeLessThan(SECOND / 8);
    for (const socket of [...first.sockets, ...second.sockets]) socket.close();
  }, 60_000);

  it("takes a burst of upgrades into a room of one object, none waiting on another's request", async () => {
    // Sharding off: every upgrade goes to the room's object, many at once.
    // The ceiling counts a connection accepted before a descriptor sample and admitted after it
    // twice until the next sample, so 3,000 at once can reach the default (a quarter of 20,000):
    // this test is about the room taking them, not the ceiling, which gets room enough.
    const single = await startServer({ vars: { ROOM_SHARD_SOCKETS: "0" }, gate: "off", env: { CONNECTION_CEILING: "12000" } });
    try {
      const room = "one-object-burst";
      const count = 3000;
      const sockets = await Promise.all(Array.from({ length: count }, () => TestSocket.open(`${single.wsUrl}/rooms/${room}/ws`)));
      for (const socket of sockets) await socket.waitFor((s) => s.events.some((e) => e.type === "welcome"), 30_000, "the welcome");
      const stats = await roomStats(single.url, room);
      expect(stats.connections).toBe(count);
      expect(stats.leaves ?? []).toEqual([]);
      expect(single.output()).not.toContain("different request");
      for (const socket of sockets) socket.close();
    } finally {
      await single.stop("SIGKILL");
    }
  }, 90_000);
});
