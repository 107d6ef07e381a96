import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CloseCode, type LostEvent, type WelcomeEvent } from "../../protocol";
import { MuxSocket } from "../helpers/multiplex";
import { startServer, type LocalServer } from "../helpers/server";
import { expectSeqs, publish, refusedUpgrade, roomStats, TestSocket } from "../helpers/socket";

let server: LocalServer;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server?.stop();
});

describe("fan-out", () => {
  it("delivers every published message once, in order, to every socket", async () => {
    const room = "fanout-order";
    const sockets = await Promise.all(Array.from({ length: 40 }, () => TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`)));
    for (const s of sockets) await s.waitFor((x) => x.events.some((e) => e.type === "welcome"));

    // Concurrent publishes: the room orders them; the answers' seqs are 1..60 in some order.
    const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => publish(server.url, room, { i })));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    expect(answers.map((a) => a.body.seq).sort((a, b) => a - b)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    expect(answers.every((a) => a.body.recipients === 40)).toBe(true);

    for (const s of sockets) {
      await s.waitForMessages(60);
      expectSeqs(s.messages, 1, 60);
      // The data each seq carries is the one its publish was answered with.
      for (const answer of answers) {
        expect(s.messages[answer.body.seq - 1]?.data).toEqual({ i: answers.indexOf(answer) });
      }
      s.close();
    }
  });

  it("welcomes with the room's latest seq and epoch, and delivers text bodies as strings", async () => {
    const room = "welcome";
    await publish(server.url, room, 1);
    const s = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    await s.waitFor((x) => x.events.length >= 1);
    const welcome = s.events[0] as WelcomeEvent;
    expect(welcome).toMatchObject({ type: "welcome", room, seq: 1, window: 1048576 });
    expect(welcome.epoch).toMatch(/^[0-9a-f-]{36}$/);

    const res = await fetch(`${server.url}/rooms/${room}/publish`, { method: "POST", body: "plain text", headers: { "content-type": "text/plain" } });
    expect(res.status).toBe(200);
    await s.waitForMessages(1);
    expect(s.messages[0]).toMatchObject({ type: "message", seq: 2, data: "plain text" });
    expect(typeof s.messages[0]?.ts).toBe("number");
    s.close();
  });

  it("answers heartbeats with pong", async () => {
    const s = await TestSocket.open(`${server.wsUrl}/rooms/heartbeat/ws`);
    s.send("ping");
    await s.waitFor((x) => x.frames.includes("pong"), 5000, "pong");
    s.close();
  });
});

describe("resume", () => {
  it("resumes with since after a disconnect, with no gap and no duplicate", async () => {
    const room = "resume";
    const first = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    for (let i = 0; i < 10; i++) await publish(server.url, room, { i });
    await first.waitForMessages(10);
    const last = first.messages.at(-1)?.seq ?? 0;
    const epoch = (first.events[0] as WelcomeEvent).epoch;
    first.close();
    await first.closed;

    for (let i = 10; i < 25; i++) await publish(server.url, room, { i });

    const again = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?since=${last}&epoch=${epoch}`);
    const live = publish(server.url, room, { i: 25 });
    await again.waitForMessages(16);
    await live;
    expectSeqs(again.messages, 11, 26);
    expect(again.events.some((e) => e.type === "lost")).toBe(false);
    again.close();
  });

  it("tells a client whose since is older than history what it lost, then continues", async () => {
    const room = "resume-lost";
    const small = await startServer({ vars: { HISTORY_MAX_MESSAGES: "5" } });
    try {
      for (let i = 0; i < 100; i++) await publish(small.url, room, { i });
      const s = await TestSocket.open(`${small.wsUrl}/rooms/${room}/ws?since=3`);
      await s.waitForMessages(5);
      const lost = s.events.find((e): e is LostEvent => e.type === "lost");
      // History holds exactly the newest five.
      expect(lost).toEqual({ type: "lost", reason: "history", from: 4, to: 95 });
      expectSeqs(s.messages, 96, 100);
      s.close();
    } finally {
      await small.stop();
    }
  });

  it("reports a lost epoch when the client's seqs come from another history", async () => {
    const room = "resume-epoch";
    await publish(server.url, room, "x");
    const s = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?since=1&epoch=not-this-one`);
    await s.waitFor((x) => x.events.some((e) => e.type === "lost"));
    expect(s.events.find((e) => e.type === "lost")).toMatchObject({ reason: "epoch", from: 1, to: 1 });
    s.close();
  });

  it("reports a lost epoch to a room with no message yet as the empty range 1..0: the next message is 1", async () => {
    const room = "resume-epoch-empty";
    const s = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?since=38&epoch=not-this-one`);
    const mux = await MuxSocket.open(`${server.wsUrl}/ws`);
    mux.subscribe(room, { since: 38, epoch: "not-this-one" });
    await s.waitFor((x) => x.events.some((e) => e.type === "lost"));
    await mux.waitFor((x) => x.of("lost", room).length === 1);
    // Nothing of the new history is missing (to - from + 1 = 0), but the client's seqs are of a history that is gone.
    expect(s.events.find((e) => e.type === "lost")).toEqual({ type: "lost", reason: "epoch", from: 1, to: 0 });
    expect(mux.of("lost", room)).toEqual([{ type: "lost", room, reason: "epoch", from: 1, to: 0 }]);
    await publish(server.url, room, "first");
    await s.waitForMessages(1);
    await mux.waitForMessages(room, 1);
    expect(s.messages.map((m) => m.seq)).toEqual([1]);
    expect(mux.messages(room).map((m) => m.seq)).toEqual([1]);
    s.close();
    mux.close();
  });
});

