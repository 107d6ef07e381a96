import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type LocalServer } from "../helpers/server";
import { publish, TestSocket } from "../helpers/socket";
import { eventually } from "../helpers/wait";

let server: LocalServer;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server?.stop();
});

async function scrape(): Promise<{ text: string; value(name: string): number }> {
  const res = await fetch(`${server.url}/metrics`);
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
