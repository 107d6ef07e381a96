import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CloseCode } from "../../protocol";
import { startServer, type LocalServer } from "../helpers/server";
import { roomStats, TestSocket } from "../helpers/socket";
import { sleep } from "../helpers/wait";

const IDLE_TIMEOUT_SECONDS = 12;
let server: LocalServer;

beforeAll(async () => {
  server = await startServer({ vars: { IDLE_TIMEOUT_SECONDS: String(IDLE_TIMEOUT_SECONDS) } });
});

afterAll(async () => {
  await server?.stop();
});

describe("idle sockets", () => {
  it("closes a socket that never sends a heartbeat with 4010, even once the room has hibernated", async () => {
    const room = "silent";
    const openedAt = Date.now();
    const silent = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    // Nothing touches the room from here on: no frame, no request, no heartbeat. It hibernates
    // after ~10 s; its sweep alarm wakes it, and the socket's attachment says how long it was silent.
    const closed = await Promise.race([
      silent.closed,
      new Promise<null>((r) => setTimeout(() => r(null), (IDLE_TIMEOUT_SECONDS * 2 + 8) * 1000)),
    ]);
    expect(closed?.code).toBe(CloseCode.IDLE_TIMEOUT);
    const after = Date.now() - openedAt;
    expect(after).toBeGreaterThanOrEqual(IDLE_TIMEOUT_SECONDS * 1000);
    // Within the timeout plus one sweep interval (and scheduling slack).
    expect(after).toBeLessThanOrEqual(IDLE_TIMEOUT_SECONDS * 2 * 1000 + 5000);
    const stats = await roomStats(server.url, room);
    expect(stats.connections).toBe(0);
    expect(stats.refusals.idle_timeout).toBe(1);
    // The room that closed it was a new instance: it had hibernated first.
    expect(stats.instanceStartedAt).toBeGreaterThan(openedAt + 9000);
  }, 60_000);

  it("keeps a socket that only pings open across hibernation", async () => {
    const room = "pinging";
    const s = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    const timer = setInterval(() => s.send("ping"), 3000);
    try {
      await sleep((IDLE_TIMEOUT_SECONDS + 8) * 1000);
      expect(s.closeInfo).toBeNull();
      expect((await roomStats(server.url, room)).connections).toBe(1);
    } finally {
      clearInterval(timer);
      s.close();
    }
  }, 60_000);
});
