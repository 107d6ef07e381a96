/**
 * A room's hooks, inside workerd: the fan-out app mounted at /fanout of a
 * worker of its own, with HookedRoom (test/hooks/worker.ts) bound as ROOMS.
 * Every allow, deny, transform and failure path of onConnect, beforePublish,
 * onClientFrame and onClose, through real sockets and HTTP requests, and
 * what the room's invariants look like afterwards: seqs without gaps, other
 * sockets unaffected, the room still serving.
 */
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { BroadcastResult, ServerError, ServerMessage, PublishedEvent, RoomStats, ServerEvent } from "../../protocol";
import { eventually, until } from "../helpers/wait";

type Entry = { fetch(input: string, init?: RequestInit): Promise<Response> };
const worker = (exports as unknown as { default: Entry }).default;
const BASE = "http://edge.test/fanout";

interface Socket {
  ws: WebSocket;
  events: ServerEvent[];
  closed: Promise<{ code: number; reason: string }>;
  messages(): ServerMessage[];
  /** Events of one type, by `type`. */
  of<T extends ServerEvent>(type: string): T[];
}

async function open(room: string, query = "", headers: Record<string, string> = {}): Promise<Socket> {
  const res = await worker.fetch(`${BASE}/rooms/${room}/ws${query}`, { headers: { Upgrade: "websocket", ...headers } });
  expect(res.status).toBe(101);
  const ws = res.webSocket as WebSocket;
  const events: ServerEvent[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    ws.addEventListener("close", (e) => resolve({ code: e.code, reason: e.reason }));
  });
  ws.addEventListener("message", (e) => {
    const parsed: unknown = JSON.parse(e.data as string);
    events.push(...((Array.isArray(parsed) ? parsed : [parsed]) as ServerEvent[]));
  });
  ws.accept();
  return {
    ws,
    events,
    closed,
    messages: () => events.filter((e): e is ServerMessage => e.type === "message"),
    of: <T extends ServerEvent>(type: string) => events.filter((e) => e.type === type) as T[],
  };
}

async function welcomed(room: string, query = ""): Promise<Socket> {
  const socket = await open(room, query);
  await until(() => socket.events.some((e) => e.type === "welcome"));
  return socket;
}

