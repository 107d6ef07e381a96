import { createServer as createTcpServer, type Server as TcpServer } from "node:net";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import { RoomClient, type RoomClientOptions } from "../../client-sdk/src/index";
import { backoffCeiling } from "../../client-sdk/src/backoff";
import { startServer, type LocalServer } from "../helpers/server";
import { Recorder, publish, waitFor } from "../helpers/sdk-harness";
import { startProxy, type TcpProxy } from "../helpers/sdk-proxy";
import { sleep } from "../helpers/wait";

// Ports 18100-18199 belong to these tests.
const PORT = {
  main: 18101,
  idle: 18102,
  restart: 18103,
  smallWindow: 18104,
  tailDrop: 18107,
  shortHistory: 18105,
  proxy: 18110,
  refusing: 18120,
  stopCodes: 18121,
} as const;

let roomCounter = 0;
const uniqueRoom = (label: string) => `sdk-${label}-${process.pid}-${Date.now().toString(36)}-${++roomCounter}`;

/** Every client a test opens, closed after it so no timer outlives the test. */
const clients: RoomClient[] = [];
function open(options: RoomClientOptions): { client: RoomClient; rec: Recorder } {
  const client = new RoomClient({ WebSocket, ...options });
  clients.push(client);
  return { client, rec: new Recorder(client) };
}
afterEach(() => {
  for (const client of clients.splice(0)) client.close();
});

/** Counts the frames a client sends, by type, through a real `ws` socket. */
function countingWebSocket(counts: Map<string, number>): typeof WebSocket {
  return class CountingWebSocket extends WebSocket {
    override send(data: unknown, ...rest: unknown[]): void {
      const text = String(data);
      const type = text === "ping" ? "ping" : (JSON.parse(text) as { type: string }).type;
      counts.set(type, (counts.get(type) ?? 0) + 1);
      (super.send as (...args: unknown[]) => void)(data, ...rest);
    }
  };
}

