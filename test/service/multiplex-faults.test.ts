import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CloseCode } from "../../protocol";
import { MuxSocket } from "../helpers/multiplex";
import { startServer, type LocalServer } from "../helpers/server";
import { publish, roomStats } from "../helpers/socket";
import { eventually } from "../helpers/wait";

/**
 * The multiplexed connection under faults: a reader that stalls on several
 * rooms holds at most one window (across them) and catches up in order, or
 * is closed with 4008 and resumes; a restart ends every connection with 1012
 * and every subscription resumes from its own position.
 */
const WINDOW = 16 * 1024;
let server: LocalServer;
beforeAll(async () => {
  server = await startServer({ vars: { WINDOW_BYTES: String(WINDOW), SLOW_GRACE_MS: "3000" } });
});
afterAll(async () => {
  await server?.stop();
});

const wsUrl = () => `${server.wsUrl}/ws`;
const payload = (i: number) => ({ i, pad: "x".repeat(900) });

async function subscribed(mux: MuxSocket, rooms: string[]): Promise<void> {
  for (const room of rooms) mux.subscribe(room);
  await mux.waitFor((s) => rooms.every((room) => s.of("subscribed", room).length === 1), 10_000, "subscribed");
}

describe("a stalled multiplexed reader", () => {
  it("is held to one window across its rooms, gets every message in order once it reads again, and others are not slowed", async () => {
    const rooms = ["mf-a", "mf-b"];
    const fast = await MuxSocket.open(wsUrl());
    const slow = await MuxSocket.open(wsUrl(), { autoAck: false });
    await subscribed(fast, rooms);
    await subscribed(slow, rooms);
    for (let i = 1; i <= 60; i++) for (const room of rooms) await publish(server.url, room, payload(i));
    for (const room of rooms) await fast.waitForMessages(room, 60);
    // The slow reader acknowledged nothing: the hub sent it at most a window (plus a frame) over both rooms.
    const held = (room: string) => slow.messages(room).reduce((sum, m) => sum + JSON.stringify(m).length, 0);
    expect(held("mf-a") + held("mf-b")).toBeLessThanOrEqual(WINDOW + 2 * 1024);
    const stats = await roomStats(server.url, "mf-a");
    expect(stats.behind).toBeGreaterThanOrEqual(1);
    // It reads (acks) again: catch-up from the hub brings the rest, each room in order.
    slow.autoAck = true;
    for (const room of rooms) {
      const last = slow.messages(room).at(-1);
      if (last) slow.send({ type: "ack", room, seq: last.seq, tag: last.tag });
    }
    for (const room of rooms) await slow.waitForMessages(room, 60, 15_000);
    for (const room of rooms) expect(slow.messages(room).map((m) => m.seq)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    fast.close();
    slow.close();
  });

  it("is closed with 4008 when it stays behind, and resumes every room with nothing lost", async () => {
    const rooms = ["mf-k1", "mf-k2"];
    const slow = await MuxSocket.open(wsUrl(), { autoAck: false });
    await subscribed(slow, rooms);
    for (let i = 1; i <= 40; i++) for (const room of rooms) await publish(server.url, room, payload(i));
    expect((await slow.closed).code).toBe(CloseCode.SLOW_CONSUMER);
    // One kick, counted for the room it stalled in, as for a room's own socket, and once in /metrics.
    const kicks = async () => (await Promise.all(rooms.map((room) => roomStats(server.url, room)))).map((s) => s.kicks);
    await eventually(async () => (await kicks()).reduce((a, b) => a + b, 0) === 1, { timeoutMs: 10_000, everyMs: 250, what: "the kick in a room's stats" });
    const metricKicks = async () => Number(/^fanout_kicks_total (\d+)$/m.exec(await (await fetch(`${server.url}/metrics`)).text())?.[1]);
    await eventually(async () => (await metricKicks()) >= 1, { timeoutMs: 20_000, everyMs: 250, what: "the kick in /metrics" });
    expect(await metricKicks()).toBe(1);
    const again = await MuxSocket.open(wsUrl());
    slow.resumeAll(again);
    for (const room of rooms) await again.waitForMessages(room, 40 - (slow.readSeq.get(room) ?? 0), 15_000);
    for (const room of rooms) {
      const seqs = [...slow.messages(room), ...again.messages(room)].map((m) => m.seq);
      expect(seqs).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    }
    again.close();
  });
});

describe("a restart", () => {
  it("closes multiplexed connections with 1012, and every subscription resumes from its own position", async () => {
    const rooms = ["mf-s1", "mf-s2", "mf-s3"];
    const mux = await MuxSocket.open(wsUrl());
    await subscribed(mux, rooms);
    for (const [n, room] of rooms.entries()) for (let i = 1; i <= n + 1; i++) await publish(server.url, room, i);
    for (const [n, room] of rooms.entries()) await mux.waitForMessages(room, n + 1);
    await server.restart();
    expect((await mux.closed).code).toBe(CloseCode.SERVICE_RESTART);
    for (const room of rooms) await publish(server.url, room, "after");
    const again = await MuxSocket.open(wsUrl());
    mux.resumeAll(again);
    for (const room of rooms) await again.waitForMessages(room, 1);
    for (const [n, room] of rooms.entries()) {
      expect(again.messages(room).map((m) => m.seq)).toEqual([n + 2]);
      expect(again.messages(room)[0]?.data).toBe("after");
    }
    again.close();
  });
});
