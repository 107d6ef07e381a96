import { env, exports } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { MessageEvent, RoomStats, ServerEvent } from "../../client-sdk/src/protocol";
import { History } from "../../durable-objects/room/history";
import { SocketState } from "../../durable-objects/room/socket-state";
import type { Env } from "../../worker/env";

const bindings = env as unknown as Env;
type Entry = { fetch(input: string, init?: RequestInit): Promise<Response> };
const worker = (exports as unknown as { default: Entry }).default;

async function openSocket(room: string, query = ""): Promise<{ ws: WebSocket; events: ServerEvent[] }> {
  const res = await worker.fetch(`http://edge.test/rooms/${room}/ws${query}`, { headers: { Upgrade: "websocket" } });
  expect(res.status).toBe(101);
  const ws = res.webSocket as WebSocket;
  const events: ServerEvent[] = [];
  ws.addEventListener("message", (e) => {
    const parsed: unknown = JSON.parse(e.data as string);
    events.push(...((Array.isArray(parsed) ? parsed : [parsed]) as ServerEvent[]));
  });
  ws.accept();
  return { ws, events };
}

async function until(check: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("routes", () => {
  it("validates room names, upgrades and bodies with JSON errors", async () => {
    const bad = await worker.fetch("http://edge.test/rooms/no%20spaces/publish", { method: "POST", body: "x" });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: "bad_room" });

    const noUpgrade = await worker.fetch("http://edge.test/rooms/ok/ws");
    expect(noUpgrade.status).toBe(426);
    expect(noUpgrade.headers.get("upgrade")).toBe("websocket");

    const tooBig = await worker.fetch("http://edge.test/rooms/ok/publish", { method: "POST", body: "x".repeat(65_537) });
    expect(tooBig.status).toBe(413);
    expect(await tooBig.json()).toMatchObject({ error: "too_large" });

    const notJson = await worker.fetch("http://edge.test/rooms/ok/publish", {
      method: "POST",
      body: "{oops",
      headers: { "content-type": "application/json" },
    });
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toMatchObject({ error: "bad_json" });
  });

  it("publishes into a room and reports its stats", async () => {
    const res = await worker.fetch("http://edge.test/rooms/route-stats/publish", {
      method: "POST",
      body: JSON.stringify({ hello: "world" }),
      headers: { "content-type": "application/json" },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ room: "route-stats", seq: 1, recipients: 0 });
    const stats = (await (await worker.fetch("http://edge.test/rooms/route-stats")).json()) as RoomStats;
    expect(stats).toMatchObject({ room: "route-stats", seq: 1, published: 1, connections: 0 });
  });
});