describe("RoomClient against the local server", () => {
  let server: LocalServer;
  beforeAll(async () => {
    server = await startServer({ port: PORT.main });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("receives every message once, in order, and acks in batches", async () => {
    const room = uniqueRoom("order");
    const counts = new Map<string, number>();
    const { client, rec } = open({ host: server.url, room, WebSocket: countingWebSocket(counts) });
    await waitFor(() => client.state === "open", "the client to open");
    const startSeq = client.lastSeq!;

    // Concurrent publishes so the room coalesces them into batch frames.
    const sent = new Map<number, unknown>();
    for (let round = 0; round < 25; round++) {
      const datas = Array.from({ length: 20 }, (_, i) => ({ round, i, text: `message ${round}.${i}` }));
      const seqs = await Promise.all(datas.map((d) => publish(server.url, room, d)));
      seqs.forEach((seq, i) => sent.set(seq, datas[i]));
    }
    const total = sent.size;
    await waitFor(() => rec.seqs.length >= total, `${total} messages`);

    expect(rec.seqs).toEqual(Recorder.range(startSeq + 1, startSeq + total));
    expect(rec.data).toEqual(rec.seqs.map((seq) => sent.get(seq)));
    expect(rec.lost).toEqual([]);
    // Acks are batched (one per ackDelayMs at most): far fewer than messages.
    await waitFor(() => (counts.get("ack") ?? 0) > 0, "an ack");
    expect(counts.get("ack")!).toBeLessThanOrEqual(total / 10);

    client.close();
    expect(client.state).toBe("closed");
    expect(rec.states.at(-1)).toMatchObject({ state: "closed", cause: "client_closed", code: 1000 });
  });

  it("publishes over the socket and resolves with the seq another client receives", async () => {
    const room = uniqueRoom("publish");
    const a = open({ url: `${server.wsUrl}/rooms/${room}/ws` });
    const b = open({ host: server.url, room });
    // Publish before the socket is open: the client waits for it.
    const seq = await a.client.publish({ hello: "world" });
    await waitFor(() => b.client.state === "open", "b to open");
    const seq2 = await a.client.publish("second");
    expect(seq2).toBe(seq + 1);
    await waitFor(() => b.rec.seqs.includes(seq2), "b to receive the second message");
    expect(b.rec.data.at(-1)).toBe("second");
    expect(a.rec.seqs).toEqual([seq, seq2]);
  });

  it("paces a burst of socket publishes inside the room's frame budget", async () => {
    const room = uniqueRoom("burst");
    const { client, rec } = open({ host: server.url, room });
    await waitFor(() => client.state === "open", "the client to open");
    // Far more frames at once than the room allows per second: sent all at once, they would close the socket with 4009.
    const seqs = await Promise.all(Array.from({ length: 100 }, (_, i) => client.publish(i)));
    expect(new Set(seqs).size).toBe(100);
    await waitFor(() => rec.seqs.length === 100, "the client's own messages to come back");
    expect(rec.data).toEqual(Recorder.range(0, 99));
    expect(rec.reconnections).toBe(0);
  });

  it("detects a silently dead connection within ping interval + pong timeout, then resumes", async () => {
    const proxy: TcpProxy = await startProxy(server.port, PORT.proxy);
    try {
      const room = uniqueRoom("dead");
      const pingIntervalMs = 300;
      const pongTimeoutMs = 700;
      const { client, rec } = open({
        host: proxy.url,
        room,
        pingIntervalMs,
        pongTimeoutMs,
        backoff: { initialDelayMs: 100, maxDelayMs: 500 },
      });
      await waitFor(() => client.state === "open", "the client to open");
      const first = await publish(server.url, room, "before");
      await waitFor(() => rec.seqs.includes(first), "the first message");

      // The network dies silently: no FIN, no RST, no bytes.
      proxy.freeze();
      const frozenAt = Date.now();
      const missed: number[] = [];
      for (let i = 0; i < 10; i++) missed.push(await publish(server.url, room, `while dead ${i}`));
      await waitFor(() => rec.states.some((s) => s.state === "reconnecting" && s.at >= frozenAt), "the client to notice", 10_000);
      const detectedAfter = rec.states.find((s) => s.state === "reconnecting" && s.at >= frozenAt)!.at - frozenAt;
      // Timers on a loaded 2-core machine run late; allow scheduling slack on top of the configured bound.
      expect(detectedAfter).toBeLessThanOrEqual(pingIntervalMs + pongTimeoutMs + 1500);
      expect(rec.states.find((s) => s.state === "reconnecting" && s.at >= frozenAt)?.cause).toBe("no_pong");

      await waitFor(() => rec.seqs.includes(missed.at(-1)!), "the messages published while the connection was dead");
      expect(rec.seqs).toEqual(Recorder.range(first, missed.at(-1)!));
      expect(client.state).toBe("open");
    } finally {
      await proxy.close();
    }
  });

  it("reconnects after the connection drops and loses nothing published meanwhile", async () => {
    const proxy = await startProxy(server.port, PORT.proxy);
    try {
      const room = uniqueRoom("drop");
      const { client, rec } = open({ host: proxy.url, room, backoff: { initialDelayMs: 100, maxDelayMs: 400 } });
      await waitFor(() => client.state === "open", "the client to open");
      const first = await publish(server.url, room, 0);
      proxy.refuse(true);
      proxy.drop();
      await waitFor(() => client.state === "reconnecting", "the client to notice the drop");
      // The connection went without a close frame: the network's doing, not the server's.
      expect(rec.states.at(-1)).toMatchObject({ state: "reconnecting", cause: "network", code: 1006 });
      let last = first;
      for (let i = 1; i <= 20; i++) last = await publish(server.url, room, i);
      await sleep(300);
      proxy.refuse(false);
      await waitFor(() => rec.seqs.at(-1) === last, "the messages published while disconnected");
      expect(rec.seqs).toEqual(Recorder.range(first, last));
      expect(rec.data).toEqual(Recorder.range(0, 20));
    } finally {
      await proxy.close();
    }
  });

  it("retries at once when the browser reports the network is back", async () => {
    // Node has no window; stand one in for the page's `online` event.
    const page = new EventTarget();
    const g = globalThis as unknown as Partial<Pick<EventTarget, "addEventListener" | "removeEventListener">>;
    g.addEventListener = page.addEventListener.bind(page);
    g.removeEventListener = page.removeEventListener.bind(page);
    const proxy = await startProxy(server.port, PORT.proxy);
    try {
      const room = uniqueRoom("online");
      // A backoff so long that only the online event can explain a prompt reconnect.
      const { client, rec } = open({ host: proxy.url, room, backoff: { initialDelayMs: 600_000, maxDelayMs: 600_000 } });
      await waitFor(() => client.state === "open", "the client to open");
      proxy.refuse(true);
      proxy.drop();
      await waitFor(() => client.state === "reconnecting", "the client to notice the drop");
      const missed = await publish(server.url, room, "while offline");
      proxy.refuse(false);
      page.dispatchEvent(new Event("online"));
      await waitFor(() => rec.seqs.includes(missed), "the message published while offline", 5000);
      expect(client.state).toBe("open");
    } finally {
      delete g.addEventListener;
      delete g.removeEventListener;
      await proxy.close();
    }
  });
});

describe("server-side closes", () => {
  it("resumes after the server closes an idle socket (4010) and loses nothing", async () => {
    const server = await startServer({ port: PORT.idle, vars: { IDLE_TIMEOUT_SECONDS: "1" } });
    try {
      const room = uniqueRoom("idle");
      // Never ping or ack, so the server's idle sweep closes the socket again and again.
      const { client, rec } = open({
        host: server.url,
        room,
        pingIntervalMs: 600_000,
        ackDelayMs: 600_000,
        backoff: { initialDelayMs: 200, maxDelayMs: 400 },
      });
      await waitFor(() => client.state === "open", "the client to open");
      const start = client.lastSeq!;
      let last = start;
      const end = Date.now() + 3000;
      while (Date.now() < end) {
        last = await publish(server.url, room, `m${last + 1}`);
        await sleep(20);
      }
      // The room drops the socket from fan-out at once, but the runtime may
      // hold the TCP connection open after the close handshake, so the close
      // can reach the client much later.
      await waitFor(() => rec.states.some((s) => s.code === 4010), "the server to close the idle socket", 45_000);
      for (let i = 0; i < 20; i++) last = await publish(server.url, room, `m${last + 1}`);
      await waitFor(() => rec.seqs.at(-1) === last, "every message");
      expect(rec.states.some((s) => s.state === "reconnecting" && s.cause === "server_closed" && s.code === 4010)).toBe(true);
      expect(rec.seqs).toEqual(Recorder.range(start + 1, last));
      expect(rec.data).toEqual(rec.seqs.map((seq) => `m${seq}`));
      expect(rec.lost).toEqual([]);
    } finally {
      await server.stop();
    }
  });

  it("survives a server restart with the same data directory", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "sdk-restart-"));
    const server = await startServer({ port: PORT.restart, dataDir });
    try {
      const room = uniqueRoom("restart");
      const { client, rec } = open({ host: server.url, room, backoff: { initialDelayMs: 200, maxDelayMs: 1000 } });
      await waitFor(() => client.state === "open", "the client to open");
      let last = 0;
      for (let i = 0; i < 30; i++) last = await publish(server.url, room, i);
      await waitFor(() => rec.seqs.at(-1) === last, "the first 30 messages");
      const epoch = client.epoch;

      await server.restart();
      for (let i = 30; i < 60; i++) last = await publish(server.url, room, i);
      await waitFor(() => rec.seqs.at(-1) === last && client.state === "open", "the messages published after the restart");

      expect(rec.states.some((s) => s.state === "reconnecting" && s.cause === "server_closed" && s.code === 1012)).toBe(true);
      expect(rec.seqs).toEqual(Recorder.range(1, 60));
      expect(rec.data).toEqual(Recorder.range(0, 59));
      expect(rec.lost).toEqual([]);
      expect(client.epoch).toBe(epoch);
    } finally {
      await server.stop();
    }
  });
});

