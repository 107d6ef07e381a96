import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CloseCode, type LostEvent } from "../../protocol";
import { startServer, type LocalServer } from "../helpers/server";
import { expectSeqs, publish, roomStats, TestSocket } from "../helpers/socket";
import { readUntil, sleep } from "../helpers/wait";

// An 8 KiB window and ~1 KiB messages: a few messages fill it, yet an
// acknowledging client (one or two frames in flight) never reaches it.
const WINDOW = 8192;
const payload = (i: number) => ({ i, pad: "x".repeat(1000) });
/** A socket holds at most a window plus one frame (here one ~1.1 KB message). */
const WINDOW_BOUND = WINDOW + 1200;

let server: LocalServer;

beforeAll(async () => {
  server = await startServer({ vars: { WINDOW_BYTES: String(WINDOW), SLOW_GRACE_MS: "60000" } });
});

afterAll(async () => {
  await server?.stop();
});

describe("cursor per socket", () => {
  it("sends a socket that stops acking no more than its window, then everything from history as it acks, once and in order", async () => {
    const room = "cursor-lag";
    const lagging = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`, { autoAck: false });
    const healthy = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);

    const N = 30;
    for (let i = 0; i < N; i++) await publish(server.url, room, payload(i));
    await healthy.waitForMessages(N);
    expectSeqs(healthy.messages, 1, N);

    // The lagging socket got what fits in its window, then nothing: it is behind, not skipped.
    await lagging.waitFor((s) => s.messages.length >= 7);
    const got = lagging.messages.length;
    expect(got).toBeLessThan(N);
    expectSeqs(lagging.messages, 1, got);
    const stats = await roomStats(server.url, room);
    expect(stats.behind).toBe(1);
    expect(stats.windowBytesMax).toBeGreaterThan(WINDOW - 1200);
    expect(stats.windowBytesMax).toBeLessThanOrEqual(WINDOW_BOUND);

    // Each ack that frees the window brings the next messages from history, until it is level.
    while (lagging.messages.length < N) {
      const before = lagging.messages.length;
      lagging.ack();
      await lagging.waitFor((s) => s.messages.length > before, 5000, "more messages after an ack");
    }
    expectSeqs(lagging.messages, 1, N);
    expect(lagging.events.some((e) => e.type === "lost")).toBe(false);
    lagging.ack();
    await sleep(100);
    const level = await roomStats(server.url, room);
    expect(level.behind).toBe(0);
    expect(level.catchUpFrames).toBeGreaterThan(0);
    // Catch-up reads only what it sends: one row per message here (each was its own frame).
    expect(level.historyRowsRead).toBeLessThanOrEqual(N - got);

    // Level again, it is back on the live path.
    await publish(server.url, room, payload(N));
    await lagging.waitForMessages(N + 1);
    expectSeqs(lagging.messages, 1, N + 1);
    lagging.close();
    healthy.close();
  });

  it("resumes with since as a socket that starts behind: a client that only acks gets everything", async () => {
    const room = "cursor-resume";
    for (let i = 0; i < 60; i++) await publish(server.url, room, payload(i));
    const s = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?since=0`);
    await s.waitForMessages(60);
    expectSeqs(s.messages, 1, 60);
    // Nothing lost; besides messages only the welcome and the room's presence (which waits for
    // window space behind the catch-up, so it may come last).
    await s.waitFor((x) => x.presence.length >= 1, 5000, "the presence sync");
    expect(s.events.map((e) => e.type).filter((t) => t !== "message")).toEqual(["welcome", "presence"]);
    // Frames stay inside the window plus one frame even while catching up.
    const stats = await roomStats(server.url, room);
    expect(stats.windowBytesMax).toBeLessThanOrEqual(WINDOW_BOUND);
    s.close();
  });

  it("tells a socket that fell out of history what it lost, once, and continues from the oldest kept message", async () => {
    const short = await startServer({ vars: { WINDOW_BYTES: String(WINDOW), HISTORY_MAX_MESSAGES: "20", SLOW_GRACE_MS: "60000" } });
    try {
      const room = "cursor-lost";
      const lagging = await TestSocket.open(`${short.wsUrl}/rooms/${room}/ws`, { autoAck: false });
      for (let i = 0; i < 60; i++) await publish(short.url, room, payload(i));
      await lagging.waitFor((s) => s.messages.length >= 7);
      const got = lagging.messages.length;
      while ((lagging.messages.at(-1)?.seq ?? 0) < 60) {
        const before = lagging.events.length;
        lagging.ack();
        await lagging.waitFor((s) => s.events.length > before, 5000, "more after an ack");
      }
      const lost = lagging.events.filter((e): e is LostEvent => e.type === "lost");
      expect(lost).toEqual([{ type: "lost", reason: "history", from: got + 1, to: 40 }]);
      expectSeqs(lagging.messages.slice(0, got), 1, got);
      const seqs = lagging.messages.map((m) => m.seq);
      expect(seqs.slice(got)).toEqual(Array.from({ length: 20 }, (_, i) => 41 + i));
      expect((await roomStats(short.url, room)).lostMessages).toBe(40 - got);
      lagging.close();
    } finally {
      await short.stop();
    }
  });

  it("keeps fast readers complete while the room is busy: every message, in order, none closed", async () => {
    const room = "cursor-busy";
    const fast = await Promise.all([1, 2, 3].map(() => TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`)));
    const N = 400;
    // Ten publishes in flight: the room is busy, acks queue behind publishes, and sockets fall behind and catch up.
    let next = 0;
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        while (next < N) await publish(server.url, room, payload(next++));
      }),
    );
    for (const s of fast) {
      await s.waitForMessages(N, 20_000);
      expectSeqs(s.messages, 1, N);
      expect(s.closeInfo).toBeNull();
    }
    const stats = await roomStats(server.url, room);
    expect(stats.windowBytesMax).toBeLessThanOrEqual(WINDOW_BOUND);
    expect(stats.kicks).toBe(0);
    for (const s of fast) s.close();
  });
});

describe("acks are claims", () => {
  it("closes a socket with 4000 for an ack of a message it was not sent, or with the wrong tag", async () => {
    const room = "ack-lies";
    await publish(server.url, room, "one");
    const ahead = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`, { autoAck: false });
    await publish(server.url, room, "two");
    await ahead.waitForMessages(1);
    ahead.send({ type: "ack", seq: Number.MAX_SAFE_INTEGER, tag: 0 });
    expect((await ahead.closed).code).toBe(CloseCode.BAD_FRAME);

    const wrongTag = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`, { autoAck: false });
    await publish(server.url, room, "three");
    await wrongTag.waitForMessages(1);
    const message = wrongTag.messages[0]!;
    wrongTag.send({ type: "ack", seq: message.seq, tag: (message.tag + 1) % 2 ** 32 });
    expect((await wrongTag.closed).code).toBe(CloseCode.BAD_FRAME);
    expect((await roomStats(server.url, room)).refusals.bad_ack).toBe(2);

    // Without a tag an ack is not protocol at all.
    const untagged = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    untagged.send({ type: "ack", seq: 1 });
    expect((await untagged.closed).code).toBe(CloseCode.BAD_FRAME);
  });

  it("does not release a window for a stalled reader whatever it claims, and closes it once it stays behind", async () => {
    const graceful = await startServer({ vars: { WINDOW_BYTES: String(WINDOW), SLOW_GRACE_MS: "1500" } });
    try {
      const room = "ack-stalled";
      const stalled = await TestSocket.open(`${graceful.wsUrl}/rooms/${room}/ws`, { autoAck: false });
      const fast = await TestSocket.open(`${graceful.wsUrl}/rooms/${room}/ws`);
      stalled.pauseReading();
      for (let i = 0; i < 40; i++) await publish(graceful.url, room, payload(i));
      await fast.waitForMessages(40);
      expectSeqs(fast.messages, 1, 40);
      // It can only echo tags it has read: acks for what it read release nothing more than that.
      const stats = await roomStats(graceful.url, room);
      expect(stats.windowBytesMax).toBeLessThanOrEqual(WINDOW_BOUND);
      expect(stats.behind).toBe(1);
      // Behind with no acknowledged progress for SLOW_GRACE_MS: closed with 4008.
      const kicked = await readUntil(() => roomStats(graceful.url, room), (s) => s.kicks !== 0, { timeoutMs: 10_000, everyMs: 250, what: "the kick" });
      expect(kicked.kicks).toBe(1);
      const after = await roomStats(graceful.url, room);
      expect(after.connections).toBe(1);
      expect(after.behind).toBe(0);
      fast.close();
    } finally {
      await graceful.stop();
    }
  });

  it("closes a slow consumer with 4008, and it resumes with nothing lost", async () => {
    const graceful = await startServer({ vars: { WINDOW_BYTES: String(WINDOW), SLOW_GRACE_MS: "1000" } });
    try {
      const room = "kick-resume";
      const slow = await TestSocket.open(`${graceful.wsUrl}/rooms/${room}/ws`, { autoAck: false });
      for (let i = 0; i < 20; i++) await publish(graceful.url, room, payload(i));
      const closed = await slow.closed;
      expect(closed.code).toBe(CloseCode.SLOW_CONSUMER);
      const last = slow.messages.at(-1)?.seq ?? 0;
      const resumed = await TestSocket.open(`${graceful.wsUrl}/rooms/${room}/ws?since=${last}`);
      await resumed.waitForMessages(20 - last);
      expectSeqs(resumed.messages, last + 1, 20);
      resumed.close();
    } finally {
      await graceful.stop();
    }
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
    // Concurrent publishes shared frames, and each frame is one history row.
    expect(stats.framesSent).toBeLessThan(stats.deliveries);
    expect(stats.historyRowsWritten).toBeLessThan(200);
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
