import { describe, expect, it } from "vitest";
import { CloseCode, type WelcomeEvent } from "../../protocol";
import { MuxSocket } from "../helpers/multiplex";
import { managedServers } from "../helpers/servers";
import { expectSeqs, publish, refusedUpgrade, roomStats, TestSocket } from "../helpers/socket";
import { eventually, sleep } from "../helpers/wait";

const serve = managedServers();

describe("hibernation", () => {
  it("delivers to sockets it already had after the room hibernated, with seq continuing", async () => {
    const server = await serve();
    const room = "hibernate";
    const s = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    await publish(server.url, room, "before");
    await s.waitForMessages(1);
    const before = await roomStats(server.url, room);
    expect(before.deliveries).toBe(1);

    // Idle for longer than the runtime's 10 s eviction delay after the room's last timer
    // (its counters' write, up to 7 s after the publish); heartbeats are answered by the
    // runtime and must not wake (or keep awake) the room.
    for (let i = 0; i < 8; i++) {
      await sleep(2500);
      s.send("ping");
    }
    await s.waitFor((x) => x.frames.filter((f) => f === "pong").length >= 8, 5000, "pongs");

    const answer = await publish(server.url, room, "after");
    expect(answer.body).toMatchObject({ seq: 2, recipients: 1 });
    await s.waitForMessages(2);
    expectSeqs(s.messages, 1, 2);
    const after = await roomStats(server.url, room);
    // A new instance: the constructor ran again, so the object had been evicted.
    expect(after.instanceStartedAt).toBeGreaterThan(before.instanceStartedAt + 10_000);
    expect(after.connections).toBe(1);
    // The first instance wrote its counters before it was evicted.
    expect(after.deliveries).toBe(2);
    s.close();
  }, 40_000);
});

describe("restart and shutdown", () => {
  it("closes every socket with 1012 on SIGTERM; after restart seq continues and resume loses nothing", async () => {
    const server = await serve();
    const room = "restart";
    const sockets = await Promise.all([1, 2, 3].map(() => TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`)));
    for (let i = 0; i < 5; i++) await publish(server.url, room, { i });
    for (const s of sockets) await s.waitForMessages(5);
    const epoch = (sockets[0]?.events[0] as WelcomeEvent).epoch;
    const before = await roomStats(server.url, room);
    expect(before.deliveries).toBe(15);

    await server.restart();
    for (const s of sockets) expect((await s.closed).code).toBe(CloseCode.SERVICE_RESTART);

    for (let i = 5; i < 8; i++) {
      const answer = await publish(server.url, room, { i });
      expect(answer.body.seq).toBe(i + 1);
    }
    const resumed = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?since=5&epoch=${epoch}`);
    await resumed.waitForMessages(3);
    await publish(server.url, room, { i: 8 });
    await resumed.waitForMessages(4);
    expectSeqs(resumed.messages, 6, 9);
    expect((resumed.events[0] as WelcomeEvent).epoch).toBe(epoch);
    // Counters are cumulative across restarts: 15 before, 3 replayed and 1 live after.
    const after = await roomStats(server.url, room);
    expect(after.deliveries).toBe(15 + 4);
    expect(after.published).toBe(9);
    resumed.close();
  });

  it("says how many sockets it closed and in how many rooms, counting only rooms that still held some", async () => {
    const server = await serve();
    // Two rooms that had sockets and have none left, one that holds two, and a multiplexed connection.
    for (const room of ["gone-1", "gone-2"]) (await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`)).close();
    const held = await Promise.all([1, 2].map(() => TestSocket.open(`${server.wsUrl}/rooms/held/ws`)));
    const mux = await MuxSocket.open(`${server.wsUrl}/ws`);
    await mux.waitFor((s) => s.events.length > 0);
    await eventually(async () => (await roomStats(server.url, "gone-2")).connections === 0, { everyMs: 100, what: "the closed sockets gone" });
    await server.stop("SIGTERM");
    for (const s of held) expect((await s.closed).code).toBe(CloseCode.SERVICE_RESTART);
    expect(server.output()).toContain("closed 3 sockets in 1 room and 1 hub of multiplexed connections\n");
  });

  it("says no socket was open when none was", async () => {
    const server = await serve();
    (await TestSocket.open(`${server.wsUrl}/rooms/once/ws`)).close();
    await eventually(async () => (await roomStats(server.url, "once")).connections === 0, { everyMs: 100, what: "the socket gone" });
    await server.stop("SIGTERM");
    expect(server.output()).toContain("no socket was open\n");
  });

  it("closes sockets with 1012 on SIGINT too", async () => {
    const server = await serve();
    const s = await TestSocket.open(`${server.wsUrl}/rooms/sigint/ws`);
    await server.stop("SIGINT");
    expect((await s.closed).code).toBe(CloseCode.SERVICE_RESTART);
  });
});

describe("reaping", () => {
  it("closes a socket that sends no heartbeat with 4010 and keeps one that pings", async () => {
    const server = await serve({ vars: { IDLE_TIMEOUT_SECONDS: "2" } });
    const room = "reap";
    const silent = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    const alive = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    const pinger = setInterval(() => alive.send("ping"), 500);
    try {
      const closed = await silent.closed;
      expect(closed.code).toBe(CloseCode.IDLE_TIMEOUT);
      await sleep(3000);
      expect(alive.closeInfo).toBeNull();
      const stats = await roomStats(server.url, room);
      expect(stats.connections).toBe(1);
    } finally {
      clearInterval(pinger);
      alive.close();
    }
  }, 30_000);
});

describe("descriptor ceiling", () => {
  it("refuses upgrades with 503 before the descriptor limit and keeps serving connected sockets", async () => {
    const server = await serve({ fdLimit: 400 });
    expect(server.output()).toContain("descriptor limit 400");
    const room = "ceiling";
    const held: TestSocket[] = [];
    let refusal: { status: number; body: string } | null = null;
    for (let i = 0; i < 400 && !refusal; i++) {
      try {
        held.push(await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`));
      } catch {
        refusal = await refusedUpgrade(`${server.wsUrl}/rooms/${room}/ws`);
      }
      // Let the launcher's descriptor sample catch up now and then, as a real ramp would.
      if (i % 50 === 49) await sleep(150);
    }
    expect(refusal?.status).toBe(503);
    expect(JSON.parse(refusal?.body ?? "{}")).toMatchObject({ error: "over_capacity" });
    expect(held.length).toBeGreaterThan(50);

    // Still alive: everyone connected gets the next message.
    const answer = await publish(server.url, room, "still here");
    expect(answer.body.recipients).toBe(held.length);
    for (const s of held) await s.waitForMessages(1);
    for (const s of held) s.close();
  }, 60_000);
});