describe("flow control and history", () => {
  it("gets every message once through a small window, with nothing sent twice and nothing to repair", async () => {
    const server = await startServer({ port: PORT.smallWindow, vars: { WINDOW_BYTES: "16384", BATCH_MAX_BYTES: "2048" } });
    try {
      const room = uniqueRoom("window");
      const counts = new Map<string, number>();
      let messageEvents = 0;
      const { client, rec } = open({ host: server.url, room, WebSocket: countingWebSocket(counts) });
      client.addEventListener("message", () => (messageEvents += 1));
      await waitFor(() => client.state === "open", "the client to open");
      const payload = "x".repeat(300);
      let last = 0;
      for (let round = 0; round < 5; round++) {
        const seqs = await Promise.all(Array.from({ length: 100 }, (_, i) => publish(server.url, room, { round, i, payload })));
        last = Math.max(last, ...seqs);
      }
      await waitFor(() => rec.seqs.at(-1) === last, "every message", 30_000);
      const stats = (await (await fetch(`${server.url}/rooms/${room}`)).json()) as { catchUpFrames: number; kicks: number; deliveries: number };

      expect(stats.catchUpFrames).toBeGreaterThan(0); // the window filled and catch-up really ran
      expect(rec.seqs).toEqual(Recorder.range(1, last));
      // Nothing went over the wire twice: the room delivered each message to this socket once.
      expect(stats.deliveries).toBe(last);
      expect(messageEvents).toBe(last);
      expect([...counts.keys()].sort()).toEqual(["ack"]);
      expect(rec.lost).toEqual([]);
      expect(rec.reconnections).toBe(0);
    } finally {
      await server.stop();
    }
  });

  it("ends a burst that overfills the window complete, with no later message to pull the tail", async () => {
    // Each message is its own frame and two fill the window: the room waits for an ack after each pair.
    const server = await startServer({ port: PORT.tailDrop, vars: { WINDOW_BYTES: "4096", BATCH_MAX_BYTES: "1024" } });
    try {
      const room = uniqueRoom("tail");
      const { client, rec } = open({ host: server.url, room });
      await waitFor(() => client.state === "open", "the client to open");
      const payload = "y".repeat(3000);
      let last = 0;
      for (let round = 0; round < 5; round++) {
        const seqs = await Promise.all(Array.from({ length: 8 }, (_, i) => publish(server.url, room, { round, i, payload })));
        last = Math.max(last, ...seqs);
        // Then silence: the client's acks alone bring the rest.
        await waitFor(() => rec.seqs.at(-1) === last, `round ${round} in full`, 10_000);
      }
      const stats = (await (await fetch(`${server.url}/rooms/${room}`)).json()) as { catchUpFrames: number };
      expect(stats.catchUpFrames).toBeGreaterThan(0);
      expect(rec.seqs).toEqual(Recorder.range(1, last));
      expect(rec.lost).toEqual([]);
    } finally {
      await server.stop();
    }
  });

  it("reports history that no longer reaches back, then continues", async () => {
    const server = await startServer({ port: PORT.shortHistory, vars: { HISTORY_MAX_MESSAGES: "10" } });
    try {
      const room = uniqueRoom("history");
      for (let i = 1; i <= 31; i++) await publish(server.url, room, i);
      const { client, rec } = open({ host: server.url, room, since: 0 });
      await waitFor(() => rec.seqs.at(-1) === 31, "the messages still in history");
      expect(rec.lost).toEqual([{ reason: "history", from: 1, to: 21 }]);
      expect(rec.seqs).toEqual(Recorder.range(22, 31));

      // A position from a history that no longer exists: reported once, then live from the present.
      const stale = open({ host: server.url, room, since: 5, epoch: "00000000-0000-0000-0000-000000000000" });
      await waitFor(() => stale.client.state === "open" && stale.rec.lost.length > 0, "the epoch loss report");
      const next = await publish(server.url, room, 32);
      await waitFor(() => stale.rec.seqs.includes(next) && rec.seqs.includes(next), "the next live message");
      expect(stale.rec.lost).toEqual([{ reason: "epoch", from: 1, to: 31 }]);
      expect(stale.rec.seqs).toEqual([32]);
      expect(stale.client.epoch).toBe(client.epoch);
      expect(client.lastSeq).toBe(32);
    } finally {
      await server.stop();
    }
  });
});