describe("Room object", () => {
  it("welcomes a socket, fans out in order and resumes with since", async () => {
    const a = await openSocket("room-obj");
    await until(() => a.events.length === 1);
    expect(a.events[0]).toMatchObject({ type: "welcome", room: "room-obj", seq: 0 });

    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("room-obj"));
    for (let i = 0; i < 5; i++) await stub.publish("room-obj", JSON.stringify({ i }));
    await until(() => a.events.filter((e) => e.type === "message").length === 5);
    expect((a.events.filter((e) => e.type === "message") as MessageEvent[]).map((m) => m.seq)).toEqual([1, 2, 3, 4, 5]);

    const b = await openSocket("room-obj", "?since=2");
    await until(() => b.events.some((e) => e.type === "replayed"));
    expect((b.events.filter((e) => e.type === "message") as MessageEvent[]).map((m) => m.seq)).toEqual([3, 4, 5]);
    a.ws.close(1000);
    b.ws.close(1000);
  });

  it("writes nothing for a room that is only looked at, and keeps the epoch it hands out", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("looked-at"));
    const stats = await stub.stats();
    const stored = () =>
      runInDurableObject(stub, (_i, state) => state.storage.sql.exec("SELECT count(*) AS n FROM meta WHERE key = 'epoch'").one().n);
    expect(await stored()).toBe(0);
    const s = await openSocket("looked-at");
    await until(() => s.events.length === 1);
    expect(s.events[0]).toMatchObject({ type: "welcome", epoch: stats.epoch });
    expect(await stored()).toBe(1);
    s.ws.close(1000);
  });

  it("dedupes publishes by idempotency key", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("idem"));
    const first = await stub.publish("idem", '"x"', { idempotencyKey: "k1" });
    const again = await stub.publish("idem", '"x"', { idempotencyKey: "k1" });
    expect(first).toMatchObject({ seq: 1, duplicate: false });
    expect(again).toMatchObject({ seq: 1, duplicate: true });
    expect((await stub.stats()).seq).toBe(1);
  });

  it("keeps history bounded by count and age, with one row per slot, and keeps seq across reopen", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("history-bounds"));
    await runInDurableObject(stub, (_instance, state) => {
      const history = new History(state.storage.sql, { maxMessages: 10, maxAgeMs: 60_000 });
      const now = Date.now();
      for (let i = 0; i < 200; i++) history.append(JSON.stringify(i), now);
      expect(history.seq).toBe(200);
      expect(history.oldest(now)).toBe(191);
      expect(history.range(1, 200, 1000, now).map((m) => m.seq)).toEqual([191, 192, 193, 194, 195, 196, 197, 198, 199, 200]);
      // A range that wraps around the ring comes back in seq order.
      expect(history.range(194, 197, 1000, now).map((m) => m.seq)).toEqual([194, 195, 196, 197]);
      expect(history.range(199, 500, 1, now).map((m) => m.seq)).toEqual([199]);
      // The ring holds exactly `maxMessages` rows: a publish is one row write, never a delete.
      const rows = state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM history").one().n;
      expect(rows).toBe(10);
      // Age: past the cutoff, older messages are no longer served.
      const later = now + 120_000;
      history.append('"late"', later);
      expect(history.oldest(later)).toBe(201);
      expect(history.range(1, 201, 1000, later).map((m) => m.seq)).toEqual([201]);
      // A new History over the same storage continues the seq and the epoch.
      const reopened = new History(state.storage.sql, { maxMessages: 10, maxAgeMs: 60_000 });
      expect(reopened.seq).toBe(201);
      expect(reopened.epoch).toBe(history.epoch);
    });
  });
});

describe("SocketState window", () => {
  const policy = { windowBytes: 1000, dropsBeforeClose: 3, graceMs: 10_000 };
  const attachment = { id: "s", connectedAt: 0, canPublish: true, expiresAt: null };

  it("sends within the window, drops over it, and kicks after the streak", () => {
    const s = new SocketState(attachment, 0);
    expect(s.admit(600, 1, 1, 0, policy)).toBe("send");
    s.sent(600, 1);
    expect(s.admit(300, 2, 1, 0, policy)).toBe("send");
    s.sent(300, 2);
    expect(s.inFlight).toBe(900);
    expect(s.admit(200, 3, 1, 0, policy)).toBe("drop");
    expect(s.admit(200, 5, 2, 0, policy)).toBe("drop");
    expect(s.admit(200, 6, 1, 0, policy)).toBe("kick");
    expect(s.dropped).toBe(4);
    expect(s.takeDropped()).toEqual({ from: 3, to: 6 });
    expect(s.takeDropped()).toBeNull();
  });

  it("releases acknowledged bytes, and lets a lone oversized frame through to an idle socket", () => {
    const s = new SocketState(attachment, 0);
    s.sent(400, 1);
    s.sent(400, 2);
    s.ack(1);
    expect(s.inFlight).toBe(400);
    s.ack(2);
    expect(s.inFlight).toBe(0);
    expect(s.admit(5000, 3, 1, 0, policy)).toBe("send");
  });

  it("kicks on time over the window even before the drop streak", () => {
    const s = new SocketState(attachment, 0);
    s.sent(1000, 1);
    expect(s.admit(10, 2, 1, 0, { ...policy, dropsBeforeClose: 100 })).toBe("drop");
    expect(s.admit(10, 3, 1, 10_000, { ...policy, dropsBeforeClose: 100 })).toBe("kick");
  });

  it("rate-limits client frames with a token bucket", () => {
    const s = new SocketState(attachment, 0);
    const rate = { perSecond: 10, burst: 3 };
    expect([0, 0, 0, 0].map(() => s.takeFrameToken(0, rate))).toEqual([true, true, true, false]);
    expect(s.takeFrameToken(100, rate)).toBe(true);
    expect(s.takeFrameToken(100, rate)).toBe(false);
  });
});
