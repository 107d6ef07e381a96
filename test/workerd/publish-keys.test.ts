import { env, exports } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { PublishedEvent, RoomStats, ServerError, ServerEvent, ServerMessage } from "../../protocol";
import { readLimits } from "../../common/settings";
import { MEMORY_ONLY, RoomCounters } from "../../durable-objects/engine/counters";
import { Delivery } from "../../durable-objects/engine/delivery";
import { Stream } from "../../durable-objects/engine/stream";
import { History } from "../../durable-objects/room/history";
import { IdempotencyKeys } from "../../durable-objects/room/idempotency-keys";
import { MetaStore } from "../../durable-objects/room/meta-store";
import { keyedPublish, PublishKeys } from "../../durable-objects/room/publish-keys";
import { Publishing } from "../../durable-objects/room/publishing";
import type { Env } from "../../worker/env";
import { sleep, until } from "../helpers/wait";

/**
 * Publishes that can be retried: an HTTP publish's Idempotency-Key and a
 * socket publish's `key`, kept in the message's history row (no row of
 * their own), recognised after the room's memory is gone, told apart from a
 * different body, and out of reach once their row is.
 */

const bindings = env as unknown as Env;
type Entry = { fetch(input: string, init?: RequestInit): Promise<Response> };
const worker = (exports as unknown as { default: Entry }).default;

