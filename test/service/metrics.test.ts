import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RoomList, RoomStats } from "../../protocol";
import { startServer, type LocalServer } from "../helpers/server";
import { MuxSocket } from "../helpers/multiplex";
import { publish, TestSocket } from "../helpers/socket";
import { eventually } from "../helpers/wait";

let server: LocalServer;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server?.stop();
});

async function scrape(from: LocalServer = server): Promise<{ text: string; value(name: string): number }> {
  const res = await fetch(`${from.url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/plain");
  const text = await res.text();
  return {
    text,
    value(name: string): number {
      const line = text.split("\n").find((l) => l.startsWith(`${name} `));
      if (!line) throw new Error(`no sample ${name} in:\n${text}`);
      return Number(line.slice(name.length + 1));
    },
  };
}

/** Rooms report to the registry on their own schedule: metrics are polled until they show what is expected. */
const CONVERGED = { timeoutMs: 10_000, everyMs: 200, what: "the metrics to converge" };

describe("GET /metrics", () => {
  it("exposes live rooms, connections, and counters that survive the rooms emptying", async () => {
    const a = await TestSocket.open(`${server.wsUrl}/rooms/metrics-a/ws`);
    const b = await TestSocket.open(`${server.wsUrl}/rooms/metrics-b/ws`);
    await eventually(async () => (await scrape()).value("fanout_rooms_live") === 2, CONVERGED);
    expect((await scrape()).value("fanout_connections")).toBe(2);

    for (let i = 0; i < 3; i++) await publish(server.url, "metrics-a", { i });
    await a.waitForMessages(3);
    const refused = await fetch(`${server.url}/rooms/not%20valid/publish`, { method: "POST", body: "x" });
    expect(refused.status).toBe(400);

    // Rooms report what grew when they lose their last socket.
    a.close();
    b.close();
    await eventually(async () => {
      const m = await scrape();
      return m.value("fanout_rooms_live") === 0 && m.value("fanout_messages_published_total") === 3;
    }, CONVERGED);
    const m = await scrape();
    expect(m.value("fanout_deliveries_total")).toBe(3);
    expect(m.value("fanout_frames_sent_total")).toBe(3);
    expect(m.value("fanout_bytes_sent_total")).toBeGreaterThan(0);
    expect(m.value("fanout_connections")).toBe(0);
    expect(m.value('fanout_refusals_total{reason="bad_room"}')).toBe(1);
    expect(m.text).toContain("# TYPE fanout_deliveries_total counter");
    expect(m.value("fanout_registry_shards_unreachable")).toBe(0);

    // The same room again: its counters add to, never replace, what was counted.
    const again = await TestSocket.open(`${server.wsUrl}/rooms/metrics-a/ws`);
    await publish(server.url, "metrics-a", "more");
    await again.waitForMessages(1);
    again.close();
    await eventually(async () => (await scrape()).value("fanout_messages_published_total") === 4, CONVERGED);
    expect((await scrape()).value("fanout_deliveries_total")).toBe(4);
  });
});

describe("multiplexed connections in the stats, the listing and GET /metrics", () => {
  it("count a room's subscribers however they are connected, and the connections and their subscriptions as sockets", async () => {
    // A short idle timeout makes hubs and rooms sweep, and so report, every few seconds; the sockets ping to stay.
    const mux = await startServer({ vars: { IDLE_TIMEOUT_SECONDS: "3", MAX_ROOMS_PER_CONNECTION: "2" } });
    try {
      const plain = await TestSocket.open(`${mux.wsUrl}/rooms/mm-one/ws`);
      const first = await MuxSocket.open(`${mux.wsUrl}/ws`);
      const second = await MuxSocket.open(`${mux.wsUrl}/ws`);
      const pinger = setInterval(() => [plain.ws, first.ws, second.ws].forEach((ws) => ws.send("ping")), 1000);
      try {
        first.subscribe("mm-one");
        first.subscribe("mm-two");
        second.subscribe("mm-one");
        await first.waitFor((s) => s.of("subscribed").length === 2);
        await second.waitFor((s) => s.of("subscribed").length === 1);
        // Past MAX_ROOMS_PER_CONNECTION: refused at the hub, and counted.
        first.subscribe("mm-three");
        await first.waitFor((s) => s.of("error").length === 1);

        const stats = (await (await fetch(`${mux.url}/rooms/mm-one`)).json()) as RoomStats;
        expect(stats.connections).toBe(3);
        expect(stats.rootConnections).toBe(1);
        expect(stats.multiplexed).toBe(2);
        const hubLines = (stats.leaves ?? []).filter((line) => line.hub !== undefined);
        expect(hubLines.reduce((sum, line) => sum + line.connections, 0)).toBe(2);

        const listed = async () => ((await (await fetch(`${mux.url}/rooms?prefix=mm-`)).json()) as RoomList).rooms;
        await eventually(async () => {
          const rooms = await listed();
          return rooms.find((r) => r.room === "mm-one")?.connections === 3 && rooms.find((r) => r.room === "mm-two")?.connections === 1;
        }, { ...CONVERGED, timeoutMs: 20_000, what: "the listing to count multiplexed subscribers" });

        await eventually(async () => {
          const m = await scrape(mux);
          return m.value("fanout_multiplexed_connections") === 2 && m.value("fanout_multiplexed_subscriptions") === 3;
        }, { ...CONVERGED, timeoutMs: 20_000, what: "the hubs' reports" });
        const m = await scrape(mux);
        expect(m.value("fanout_connections")).toBe(4);
        expect(m.value("fanout_hubs_live")).toBeGreaterThanOrEqual(1);
        expect(m.value('fanout_refusals_total{reason="subscribe_too_many_rooms"}')).toBe(1);
      } finally {
        clearInterval(pinger);
      }
      for (const socket of [plain, first, second]) socket.close();
      await eventually(async () => {
        const m = await scrape(mux);
        return m.value("fanout_multiplexed_connections") === 0 && m.value("fanout_connections") === 0;
      }, { ...CONVERGED, timeoutMs: 20_000, what: "the connections to be gone" });
    } finally {
      await mux.stop();
    }
  });
});