describe("reconnect policy", () => {
  it("spaces attempts with bounded, jittered exponential backoff", async () => {
    const accepts: number[] = [];
    const tcp: TcpServer = createTcpServer((socket) => {
      accepts.push(Date.now());
      socket.destroy();
    });
    await new Promise<void>((resolve) => tcp.listen(PORT.refusing, "127.0.0.1", () => resolve()));
    try {
      const backoff = { initialDelayMs: 40, maxDelayMs: 320, factor: 2 };
      const { client } = open({ host: `http://127.0.0.1:${PORT.refusing}`, room: "anything", backoff });
      await waitFor(() => accepts.length >= 14, "14 connection attempts", 20_000);
      client.close();
      const gaps = accepts.slice(1).map((t, i) => t - accepts[i]!);
      // Gap i follows the i-th failure; scheduling slack on a busy machine comes on top.
      gaps.forEach((gap, i) => expect(gap).toBeLessThanOrEqual(backoffCeiling(i, backoff) + 300));
      // Full jitter: at the cap, delays spread out instead of all sitting near the maximum.
      const capped = gaps.slice(3);
      expect(Math.min(...capped)).toBeLessThan(0.75 * backoff.maxDelayMs);
      expect(new Set(capped).size).toBeGreaterThan(1);

      const attempts = accepts.length;
      await sleep(600);
      expect(accepts.length).toBe(attempts); // closed means no further attempts
    } finally {
      await new Promise((resolve) => tcp.close(resolve));
    }
  });

  it("stops after an authorization refusal and retries after a restart code", async () => {
    const wss = new WebSocketServer({ port: PORT.stopCodes, host: "127.0.0.1" });
    const seen: string[] = [];
    wss.on("connection", (ws, request) => {
      const room = new URL(request.url!, "http://x").pathname.split("/")[2]!;
      seen.push(room);
      ws.close(room.startsWith("unauthorized") ? 4001 : 1012, "test");
    });
    try {
      const host = `http://127.0.0.1:${PORT.stopCodes}`;
      const refused = open({ host, room: "unauthorized", backoff: { initialDelayMs: 20, maxDelayMs: 40 } });
      const restarting = open({ host, room: "restarting", backoff: { initialDelayMs: 20, maxDelayMs: 40 } });
      await waitFor(() => refused.client.state === "closed", "the refused client to stop");
      await waitFor(() => seen.filter((r) => r === "restarting").length >= 5, "the restarting client to retry");
      await sleep(300);
      expect(seen.filter((r) => r === "unauthorized")).toHaveLength(1);
      expect(refused.rec.states.at(-1)).toMatchObject({ state: "closed", cause: "auth_refused", code: 4001 });
      expect(restarting.rec.states[0]).toMatchObject({ state: "reconnecting", cause: "server_closed", code: 1012, reason: "test" });
      expect(restarting.client.state).not.toBe("closed");
      await expect(refused.client.publish("late")).rejects.toMatchObject({ code: "closed" });
    } finally {
      await new Promise((resolve) => wss.close(resolve));
    }
  });

  it("stops when the upgrade itself is refused with HTTP 401", async () => {
    let attempts = 0;
    const wss = new WebSocketServer({
      port: PORT.stopCodes,
      host: "127.0.0.1",
      verifyClient: (_info, done) => {
        attempts += 1;
        done(false, 401, "Unauthorized");
      },
    });
    try {
      const { client, rec } = open({ host: `http://127.0.0.1:${PORT.stopCodes}`, room: "x", backoff: { initialDelayMs: 20, maxDelayMs: 40 } });
      await waitFor(() => client.state === "closed", "the client to stop");
      await sleep(300);
      expect(attempts).toBe(1);
      expect(rec.states.at(-1)).toMatchObject({ state: "closed", cause: "auth_refused", code: 4001 });
    } finally {
      await new Promise((resolve) => wss.close(resolve));
    }
  });
});