async function publish(room: string, data: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await worker.fetch(`${BASE}/rooms/${room}/publish`, {
    method: "POST",
    body: JSON.stringify(data),
    headers: { "content-type": "application/json" },
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function stats(room: string): Promise<RoomStats> {
  return (await (await worker.fetch(`${BASE}/rooms/${room}`)).json()) as RoomStats;
}

function send(socket: Socket, frame: unknown): void {
  socket.ws.send(JSON.stringify(frame));
}

describe("the app mounted in a worker of its own", () => {
  it("serves the worker's own routes beside the app's, under the mount path", async () => {
    expect(await (await worker.fetch("http://edge.test/")).text()).toBe("the team's own worker");
    expect(await (await worker.fetch(`${BASE}/healthz`)).json()).toEqual({ ok: true });
    const answer = await publish("mounted", "hello");
    expect(answer).toEqual({ status: 200, body: { room: "mounted", seq: 1, recipients: 0 } });
    // The demo page loads the SDK relative to itself, so it works under the mount too.
    const demo = await (await worker.fetch(`${BASE}/demo?room=mounted`)).text();
    expect(demo).toContain('from "./sdk.js"');
    expect((await worker.fetch(`${BASE}/sdk.js`)).status).toBe(200);
  });
});

describe("onConnect", () => {
  it("admits a socket with data that its later hooks see, and can make it listen-only", async () => {
    const ann = await welcomed("connect-data", "?name=ann");
    send(ann, { type: "x-echo", id: "e1" });
    await until(() => ann.of("x-echo").length === 1);
    const echo = ann.of<ServerEvent & { data: { name: string; joinedAt: number }; canPublish: boolean }>("x-echo")[0]!;
    expect(echo.data.name).toBe("ann");
    expect(echo.data.joinedAt).toBeGreaterThan(0);
    expect(echo.canPublish).toBe(true);

    const bob = await welcomed("connect-data", "?name=bob&listen=1");
    send(bob, { type: "x-echo" });
    send(bob, { type: "publish", data: "from a listener", id: "p1" });
    await until(() => bob.of("x-echo").length === 1 && bob.of("error").length === 1);
    expect(bob.of<ServerEvent & { canPublish: boolean }>("x-echo")[0]!.canPublish).toBe(false);
    expect(bob.of<ServerError>("error")[0]).toMatchObject({ code: "forbidden", id: "p1" });
    ann.ws.close(1000);
    bob.ws.close(1000);
  });

  it("refuses with the documented close codes, or statuses with X-Refusal: http", async () => {
    for (const [deny, close, status, error] of [
      ["forbidden", 4003, 403, "forbidden"],
      ["unauthorized", 4001, 401, "unauthorized"],
      ["try_again_later", 1013, 503, "room_full"],
    ] as const) {
      const refused = await open("connect-deny", `?deny=${deny}`);
      expect(await refused.closed).toEqual({ code: close, reason: `denied: ${deny}` });
      expect(refused.events).toEqual([]);

      const res = await worker.fetch(`${BASE}/rooms/connect-deny/ws?deny=${deny}`, { headers: { Upgrade: "websocket", "X-Refusal": "http" } });
      expect(res.status).toBe(status);
      expect(await res.json()).toEqual({ error, message: `denied: ${deny}` });
      if (status === 503) expect(res.headers.get("retry-after")).toBe("5");
    }
    // Nobody was let in, and the refusals are counted.
    const after = await stats("connect-deny");
    expect(after.connections).toBe(0);
    expect(after.refusals.connect_refused).toBe(6);
  });

  it("answers a hook that throws, or answers what it may not, as an internal refusal, and keeps admitting others", async () => {
    for (const query of ["?throw=1", "?badcode=1", "?big=1"]) {
      const refused = await open("connect-fail", query);
      expect((await refused.closed).code).toBe(1011);
      const res = await worker.fetch(`${BASE}/rooms/connect-fail/ws${query}`, { headers: { Upgrade: "websocket", "X-Refusal": "http" } });
      expect(res.status).toBe(500);
      expect(await res.json()).toEqual({ error: "internal", message: "the room could not admit the socket" });
    }
    const fine = await welcomed("connect-fail", "?name=fine");
    expect(fine.events[0]).toMatchObject({ type: "welcome", room: "connect-fail" });
    const after = await stats("connect-fail");
    expect(after.refusals.hook_error).toBe(6);
    expect(after.connections).toBe(1);
    fine.ws.close(1000);
  });
});

describe("beforePublish", () => {
  it("refuses HTTP publishes with the statuses of its codes and takes no seq for them", async () => {
    const room = "publish-http";
    const listener = await welcomed(room);
    const cases: [unknown, number, string][] = [
      [{ op: "refuse" }, 400, "bad_request"],
      [{ op: "refuse", code: "forbidden" }, 403, "forbidden"],
      [{ op: "refuse", code: "rate_limited" }, 429, "rate_limited"],
      [{ op: "grow", bytes: 70_000 }, 413, "too_large"],
      [{ op: "throw" }, 500, "internal"],
      [{ op: "not-json" }, 500, "internal"],
      [{ op: "bad-shape" }, 500, "internal"],
      [{ op: "bad-code" }, 500, "internal"],
    ];
    let seq = 0;
    for (const [data, status, error] of cases) {
      const refused = await publish(room, data);
      expect(refused.status, JSON.stringify(data)).toBe(status);
      expect(refused.body.error).toBe(error);
      expect(typeof refused.body.message).toBe("string");
      expect(Object.keys(refused.body).sort()).toEqual(["error", "message"]);
      // Between refusals, accepted messages keep seqs without gaps.
      const ok = await publish(room, { plain: ++seq });
      expect(ok).toEqual({ status: 200, body: { room, seq, recipients: 1 } });
    }
    await until(() => listener.messages().length === cases.length);
    expect(listener.messages().map((m) => m.seq)).toEqual(cases.map((_, i) => i + 1));
    expect(listener.messages().map((m) => m.data)).toEqual(cases.map((_, i) => ({ plain: i + 1 })));
    const after = await stats(room);
    expect(after).toMatchObject({ seq: cases.length, published: cases.length });
    expect(after.refusals.publish_refused).toBe(4);
    expect(after.refusals.hook_error).toBe(4);
    listener.ws.close(1000);
  });

  it("transforms a message once for every socket, and tells it where the message came from", async () => {
    const room = "publish-transform";
    const ann = await welcomed(room, "?name=ann");
    const other = await welcomed(room);
    expect((await publish(room, { op: "transform", text: "over http" })).status).toBe(200);
    send(ann, { type: "publish", data: { op: "transform", text: "over the socket" }, id: "t1" });
    await until(() => other.messages().length === 2 && ann.messages().length === 2);
    expect(other.messages().map((m) => m.data)).toEqual([
      { op: "transform", text: "over http", by: "http", name: null },
      { op: "transform", text: "over the socket", by: "socket", name: "ann" },
    ]);
    // The same stored event reaches every socket.
    expect(ann.messages()).toEqual(other.messages());
    expect(ann.of<PublishedEvent>("published")).toEqual([{ type: "published", id: "t1", seq: 2 }]);
    ann.ws.close(1000);
    other.ws.close(1000);
  });

  it("answers refused socket publishes with error events and their ids, keeps the socket, and others see no gap", async () => {
    const room = "publish-socket";
    const publisher = await welcomed(room, "?name=pat");
    const other = await welcomed(room);
    const frames: [unknown, string | null][] = [
      [{ n: 1 }, null],
      [{ op: "refuse", code: "forbidden" }, "forbidden"],
      [{ n: 2 }, null],
      [{ op: "throw" }, "internal"],
      [{ n: 3 }, null],
      [{ op: "grow", bytes: 70_000 }, "too_large"],
      [{ n: 4 }, null],
      [{ op: "refuse" }, "bad_request"],
      [{ n: 5 }, null],
    ];
    frames.forEach(([data], i) => send(publisher, { type: "publish", data, id: `f${i}` }));
    await until(() => publisher.of("published").length + publisher.of("error").length === frames.length);
    // Each answered once, by its id. (Inside vitest-pool-workers the runtime may hand a socket's frames to
    // the room out of order; test/service/hooks-local.test.ts checks the order through real sockets.)
    const answers = new Map((publisher.events.filter((e) => e.type === "published" || e.type === "error") as (PublishedEvent | ServerError)[]).map((a) => [a.id, a]));
    expect([...answers.keys()].sort()).toEqual(frames.map((_, i) => `f${i}`).sort());
    frames.forEach(([, code], i) => {
      const answer = answers.get(`f${i}`)!;
      expect(answer.type === "error" ? answer.code : null, `f${i}`).toBe(code);
    });
    const seqs = [...answers.values()].flatMap((a) => (a.type === "published" ? [a.seq] : [])).sort((a, b) => a - b);
    expect(seqs).toEqual([1, 2, 3, 4, 5]);
    await until(() => other.messages().length === 5);
    expect(other.messages().map((m) => m.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(other.messages().map((m) => (m.data as { n: number }).n).sort()).toEqual([1, 2, 3, 4, 5]);
    expect(publisher.ws.readyState).toBe(WebSocket.OPEN);
    publisher.ws.close(1000);
    other.ws.close(1000);
  });

  it("answers a retried idempotency key with the first seq without running the hook again, though the hook transformed what it stored", async () => {
    const room = "publish-keys";
    const sam = await welcomed(room, "?name=sam");
    const other = await welcomed(room);
    const keyed = async (data: unknown, key: string) => {
      const res = await worker.fetch(`${BASE}/rooms/${room}/publish`, {
        method: "POST",
        body: JSON.stringify(data),
        headers: { "content-type": "application/json", "Idempotency-Key": key },
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    expect(await keyed({ op: "transform", text: "once" }, "h-1")).toMatchObject({ status: 200, body: { seq: 1 } });
    // The stored message is the hook's; the retry is compared with what was sent, and passes no hook.
    expect(await keyed({ op: "transform", text: "once" }, "h-1")).toMatchObject({ status: 200, body: { seq: 1, duplicate: true } });
    expect(await keyed({ op: "transform", text: "twice" }, "h-1")).toMatchObject({ status: 409, body: { error: "conflict" } });
    send(sam, { type: "publish", data: { op: "transform", text: "from sam" }, id: "s1", key: "s-1" });
    await until(() => sam.of("published").length === 1);
    send(sam, { type: "publish", data: { op: "transform", text: "from sam" }, id: "s2", key: "s-1" });
    // Another body under the key is a conflict before the hook sees it (the hook would have refused it).
    send(sam, { type: "publish", data: { op: "refuse" }, id: "s3", key: "s-1" });
    await until(() => sam.of("published").length === 2 && sam.of("error").length === 1);
    expect(sam.of<PublishedEvent>("published")).toEqual([
      { type: "published", id: "s1", seq: 2 },
      { type: "published", id: "s2", seq: 2, duplicate: true },
    ]);
    expect(sam.of<ServerError>("error")[0]).toMatchObject({ id: "s3", code: "conflict" });
    await until(() => other.messages().length === 2);
    expect(other.messages().map((m) => m.data)).toEqual([
      { op: "transform", text: "once", by: "http", name: null },
      { op: "transform", text: "from sam", by: "socket", name: "sam" },
    ]);
    expect((await stats(room)).seq).toBe(2);
    sam.ws.close(1000);
    other.ws.close(1000);
  });

  it("sees broadcasts too: a refusal is counted apart and not retried, a transform reaches the room", async () => {
    const [a, b] = await Promise.all([welcomed("bc-a"), welcomed("bc-b")]);
    const post = async (data: unknown, key: string): Promise<BroadcastResult> => {
      const res = await worker.fetch(`${BASE}/broadcast`, {
        method: "POST",
        body: JSON.stringify({ data, rooms: ["bc-a", "bc-b"] }),
        headers: { "content-type": "application/json", "Idempotency-Key": key },
      });
      expect(res.status).toBe(200);
      return (await res.json()) as BroadcastResult;
    };
    expect(await post({ op: "refuse" }, "refused-1")).toMatchObject({ rooms: 0, refused: 2, failedCount: 0 });
    expect(await post({ op: "transform" }, "transform-1")).toMatchObject({ rooms: 2, sockets: 2, refused: 0, failedCount: 0 });
    await until(() => a.messages().length === 1 && b.messages().length === 1);
    expect(a.messages()[0]).toMatchObject({ seq: 1, data: { op: "transform", by: "broadcast", name: null } });
    // A retry with the same key is a duplicate, whatever the hook would say now.
    expect(await post({ op: "transform" }, "transform-1")).toMatchObject({ rooms: 2, duplicates: 2, duplicate: true });
    a.ws.close(1000);
    b.ws.close(1000);
  });
});

describe("onClientFrame", () => {
  it("handles the application's frames, answers a hook failure with an internal error, and keeps the socket", async () => {
    const room = "frames";
    const s = await welcomed(room, "?name=cat");
    send(s, { type: "x-throw", id: "c1" });
    send(s, { type: "x-mutate", id: "c2" });
    send(s, { type: "x-impersonate", id: "c3" });
    send(s, { type: "x-set", id: "c4", data: { name: "cat", joinedAt: 1, note: "y".repeat(5000) } });
    await until(() => s.of("error").length === 4);
    send(s, { type: "x-set", id: "c5", data: { name: "cat2", joinedAt: 2 } });
    await until(() => s.of("x-set").length === 1);
    send(s, { type: "x-echo", id: "c6" });
    await until(() => s.of("x-echo").length === 1);
    expect(s.of<ServerError>("error").map((e) => [e.id, e.code]).sort()).toEqual([
      ["c1", "internal"],
      ["c2", "internal"],
      ["c3", "internal"],
      ["c4", "internal"],
    ]);
    // The hooks run concurrently, so their answers may come in any order: find c1's.
    expect(s.of<ServerError>("error").find((e) => e.id === "c1")?.message).toBe("the room could not handle x-throw");
    // Nothing but x- events can be sent by a hook: no forged message arrived.
    expect(s.messages()).toEqual([]);
    expect(s.of("x-set")).toEqual([{ type: "x-set", data: { name: "cat2", joinedAt: 2 } }]);
    expect(s.of("x-echo")[0]).toMatchObject({ frame: { type: "x-echo", id: "c6" }, data: { name: "cat2", joinedAt: 2 } });
    expect(s.ws.readyState).toBe(WebSocket.OPEN);
    expect((await stats(room)).refusals.hook_error).toBe(4);
    s.ws.close(1000);
  });

  it("lets a hook publish, list the room's connections and close a socket", async () => {
    const room = "frames-actions";
    const a = await welcomed(room, "?name=ann");
    const b = await welcomed(room, "?name=bob");
    send(a, { type: "x-who" });
    send(a, { type: "x-announce", text: "hi" });
    await until(() => a.of("x-who").length === 1 && a.of("x-announced").length === 1 && b.messages().length === 1);
    expect(a.of("x-who")[0]).toEqual({ type: "x-who", ids: ["ann", "bob"] });
    expect(a.of("x-announced")[0]).toEqual({ type: "x-announced", seq: 1 });
    expect(b.messages()[0]).toMatchObject({ seq: 1, data: { from: "ann", text: "hi" } });
    send(b, { type: "x-kick" });
    expect(await b.closed).toEqual({ code: 4003, reason: "kicked by the room" });
    // onClose saw the room's close.
    await until(() => a.messages().length === 2);
    expect(a.messages()[1]).toMatchObject({ seq: 2, data: { left: "bob", code: 4003, by: "room", open: false } });
    a.ws.close(1000);
  });

  it("costs a frame token like a publish", async () => {
    const s = await welcomed("frames-rate");
    // CLIENT_FRAME_BURST is 200 in this worker's wrangler.toml.
    for (let i = 0; i < 260; i++) send(s, { type: "x-echo" });
    expect((await s.closed).code).toBe(4009);
  });
});

describe("onClose", () => {
  it("runs once per socket with the data it was admitted with, and a failing one leaves the room serving", async () => {
    const room = "closes";
    const watcher = await welcomed(room);
    const ann = await welcomed(room, "?name=ann");
    ann.ws.close(1000, "bye");
    await until(() => watcher.messages().length === 1);
    expect(watcher.messages()[0]).toMatchObject({ seq: 1, data: { left: "ann", code: 1000, by: "client", open: false } });

    const failing = await welcomed(room, "?name=zed&failOnClose=1");
    failing.ws.close(1000);
    await eventually(async () => (await stats(room)).refusals.hook_error === 1);
    expect((await publish(room, { after: true })).body).toMatchObject({ seq: 2, recipients: 1 });
    await until(() => watcher.messages().length === 2);
    expect(watcher.messages()[1]).toMatchObject({ seq: 2, data: { after: true } });
    watcher.ws.close(1000);
  });
});

describe("a room with connection hooks and multiplexed connections", () => {
  it("refuses to be followed by a hub: a subscribe to it gets forbidden and the connection stays", async () => {
    const res = await worker.fetch(`${BASE}/ws`, { headers: { Upgrade: "websocket" } });
    expect(res.status).toBe(101);
    const ws = res.webSocket as WebSocket;
    const events: Record<string, unknown>[] = [];
    ws.addEventListener("message", (e) => {
      const parsed: unknown = JSON.parse(e.data as string);
      events.push(...((Array.isArray(parsed) ? parsed : [parsed]) as Record<string, unknown>[]));
    });
    ws.accept();
    ws.send(JSON.stringify({ type: "subscribe", room: "hooked-mux", id: "s1" }));
    await until(() => events.some((e) => e.type === "error"), { timeoutMs: 10_000, what: "the refusal" });
    expect(events.find((e) => e.type === "error")).toMatchObject({ room: "hooked-mux", code: "forbidden", id: "s1", message: expect.stringContaining("/rooms/{room}/ws") });
    // The connection is still open: a frame of it is still answered.
    ws.send(JSON.stringify({ type: "unsubscribe", room: "hooked-mux" }));
    await until(() => events.some((e) => e.code === "not_subscribed"), { timeoutMs: 10_000, what: "the answer to the unsubscribe" });
    // The room's own sockets are served as always.
    const own = await welcomed("hooked-mux");
    own.ws.close();
    ws.close();
  });
});