async function publish(room: string, body: string, key?: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (key !== undefined) headers["idempotency-key"] = key;
  const res = await worker.fetch(`http://edge.test/rooms/${room}/publish`, { method: "POST", body, headers });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function stats(room: string): Promise<RoomStats> {
  return (await (await worker.fetch(`http://edge.test/rooms/${room}`)).json()) as RoomStats;
}

async function openSocket(room: string): Promise<{ ws: WebSocket; events: ServerEvent[]; closed: Promise<number> }> {
  const res = await worker.fetch(`http://edge.test/rooms/${room}/ws`, { headers: { Upgrade: "websocket" } });
  expect(res.status).toBe(101);
  const ws = res.webSocket as WebSocket;
  const events: ServerEvent[] = [];
  const closed = new Promise<number>((resolve) => ws.addEventListener("close", (e) => resolve(e.code)));
  ws.addEventListener("message", (e) => {
    const parsed: unknown = JSON.parse(e.data as string);
    events.push(...((Array.isArray(parsed) ? parsed : [parsed]) as ServerEvent[]));
  });
  ws.accept();
  return { ws, events, closed };
}

/** A room's publish path on its own storage, as a new instance of the room would build it. */
function publishingOn(state: DurableObjectState, bounds: { maxMessages: number; maxAgeMs: number }, reachMs: number) {
  const limits = readLimits({});
  const history = new History(state.storage, new MetaStore(state.storage.sql), bounds);
  const counters = new RoomCounters(MEMORY_ONLY);
  const keys = new PublishKeys(history, reachMs, (rows) => counters.rowsRead(rows));
  const delivery = new Delivery(counters, { windowBytes: limits.WINDOW_BYTES, graceMs: 1000, batch: { maxBytes: limits.BATCH_MAX_BYTES, maxEvents: limits.BATCH_MAX_EVENTS } }, { occupancyChanged() {}, left() {}, released() {}, name: () => "keys" });
  const publishing = new Publishing({ history, keys: new IdempotencyKeys(state.storage.sql, bounds.maxAgeMs), publishKeys: keys }, delivery, new Stream("keys", history), counters, limits, { flushed: () => 0, afterFlush() {} });
  return { history, counters, publishing };
}

describe("HTTP publishes with an Idempotency-Key", () => {
  it("answers a retry with the first seq and duplicate, publishes it once, and refuses the same key with another body with 409", async () => {
    const room = "keys-http";
    const first = await publish(room, '{"order":1}', "order-1");
    expect(first).toEqual({ status: 200, body: { room, seq: 1, recipients: 0 } });
    const retry = await publish(room, '{ "order" : 1 }', "order-1");
    expect(retry).toEqual({ status: 200, body: { room, seq: 1, recipients: 0, duplicate: true } });
    const other = await publish(room, '{"order":2}', "order-2");
    expect(other.body.seq).toBe(2);
    const conflict = await publish(room, '{"order":3}', "order-1");
    expect(conflict.status).toBe(409);
    expect(conflict.body).toMatchObject({ error: "conflict" });
    expect(String(conflict.body.message)).toMatch(/seq 1/);
    const after = await stats(room);
    expect(after).toMatchObject({ seq: 2, published: 2 });
    // The keys live in the messages' rows: two flushes, two rows, and no key table.
    expect(after.historyRowsWritten).toBe(2);
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName(room));
    const tables = await runInDurableObject(stub, (_i, state) => state.storage.sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").toArray().map((r) => r.name));
    expect(tables).not.toContain("idempotency");
  });

  it("refuses a malformed key with 400 before anything is published", async () => {
    const room = "keys-http-bad";
    for (const key of ["has space", "x".repeat(129), "é"]) {
      const res = await publish(room, "1", key);
      expect(res.status, key).toBe(400);
      expect(res.body).toMatchObject({ error: "bad_request" });
    }
    expect((await worker.fetch(`http://edge.test/rooms/${room}`)).status).toBe(404);
  });

  it("keeps HTTP publishers' keys apart from sockets'", async () => {
    const room = "keys-spaces";
    const socket = await openSocket(room);
    await until(() => socket.events.some((e) => e.type === "welcome"));
    socket.ws.send(JSON.stringify({ type: "publish", data: 1, key: "shared", id: "a" }));
    await until(() => socket.events.some((e) => e.type === "published"));
    const http = await publish(room, "1", "shared");
    expect(http.body).toMatchObject({ seq: 2 });
    expect(http.body.duplicate).toBeUndefined();
    socket.ws.close(1000);
  });
});

describe("socket publishes with a key", () => {
  it("answers a retry with the first seq and duplicate: true, sends nothing again, and a different body an error conflict", async () => {
    const room = "keys-socket";
    const publisher = await openSocket(room);
    const reader = await openSocket(room);
    await until(() => publisher.events.length > 0 && reader.events.length > 0);
    publisher.ws.send(JSON.stringify({ type: "publish", data: { n: 1 }, key: "k-1", id: "first" }));
    await until(() => publisher.events.some((e) => e.type === "published"));
    publisher.ws.send(JSON.stringify({ type: "publish", data: { n: 1 }, key: "k-1", id: "again" }));
    publisher.ws.send(JSON.stringify({ type: "publish", data: { n: 9 }, key: "k-1", id: "other" }));
    await until(() => publisher.events.filter((e) => e.type === "published" || e.type === "error").length === 3);
    const answers = publisher.events.filter((e): e is PublishedEvent | ServerError => e.type === "published" || e.type === "error");
    expect(answers).toContainEqual({ type: "published", id: "first", seq: 1 });
    expect(answers).toContainEqual({ type: "published", id: "again", seq: 1, duplicate: true });
    expect(answers.find((a) => a.id === "other")).toMatchObject({ type: "error", code: "conflict" });
    await sleep(50);
    const delivered = reader.events.filter((e): e is ServerMessage => e.type === "message");
    expect(delivered.map((m) => [m.seq, m.data])).toEqual([[1, { n: 1 }]]);
    publisher.ws.close(1000);
    reader.ws.close(1000);
  });

  it("closes the socket with 4000 for a key that is not 1-128 visible ASCII characters", async () => {
    for (const key of ["", "with space", 42, "k".repeat(129)]) {
      const socket = await openSocket("keys-socket-bad");
      await until(() => socket.events.length > 0);
      socket.ws.send(JSON.stringify({ type: "publish", data: 1, key }));
      expect(await socket.closed, JSON.stringify(key)).toBe(4000);
    }
    expect((await stats("keys-socket-bad")).seq).toBe(0);
  });
});

describe("PublishKeys", () => {
  it("finds keys after the room's memory is gone, from the rows within reach, and writes no row for them", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("keys-rebuild"));
    await runInDurableObject(stub, async (_i, state) => {
      const bounds = { maxMessages: 1000, maxAgeMs: 600_000 };
      const before = publishingOn(state, bounds, 120_000);
      // 30 flushes, every other keyed; then 20 unkeyed ones.
      for (let i = 1; i <= 30; i++) await before.publishing.publish(String(i), {}, i % 2 === 0 ? keyedPublish("h", `k${i}`, `hash${i}`) : undefined);
      for (let i = 31; i <= 50; i++) await before.publishing.publish(String(i));
      expect(before.counters.values.historyRowsWritten).toBe(50);
      expect(state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM log").one().n).toBe(50);

      const after = publishingOn(state, bounds, 120_000);
      expect(after.publishing.prior(keyedPublish("h", "k12", "hash12"))).toEqual({ seq: 12, recipients: 0, duplicate: true });
      expect(after.publishing.prior(keyedPublish("h", "k12", "another"))).toMatchObject({ refused: { error: "conflict" } });
      expect(after.publishing.prior(keyedPublish("s", "k12", "hash12"))).toBeNull();
      expect(after.publishing.prior(keyedPublish("h", "k13", "hash13"))).toBeNull();
      // Rebuilding read each of the 50 rows once, and a binary search for the first (log2 1000 ≈ 10).
      const rebuilt = after.counters.values.historyRowsRead;
      expect(rebuilt).toBeGreaterThanOrEqual(50);
      expect(rebuilt).toBeLessThanOrEqual(50 + 12);
      // A retry after the rebuild publishes nothing.
      const retried = await after.publishing.publish("12", {}, keyedPublish("h", "k12", "hash12"));
      expect(retried).toEqual({ seq: 12, recipients: 0, duplicate: true });
      expect(after.history.seq).toBe(50);
    });
  });

  it("forgets a key once its row leaves the ring, or is older than its reach or the history's age bound", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("keys-reach"));
    await runInDurableObject(stub, async (_i, state) => {
      const ring = publishingOn(state, { maxMessages: 5, maxAgeMs: 600_000 }, 120_000);
      await ring.publishing.publish("1", {}, keyedPublish("h", "old", "h1"));
      for (let i = 0; i < 4; i++) await ring.publishing.publish("0");
      expect(ring.publishing.prior(keyedPublish("h", "old", "h1"))).toMatchObject({ seq: 1 });
      // The sixth row overwrites the first: its key goes with it (in memory, and for a new instance).
      await ring.publishing.publish("0");
      expect(ring.publishing.prior(keyedPublish("h", "old", "h1"))).toBeNull();
      expect(publishingOn(state, { maxMessages: 5, maxAgeMs: 600_000 }, 120_000).publishing.prior(keyedPublish("h", "old", "h1"))).toBeNull();
      // A reach shorter than the row's age, or a history age bound shorter than it: not recognised.
      await ring.publishing.publish("7", {}, keyedPublish("h", "new", "h7"));
      await sleep(30);
      expect(publishingOn(state, { maxMessages: 5, maxAgeMs: 600_000 }, 10).publishing.prior(keyedPublish("h", "new", "h7"))).toBeNull();
      expect(publishingOn(state, { maxMessages: 5, maxAgeMs: 10 }, 120_000).publishing.prior(keyedPublish("h", "new", "h7"))).toBeNull();
      expect(publishingOn(state, { maxMessages: 5, maxAgeMs: 600_000 }, 120_000).publishing.prior(keyedPublish("h", "new", "h7"))).toMatchObject({ seq: 7 });
      // PUBLISH_DEDUPE_SECONDS=0: keys are neither kept nor looked up.
      const off = publishingOn(state, { maxMessages: 5, maxAgeMs: 600_000 }, 0);
      const a = await off.publishing.publish("8", {}, keyedPublish("h", "off", "h8"));
      const b = await off.publishing.publish("8", {}, keyedPublish("h", "off", "h8"));
      expect([a, b].map((r) => ("seq" in r ? r.seq : null))).toEqual([8, 9]);
    });
  });

  it("recognises a retry that arrives while the first is still waiting for its flush", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("keys-pending"));
    await runInDurableObject(stub, async (_i, state) => {
      const { publishing, counters } = publishingOn(state, { maxMessages: 100, maxAgeMs: 600_000 }, 120_000);
      const answers = await Promise.all([
        publishing.publish("1", {}, keyedPublish("s", "p", "x")),
        publishing.publish("1", {}, keyedPublish("s", "p", "x")),
        publishing.publish("2", {}, keyedPublish("s", "p", "y")),
      ]);
      expect(answers).toEqual([
        { seq: 1, recipients: 0, duplicate: false },
        { seq: 1, recipients: 0, duplicate: true },
        { refused: { error: "conflict", message: "this idempotency key was published with another body (seq 1)" } },
      ]);
      expect(counters.values).toMatchObject({ published: 1, historyRowsWritten: 1 });
    });
  });
});
