import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type LocalServer } from "../helpers/server";
import { roomStats, TestSocket } from "../helpers/socket";

// Objects of 100 sockets: a burst of 500 upgrades needs the root and 4 leaves.
const SHARD = 100;
const SOCKETS = 500;
let server: LocalServer;

beforeAll(async () => {
  server = await startServer({ vars: { ROOM_SHARD_SOCKETS: String(SHARD) } });
});

afterAll(async () => {
  await server?.stop();
});

describe("placement under a burst of upgrades", () => {
  it("opens only the leaves the burst needs: upgrades that arrive while the edge asks the root share its placement", async () => {
    const room = "placement-burst";
    const sockets = await Promise.all(Array.from({ length: SOCKETS }, () => TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`)));
    for (const socket of sockets) await socket.waitFor((s) => s.events.length > 0, 20_000, "the welcome");
    const deadline = Date.now() + 10_000;
    let stats = await roomStats(server.url, room);
    while (stats.connections < SOCKETS && Date.now() < deadline) stats = await roomStats(server.url, room);
    expect(stats.connections).toBe(SOCKETS);
    const needed = Math.ceil((SOCKETS - SHARD) / SHARD);
    expect(stats.leaves?.length).toBeLessThanOrEqual(needed + 1);
    // Each placement grants up to 64 sockets per leaf: far fewer placements than sockets placed.
    expect(stats.rootRequests?.placements).toBeLessThan((SOCKETS - SHARD) / 8);
    for (const socket of sockets) socket.close();
  }, 60_000);
});