describe("bad input", () => {
  const cases: [string, string, RequestInit, number, string][] = [
    ["bad room name", "/rooms/bad%20room/publish", { method: "POST", body: "x" }, 400, "bad_room"],
    ["room name too long", `/rooms/${"a".repeat(65)}/ws`, {}, 400, "bad_room"],
    ["no upgrade header", "/rooms/ok/ws", {}, 426, "upgrade_required"],
    ["broken JSON body", "/rooms/ok/publish", { method: "POST", body: "{", headers: { "content-type": "application/json" } }, 400, "bad_json"],
    ["empty body", "/rooms/ok/publish", { method: "POST", body: "" }, 400, "bad_request"],
    ["oversized body", "/rooms/ok/publish", { method: "POST", body: "x".repeat(70_000) }, 413, "too_large"],
    ["publish with GET", "/rooms/ok/publish", {}, 405, "method_not_allowed"],
    ["unknown route", "/nope", {}, 404, "not_found"],
  ];
  for (const [name, path, init, status, error] of cases) {
    it(`${name}: ${status} ${error}`, async () => {
      const res = await fetch(`${server.url}${path}`, init);
      expect(res.status).toBe(status);
      expect(res.headers.get("content-type")).toContain("application/json");
      expect(await res.json()).toMatchObject({ error });
    });
  }

  for (const [name, query] of [["bad since", "since=abc"], ["bad epoch", "since=1&epoch=%00"]] as const) {
    it(`upgrade with ${name}: 400 bad_request, no socket`, async () => {
      const refused = await refusedUpgrade(`${server.wsUrl}/rooms/ok/ws?${query}`);
      expect(refused.status).toBe(400);
      expect(JSON.parse(refused.body)).toMatchObject({ error: "bad_request" });
    });
  }

  const frames: [string, string | Buffer, number][] = [
    ["malformed JSON frame", "{nope", CloseCode.BAD_FRAME],
    ["unknown frame type", JSON.stringify({ type: "subscribe" }), CloseCode.BAD_FRAME],
    ["ack without a seq", JSON.stringify({ type: "ack" }), CloseCode.BAD_FRAME],
    ["ack without a tag", JSON.stringify({ type: "ack", seq: 1 }), CloseCode.BAD_FRAME],
    ["ack for a message never sent", JSON.stringify({ type: "ack", seq: 99, tag: 1 }), CloseCode.BAD_FRAME],
    ["replay request (not part of the protocol)", JSON.stringify({ type: "replay", from: 1 }), CloseCode.BAD_FRAME],
    ["binary frame", Buffer.from([1, 2, 3]), CloseCode.BAD_FRAME],
    ["frame far over the message limit (over MAX_FRAME_BYTES)", JSON.stringify({ type: "publish", data: "x".repeat(200_000) }), CloseCode.MESSAGE_TOO_BIG],
  ];
  frames.forEach(([name, frame, code], index) => {
    it(`${name}: close ${code}, and the room keeps what it had`, async () => {
      const room = `bad-frame-${index}`;
      await publish(server.url, room, "before");
      const s = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
      s.ws.send(frame);
      const closed = await s.closed;
      expect(closed.code).toBe(code);
      const stats = await roomStats(server.url, room);
      expect(stats.seq).toBe(1);
      const after = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?since=0`);
      await after.waitForMessages(1);
      expect(after.messages[0]?.data).toBe("before");
      after.close();
    });
  });
});

describe("socket publishes", () => {
  it("refuses one whose data grows past MAX_MESSAGE_BYTES as stored JSON, keeps the socket and stores nothing", async () => {
    const room = "socket-too-large";
    const s = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    // A 60 KB frame of 1e20 values: under MAX_FRAME_BYTES as sent, ~260 KB once serialized for storage.
    const numbers = Array(12_000).fill("1e20").join(",");
    s.send(`{"type":"publish","id":"big","data":[${numbers}]}`);
    await s.waitFor((x) => x.events.some((e) => e.type === "error"));
    expect(s.events.find((e) => e.type === "error")).toMatchObject({ code: "too_large", id: "big" });
    s.send({ type: "publish", id: "small", data: "fits" });
    await s.waitFor((x) => x.events.some((e) => e.type === "published"));
    expect(s.events.find((e) => e.type === "published")).toMatchObject({ id: "small", seq: 1 });
    expect(s.closeInfo).toBeNull();
    expect((await roomStats(server.url, room)).seq).toBe(1);
    s.close();
  });
});

describe("stats", () => {
  it("reports connections, seq, published, frames and bytes", async () => {
    const room = "stats";
    const s = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    await publish(server.url, room, "a");
    await s.waitForMessages(1);
    const stats = await roomStats(server.url, room);
    expect(stats).toMatchObject({ room, connections: 1, seq: 1, published: 1, framesSent: 1, deliveries: 1 });
    expect(stats.bytesSent).toBeGreaterThan(0);
    s.close();
  });

  it("serves /healthz", async () => {
    const res = await fetch(`${server.url}/healthz`);
    expect(await res.json()).toEqual({ ok: true });
  });
});
