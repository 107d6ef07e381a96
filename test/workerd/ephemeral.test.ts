/**
 * Ephemeral rooms (a HISTORY_RULES rule with "store": false; this project's
 * config gives rooms named `ephemeral:...` one, with maxMessages 50): what
 * their storage holds after messages, counted from SQLite itself.
 */
import { env, exports } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { RoomStats, ServerEvent, ServerMessage } from "../../protocol";
import type { Env } from "../../worker/env";
import { until } from "../helpers/wait";
import { openRoomSocket } from "../helpers/workerd/sockets";

const bindings = env as unknown as Env;
type Entry = { fetch(input: string, init?: RequestInit): Promise<Response> };
const worker = (exports as unknown as { default: Entry }).default;

const openSocket = openRoomSocket;

async function publish(room: string, data: unknown, key?: string): Promise<{ seq: number; duplicate?: boolean }> {
  const res = await worker.fetch(`http://edge.test/rooms/${room}/publish`, {
    method: "POST",
    body: JSON.stringify(data),
    headers: { "content-type": "application/json", ...(key ? { "Idempotency-Key": key } : {}) },
  });
  expect(res.status).toBe(200);
  return (await res.json()) as { seq: number; duplicate?: boolean };
}

/** Rows the room's SQLite changed since its database was opened (SQLite's own count), and its tables. */
function storage(room: string): Promise<{ changes: number; tables: string[] }> {
  const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName(room));
  return runInDurableObject(stub, (_instance, state) => ({
    changes: Number(state.storage.sql.exec("SELECT total_changes() AS n").one().n),
    tables: state.storage.sql
      .exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite%'")
      .toArray()
      .map((r) => r.name)
      .sort(),
  }));
}

const messagesOf = (events: ServerEvent[]) => events.filter((e): e is ServerMessage => e.type === "message");

describe("ephemeral rooms", () => {
  it("write no row per message, counted by SQLite, where a room that stores writes one per flush", async () => {
    for (const room of ["ephemeral:rows", "durable-rows"]) await publish(room, "first");
    const before = { ephemeral: await storage("ephemeral:rows"), durable: await storage("durable-rows") };
    for (let i = 0; i < 100; i++) {
      await publish("ephemeral:rows", { i });
      await publish("durable-rows", { i });
    }
    const after = { ephemeral: await storage("ephemeral:rows"), durable: await storage("durable-rows") };
    // The measure sees writes: the room that stores changed a row per publish (one per flush).
    expect(after.durable.changes - before.durable.changes).toBeGreaterThanOrEqual(100);
    expect(after.durable.tables).toContain("log");
    // The ephemeral room changed none, and has no log at all: only its name, written once.
    expect(after.ephemeral.changes - before.ephemeral.changes).toBe(0);
    expect(after.ephemeral.tables).toEqual(["meta"]);
    const stats = (await (await worker.fetch("http://edge.test/rooms/ephemeral:rows")).json()) as RoomStats;
    expect(stats).toMatchObject({ seq: 101, published: 101, historyRowsWritten: 0, retention: { store: false, maxMessages: 50, rule: "ephemeral:" } });
  }, 30_000);

  it("resumes from its ring in memory while it lives, and tells what its ring no longer holds as lost", async () => {
    const room = "ephemeral:resume";
    const live = await openSocket(room);
    await until(() => live.events.length >= 2);
    const epoch = (live.events[0] as { epoch: string }).epoch;
    for (let i = 1; i <= 80; i++) await publish(room, { i });
    await until(() => messagesOf(live.events).length >= 80);
    expect(messagesOf(live.events).map((m) => m.seq)).toEqual(Array.from({ length: 80 }, (_, i) => i + 1));

    // Within the ring (the newest 50): every message once, in order, then live.
    const near = await openSocket(room, `?since=60&epoch=${epoch}`);
    await until(() => messagesOf(near.events).length >= 20);
    expect(messagesOf(near.events).map((m) => m.seq)).toEqual(Array.from({ length: 20 }, (_, i) => 61 + i));
    expect(near.events.some((e) => e.type === "lost")).toBe(false);

    // Older than the ring: told lost (history), then what the ring holds.
    const far = await openSocket(room, `?since=10&epoch=${epoch}`);
    await until(() => messagesOf(far.events).length >= 50);
    expect(far.events.find((e) => e.type === "lost")).toMatchObject({ reason: "history", from: 11, to: 30 });
    expect(messagesOf(far.events).map((m) => m.seq)).toEqual(Array.from({ length: 50 }, (_, i) => 31 + i));

    // Another epoch: told lost (epoch), as any room tells it.
    const foreign = await openSocket(room, "?since=5&epoch=not-this-one");
    await until(() => foreign.events.some((e) => e.type === "lost"));
    expect(foreign.events.find((e) => e.type === "lost")).toMatchObject({ reason: "epoch", from: 1, to: 80 });
    for (const s of [live, near, far, foreign]) s.ws.close(1000);
  }, 30_000);

  it("recognises a retried idempotency key while it lives, with no row written", async () => {
    const room = "ephemeral:keys";
    const first = await publish(room, { order: 1 }, "key-1");
    await publish(room, { other: true });
    const before = await storage(room);
    const retry = await publish(room, { order: 1 }, "key-1");
    expect(retry).toMatchObject({ seq: first.seq, duplicate: true });
    const conflict = await worker.fetch(`http://edge.test/rooms/${room}/publish`, {
      method: "POST",
      body: JSON.stringify({ order: 2 }),
      headers: { "content-type": "application/json", "Idempotency-Key": "key-1" },
    });
    expect(conflict.status).toBe(409);
    expect((await storage(room)).changes).toBe(before.changes);
  });

  it("serves history pages from its ring while it lives", async () => {
    const room = "ephemeral:pages";
    for (let i = 1; i <= 60; i++) await publish(room, { i });
    const page = (await (await worker.fetch(`http://edge.test/rooms/${room}/messages?after=0&limit=5`)).json()) as {
      messages: { seq: number; data: { i: number } }[];
      lost: { from: number; to: number } | null;
      rowsRead: number;
    };
    // The ring holds the newest 50: the range from 1 starts with what it lost.
    expect(page.lost).toEqual({ from: 1, to: 10 });
    expect(page.messages.map((m) => m.seq)).toEqual([11, 12, 13, 14, 15]);
    expect(page.messages[0]?.data).toEqual({ i: 11 });
    expect(page.rowsRead).toBe(0);
  }, 30_000);
});
