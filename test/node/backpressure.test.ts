import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CloseCode, type MessageEvent, type ReplayedEvent } from "../../client-sdk/src/protocol";
import { startServer, type LocalServer } from "../helpers/server";
import { expectSeqs, publish, roomStats, TestSocket } from "../helpers/socket";

// An 8 KiB window and ~1 KiB messages: a few messages fill it, yet an
// acknowledging client (one or two messages in flight) never reaches it.
const WINDOW = 8192;
const payload = (i: number) => ({ i, pad: "x".repeat(1000) });

let server: LocalServer;

beforeAll(async () => {
  server = await startServer({ vars: { WINDOW_BYTES: String(WINDOW), SLOW_DROPS_BEFORE_CLOSE: "8", SLOW_GRACE_MS: "60000" } });
});

afterAll(async () => {
  await server?.stop();
});

describe("per-socket window", () => {
  it("drops frames for a socket that does not acknowledge, shows the gap, and replays it", async () => {
    const room = "window-gap";
    const lagging = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`, { autoAck: false });
    const healthy = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);

    const N = 12;
    for (let i = 0; i < N; i++) await publish(server.url, room, payload(i));
    await healthy.waitForMessages(N);
    expectSeqs(healthy.messages, 1, N);

    // The lagging socket got what fits in its window, then nothing.
    await lagging.waitFor((s) => s.messages.length >= 6);
    const got = lagging.messages.length;
    expect(got).toBeLessThan(N);
    expectSeqs(lagging.messages, 1, got);
    const stats = await roomStats(server.url, room);
    expect(stats.drops).toBe(N - got);
    expect(stats.windowBytesMax).toBeGreaterThan(WINDOW - 1100);
    expect(stats.windowBytesMax).toBeLessThanOrEqual(WINDOW);

    // It acknowledges; the room tells it what it dropped meanwhile...
    lagging.send({ type: "ack", seq: got });
    await lagging.waitFor((s) => s.events.some((e) => e.type === "dropped"));
    expect(lagging.events.find((e) => e.type === "dropped")).toEqual({ type: "dropped", from: got + 1, to: N });
    // ...and the next live message arrives with a visible seq jump.
    await publish(server.url, room, payload(N));
    await lagging.waitFor((s) => s.messages.some((m) => m.seq === N + 1));
    const seqs = lagging.messages.map((m) => m.seq);
    expect(seqs.at(-1)).toBe(N + 1);
    expect(seqs.at(-2)).toBe(got);

    // It replays the gap from history.
    lagging.send({ type: "ack", seq: N + 1 });
    lagging.send({ type: "replay", from: got + 1, to: N });
    await lagging.waitFor((s) => s.events.some((e) => e.type === "replayed"));
    const replayed = lagging.events.find((e): e is ReplayedEvent => e.type === "replayed");
    expect(replayed).toMatchObject({ from: got + 1, to: N, truncated: false });
    const all = new Map(lagging.messages.map((m: MessageEvent) => [m.seq, m]));
    expect([...all.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: N + 1 }, (_, i) => i + 1));
    expect((all.get(N)?.data as { i: number }).i).toBe(N - 1);
    lagging.close();
    healthy.close();
  });

  it("truncates a replay at the window and says so", async () => {
    const room = "window-replay";
    for (let i = 0; i < 20; i++) await publish(server.url, room, payload(i));
    const s = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?since=0`, { autoAck: false });
    await s.waitFor((x) => x.events.some((e) => e.type === "replayed"));
    const replayed = s.events.find((e): e is ReplayedEvent => e.type === "replayed");
    expect(replayed?.truncated).toBe(true);
    const upTo = replayed?.to ?? 0;
    expect(upTo).toBeLessThan(20);
    expect(upTo).toBeGreaterThan(3);
    expectSeqs(s.messages, 1, upTo);

    // Acknowledge and ask for the rest, as the SDK does.
    s.send({ type: "ack", seq: upTo });
    s.send({ type: "replay", from: upTo + 1 });
    await s.waitFor((x) => x.events.filter((e) => e.type === "replayed").length === 2);
    expect(s.messages.at(-1)?.seq).toBeGreaterThan(upTo);
    s.close();
  });

  it("closes a socket that stays over its window with 4008, and it resumes with nothing lost", async () => {
    const room = "window-kick";
    const slow = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`, { autoAck: false });
    for (let i = 0; i < 20 && !slow.closeInfo; i++) await publish(server.url, room, payload(i));
    const closed = await slow.closed;
    expect(closed.code).toBe(CloseCode.SLOW_CONSUMER);
    const last = slow.messages.at(-1)?.seq ?? 0;
    const stats = await roomStats(server.url, room);
    expect(stats.kicks).toBe(1);
    expect(stats.connections).toBe(0);

    const total = stats.seq;
    const resumed = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?since=${last}`);
    // A healthy (acknowledging) client catches up; the window only paces the replay.
    for (let from = last + 1; ; ) {
      await resumed.waitFor((x) => x.events.filter((e) => e.type === "replayed").length >= 1);
      const ends = resumed.events.filter((e): e is ReplayedEvent => e.type === "replayed");
      const end = ends.at(-1) as ReplayedEvent;
      if (!end.truncated) break;
      from = end.to + 1;
      const count = ends.length;
      resumed.send({ type: "replay", from });
      await resumed.waitFor((x) => x.events.filter((e) => e.type === "replayed").length > count);
      const latest = resumed.events.filter((e): e is ReplayedEvent => e.type === "replayed").at(-1) as ReplayedEvent;
      if (!latest.truncated) break;
    }
    expectSeqs(resumed.messages, last + 1, total);
    resumed.close();
  });

  it("never lets a stalled TCP reader hold more than its window, and others get everything", async () => {
    const room = "stalled-reader";
    const stalled = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    const fast = await Promise.all([1, 2, 3].map(() => TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`)));
    stalled.pauseReading();
    for (let i = 0; i < 40; i++) await publish(server.url, room, payload(i));
    for (const s of fast) {
      await s.waitForMessages(40);
      expectSeqs(s.messages, 1, 40);
    }
    const stats = await roomStats(server.url, room);
    expect(stats.windowBytesMax).toBeLessThanOrEqual(WINDOW);
    expect(stats.drops).toBeGreaterThan(0);
    expect(stats.kicks).toBe(1);
    for (const s of fast) s.close();
  });
});

describe("coalescing", () => {
  let roomy: LocalServer;
  beforeAll(async () => {
    roomy = await startServer();
  });
  afterAll(async () => {
    await roomy?.stop();
  });

  it("batches messages that arrive while a fan-out is busy, in seq order, without duplicates", async () => {
    const room = "coalesce";
    const sockets = await Promise.all(Array.from({ length: 20 }, () => TestSocket.open(`${roomy.wsUrl}/rooms/${room}/ws`)));
    await Promise.all(Array.from({ length: 200 }, (_, i) => publish(roomy.url, room, { i })));
    for (const s of sockets) {
      await s.waitForMessages(200);
      expectSeqs(s.messages, 1, 200);
    }
    const stats = await roomStats(roomy.url, room);
    expect(stats.deliveries).toBe(200 * 20);
    // Concurrent publishes shared frames.
    expect(stats.framesSent).toBeLessThan(stats.deliveries);
    expect(sockets[0]?.frames.some((f) => f.startsWith("["))).toBe(true);
    for (const s of sockets) s.close();
  });

  it("sends a lone message at once, as its own frame", async () => {
    const room = "lone";
    const s = await TestSocket.open(`${roomy.wsUrl}/rooms/${room}/ws`);
    await publish(roomy.url, room, "solo");
    await s.waitForMessages(1);
    expect(s.frames.at(-1)?.startsWith("{")).toBe(true);
    s.close();
  });
});
