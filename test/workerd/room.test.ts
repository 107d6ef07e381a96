import { env, exports } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { ServerMessage, RoomStats, ServerEvent } from "../../protocol";
import { readLimits } from "../../common/settings";
import { ACTIVITY_PERSIST_MS } from "../../durable-objects/engine/attachment";
import { MEMORY_ONLY, RoomCounters } from "../../durable-objects/engine/counters";
import { Delivery } from "../../durable-objects/engine/delivery";
import { messageEvent, type Message } from "../../durable-objects/engine/message";
import { SendWindow } from "../../durable-objects/engine/send-window";
import { SocketState } from "../../durable-objects/engine/socket-state";
import { Stream } from "../../durable-objects/engine/stream";
import { History, type HistoryRead } from "../../durable-objects/room/storage/history";
import { IdempotencyKeys } from "../../durable-objects/room/storage/idempotency-keys";
import { MetaStore } from "../../durable-objects/room/storage/meta-store";
import { PublishKeys } from "../../durable-objects/room/storage/publish-keys";
import { Publishing } from "../../durable-objects/room/publishing";
import type { Env } from "../../worker/env";
import { until } from "../helpers/wait";
import { openRoomSocket } from "../helpers/workerd/sockets";

const bindings = env as unknown as Env;
type Entry = { fetch(input: string, init?: RequestInit): Promise<Response> };
const worker = (exports as unknown as { default: Entry }).default;

const openSocket = openRoomSocket;

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
    await until(() => a.events.length >= 2);
    expect(a.events[0]).toMatchObject({ type: "welcome", room: "room-obj", seq: 0 });
    // Then the room's presence: nobody (this socket has no identity).
    expect(a.events[1]).toMatchObject({ type: "presence", action: "sync", count: 0, members: [] });

    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("room-obj"));
    for (let i = 0; i < 5; i++) await stub.publish(JSON.stringify({ i }));
    await until(() => a.events.filter((e) => e.type === "message").length === 5);
    const live = a.events.filter((e) => e.type === "message") as ServerMessage[];
    expect(live.map((m) => m.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(live.every((m) => Number.isInteger(m.tag) && m.tag >= 0 && m.tag <= 0xffffffff)).toBe(true);

    const b = await openSocket("room-obj", "?since=2");
    await until(() => b.events.filter((e) => e.type === "message").length === 3);
    const resumed = b.events.filter((e) => e.type === "message") as ServerMessage[];
    expect(resumed.map((m) => m.seq)).toEqual([3, 4, 5]);
    // Catch-up sends what was stored: the same events, tags included.
    expect(resumed).toEqual(live.slice(2));
    a.ws.close(1000);
    b.ws.close(1000);
  });

  it("creates no storage for a room that is only looked at, and keeps the epoch it hands out", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("looked-at"));
    const stats = await stub.stats();
    expect(stats).toMatchObject({ seq: 0, connections: 0, historyOldest: null });
    const tables = () =>
      runInDurableObject(stub, (_i, state) => state.storage.sql.exec("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").one().n);
    expect(await tables()).toBe(0);
    const s = await openSocket("looked-at");
    await until(() => s.events.length >= 2);
    expect(s.events[0]).toMatchObject({ type: "welcome", epoch: stats.epoch });
    const stored = await runInDurableObject(stub, (_i, state) =>
      state.storage.sql.exec("SELECT value FROM meta WHERE key = 'epoch'").one().value,
    );
    expect(stored).toBe(stats.epoch);
    s.ws.close(1000);
  });

  it("stores the messages of one flush as one row, whatever their frames", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("rows-per-flush"));
    await runInDurableObject(stub, async (_instance, state) => {
      const limits = { ...readLimits({}), FLUSH_DELAY_MS: 10 };
      const history = new History(state.storage, new MetaStore(state.storage.sql), { maxMessages: 1000, maxAgeMs: 60_000 });
      const keys = new IdempotencyKeys(state.storage.sql, 60_000);
      const counters = new RoomCounters(MEMORY_ONLY);
      const delivery = new Delivery(counters, { windowBytes: limits.WINDOW_BYTES, graceMs: 1000, batch: { maxBytes: limits.BATCH_MAX_BYTES, maxEvents: limits.BATCH_MAX_EVENTS } }, { occupancyChanged() {}, left() {}, released() {}, name: () => "rows-per-flush" });
      const publishing = new Publishing({ history, keys, publishKeys: new PublishKeys(history, 120_000, () => {}) }, delivery, new Stream("rows-per-flush", history), counters, limits, { flushed: () => 0, afterFlush() {} });
      // Eight small messages published together share one flush: one row, 0.125 rows per message.
      await Promise.all(Array.from({ length: 8 }, (_, i) => publishing.publish(String(i))));
      expect(counters.values).toMatchObject({ published: 8, historyRowsWritten: 1 });
      // Eight of 40 KB: frames hold one each (64 KiB), rows up to 256 KiB: two rows.
      const big = JSON.stringify("z".repeat(40_000));
      const answers = await Promise.all(Array.from({ length: 8 }, () => publishing.publish(big)));
      expect(answers.map((a) => a.seq)).toEqual([9, 10, 11, 12, 13, 14, 15, 16]);
      expect(counters.values).toMatchObject({ published: 16, historyRowsWritten: 3 });
      expect(state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM log").one().n).toBe(3);
    });
  });

  it("closes a socket that sends an application frame with 4000 when the room has no hook for it", async () => {
    const s = await openSocket("no-hooks");
    await until(() => s.events.length >= 2);
    const closed = new Promise<{ code: number; reason: string }>((resolve) => s.ws.addEventListener("close", (e) => resolve({ code: e.code, reason: e.reason })));
    s.ws.send(JSON.stringify({ type: "x-typing" }));
    expect(await closed).toEqual({ code: 4000, reason: 'unknown frame type "x-typing"' });
  });

  it("dedupes publishes by idempotency key, also while the first is still pending", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("idem"));
    const racing = await Promise.all([
      stub.publish('"x"', { idempotencyKey: "k1" }),
      stub.publish('"x"', { idempotencyKey: "k1" }),
    ]);
    const again = await stub.publish('"x"', { idempotencyKey: "k1" });
    if ("refused" in again || racing.some((r) => "refused" in r)) throw new Error("the plain Room refuses nothing");
    // Whichever arrived first published; the other was recognised while it was still pending.
    expect(racing.map((r) => ("seq" in r ? r.seq : null))).toEqual([1, 1]);
    expect(racing.map((r) => ("duplicate" in r ? r.duplicate : null)).sort()).toEqual([false, true]);
    expect(again).toMatchObject({ seq: 1, duplicate: true });
    expect((await stub.stats()).seq).toBe(1);
  });
});

/** One flush of `count` messages from `first` on, as the room stores it; each message's tag is its seq. */
function flush(first: number, count: number, ts: number): Message[] {
  return Array.from({ length: count }, (_, i) => messageEvent(first + i, JSON.stringify({ n: first + i }), ts, first + i));
}

const WIDE = { maxBytes: 1 << 20, maxEvents: 1000 };

function seqsOf(read: HistoryRead): number[] {
  const seqs: number[] = [];
  for (const run of read.runs) for (let s = run.firstSeq; s <= run.lastSeq; s++) seqs.push(s);
  return seqs;
}

/** What the runs say on the wire, as [seq, tag] pairs. */
function eventsOf(read: HistoryRead): [number, number][] {
  return read.runs.flatMap((run) => (JSON.parse(`[${run.text}]`) as ServerMessage[]).map((e) => [e.seq, e.tag] as [number, number]));
}

describe("History", () => {
  it("stores one row per flush, reads whole rows from any seq, and keeps seq and epoch across reopen", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("history-rows"));
    await runInDurableObject(stub, (_instance, state) => {
      const history = new History(state.storage, new MetaStore(state.storage.sql), { maxMessages: 10, maxAgeMs: 60_000 });
      const now = Date.now();
      // Flushes of 1, 3, 1 and 2 messages: seqs 1 | 2-4 | 5 | 6-7, one row each.
      for (const [first, count] of [[1, 1], [2, 3], [5, 1], [6, 2]] as const) history.append(flush(first, count, now), now);
      expect(history.seq).toBe(7);
      expect(state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM log").one().n).toBe(4);
      const all = history.read(1, Number.POSITIVE_INFINITY, WIDE);
      expect(seqsOf(all)).toEqual([1, 2, 3, 4, 5, 6, 7]);
      expect(all.rowsRead).toBe(4);
      expect(all.lost).toBeNull();
      // A read that starts inside a row gets the rest of that row, tags intact.
      const mid = history.read(3, Number.POSITIVE_INFINITY, WIDE);
      expect(eventsOf(mid)).toEqual([[3, 3], [4, 4], [5, 5], [6, 6], [7, 7]]);
      expect(mid.runs[0]?.lastTag).toBe(4);
      // A budget stops after the run that reaches it; the hint continues exactly there.
      const first = history.read(1, 1, WIDE);
      expect(seqsOf(first)).toEqual([1]);
      const next = history.read(first.nextSeq, 1, WIDE, first.nextRow);
      expect(seqsOf(next)).toEqual([2, 3, 4]);
      expect(next.rowsRead).toBe(1);
      // Reopening finds the newest row without scanning, and continues seq and epoch.
      const reopened = new History(state.storage, new MetaStore(state.storage.sql), { maxMessages: 10, maxAgeMs: 60_000 });
      expect(reopened.seq).toBe(7);
      expect(reopened.epoch).toBe(history.epoch);
      expect(seqsOf(reopened.read(3, Number.POSITIVE_INFINITY, WIDE))).toEqual([3, 4, 5, 6, 7]);
    });
  });

  it("cuts a row larger than a frame into frame-sized pieces, and resumes inside it", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("history-pieces"));
    await runInDurableObject(stub, (_instance, state) => {
      const history = new History(state.storage, new MetaStore(state.storage.sql), { maxMessages: 100, maxAgeMs: 60_000 });
      const now = Date.now();
      history.append(flush(1, 10, now), now);
      const narrow = { maxBytes: 1 << 20, maxEvents: 3 };
      const all = history.read(1, Number.POSITIVE_INFINITY, narrow);
      expect(all.runs.map((r) => [r.firstSeq, r.lastSeq, r.lastTag])).toEqual([[1, 3, 3], [4, 6, 6], [7, 9, 9], [10, 10, 10]]);
      expect(eventsOf(all).map(([seq]) => seq)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
      for (const run of all.runs) expect(run.bytes).toBe(new TextEncoder().encode(run.text).length);
      // A small budget stops inside the row; the next read continues from the same row.
      const part = history.read(1, 1, narrow);
      expect(seqsOf(part)).toEqual([1, 2, 3]);
      expect(part.nextSeq).toBe(4);
      const rest = history.read(part.nextSeq, Number.POSITIVE_INFINITY, narrow, part.nextRow);
      expect(seqsOf(rest)).toEqual([4, 5, 6, 7, 8, 9, 10]);
      expect(rest.rowsRead).toBe(1);
    });
  });

  it("serves the last HISTORY_MAX_MESSAGES messages, reports what is gone as lost, and finds the newest row after wrapping", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("history-ring"));
    await runInDurableObject(stub, (_instance, state) => {
      const history = new History(state.storage, new MetaStore(state.storage.sql), { maxMessages: 10, maxAgeMs: 60_000 });
      const now = Date.now();
      for (let seq = 1; seq <= 203; seq++) history.append(flush(seq, 1, now), now);
      // The ring holds exactly ten rows: a publish is one row write, never a delete.
      expect(state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM log").one().n).toBe(10);
      expect(history.oldest(now)).toBe(194);
      const read = history.read(150, Number.POSITIVE_INFINITY, WIDE);
      expect(read.lost).toEqual({ from: 150, to: 193 });
      expect(seqsOf(read)).toEqual([194, 195, 196, 197, 198, 199, 200, 201, 202, 203]);
      const reopened = new History(state.storage, new MetaStore(state.storage.sql), { maxMessages: 10, maxAgeMs: 60_000 });
      expect(reopened.seq).toBe(203);
      expect(seqsOf(reopened.read(199, Number.POSITIVE_INFINITY, WIDE))).toEqual([199, 200, 201, 202, 203]);
      // Age: past the cutoff older rows are no longer served.
      const later = now + 120_000;
      reopened.append(flush(204, 2, later), later);
      expect(reopened.oldest(later)).toBe(204);
      const aged = reopened.read(200, Number.POSITIVE_INFINITY, WIDE, 0, later);
      expect(aged.lost).toEqual({ from: 200, to: 203 });
      expect(seqsOf(aged)).toEqual([204, 205]);
    });
  });

  it("changes nothing when a write fails", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("history-failure"));
    await runInDurableObject(stub, (_instance, state) => {
      const history = new History(state.storage, new MetaStore(state.storage.sql), { maxMessages: 10, maxAgeMs: 60_000 });
      const now = Date.now();
      const keys = new IdempotencyKeys(state.storage.sql, 60_000);
      history.append(flush(1, 2, now), now);
      // A message whose text is not a string makes the insert throw inside the transaction.
      const bad = { ...flush(3, 1, now)[0]!, event: undefined as unknown as string };
      expect(() => history.append([bad], now, () => keys.remember("k", 3, now))).toThrow();
      expect(history.seq).toBe(2);
      expect(keys.seqOf("k")).toBeNull();
      expect(state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM log").one().n).toBe(1);
      expect(seqsOf(history.read(1, Number.POSITIVE_INFINITY, WIDE))).toEqual([1, 2]);
    });
  });
});

describe("SendWindow", () => {
  const frame = (w: SendWindow, lastSeq: number, bytes: number) => w.sent(0, lastSeq, lastSeq * 7, bytes);

  it("sends while the window is not full, so a socket holds at most a window plus one frame", () => {
    const w = new SendWindow();
    expect(w.hasRoom(1000)).toBe(true);
    frame(w, 1, 600);
    expect(w.hasRoom(1000)).toBe(true);
    frame(w, 2, 600);
    expect(w.inFlight).toBe(1200);
    expect(w.hasRoom(1000)).toBe(false);
    // No window: always room.
    expect(w.hasRoom(0)).toBe(true);
  });

  it("releases on an ack that names the last message of a frame with its tag, and nothing else", () => {
    const w = new SendWindow();
    frame(w, 3, 400);
    frame(w, 5, 400);
    frame(w, 9, 400);
    expect(w.ack(0, 5, 999, 9)).toBe("forged");
    expect(w.ack(0, 10, 70, 9)).toBe("forged");
    expect(w.inFlight).toBe(1200);
    expect(w.ack(0, 4, 28, 9)).toBe("stale"); // inside a frame: not a receipt of its last message
    expect(w.ack(0, 5, 35, 9)).toBe("released");
    expect(w.inFlight).toBe(400);
    expect(w.ack(0, 5, 35, 9)).toBe("stale");
    expect(w.ack(0, 3, 21, 9)).toBe("stale");
    expect(w.ack(0, 9, 63, 9)).toBe("released");
    expect(w.inFlight).toBe(0);
  });

  it("stays O(1) amortized over many frames", () => {
    const w = new SendWindow();
    for (let seq = 1; seq <= 10_000; seq++) {
      frame(w, seq, 10);
      if (seq % 3 === 0) expect(w.ack(0, seq, seq * 7, seq)).toBe("released");
    }
    expect(w.inFlight).toBe(10);
  });

  it("counts presence in the window beside messages, without ever holding messages up", () => {
    const w = new SendWindow();
    w.presenceSent(0, 0, 11, 700);
    expect(w.hasPresenceRoom(1000)).toBe(true);
    frame(w, 1, 600);
    // Messages look at their own bytes; presence at both.
    expect(w.hasRoom(1000)).toBe(true);
    expect(w.hasPresenceRoom(1000)).toBe(false);
    expect(w.hasPresenceRoom(0)).toBe(true);
  });

  it("releases presence by its tag at the seq read when it arrived, or by an ack of a later message", () => {
    const w = new SendWindow();
    let sentSeq = 0;
    w.presenceSent(0, sentSeq, 11, 100); // read before any message: acked as seq 0
    frame(w, 2, 400);
    sentSeq = 2;
    w.presenceSent(0, sentSeq, 12, 100); // arrived after message 2
    w.presenceSent(0, sentSeq, 13, 100);
    expect(w.ack(0, 0, 99, sentSeq)).toBe("stale"); // a tag it was never sent at that seq
    // Acking message 2 covers the event before it, not those after it.
    expect(w.ack(0, 2, 14, sentSeq)).toBe("released");
    expect(w.inFlight).toBe(0);
    expect(w.presenceInFlight).toBe(200);
    // The last event's tag, at the seq read: releases it and the one before.
    expect(w.ack(0, 2, 13, sentSeq)).toBe("released");
    expect(w.presenceInFlight).toBe(0);
    expect(w.ack(0, 2, 12, sentSeq)).toBe("stale");
    // A presence ack also releases the messages it came after.
    frame(w, 3, 400);
    sentSeq = 3;
    w.presenceSent(0, sentSeq, 21, 100);
    expect(w.ack(0, 3, 21, sentSeq)).toBe("released");
    expect(w.inFlight).toBe(0);
    expect(w.presenceInFlight).toBe(0);
    // And cannot claim a seq never sent.
    w.presenceSent(0, sentSeq, 31, 100);
    expect(w.ack(0, 4, 31, sentSeq)).toBe("forged");
  });

  it("keeps the rooms of one socket apart, and releases everything read before an acknowledged frame", () => {
    const w = new SendWindow();
    w.sent(0, 5, 50, 100);
    w.sent(1, 5, 51, 100);
    w.sent(0, 6, 60, 100);
    // Room 1's frame ending at 5 carried tag 51, not room 0's 50.
    expect(w.ack(1, 5, 50, 5)).toBe("forged");
    expect(w.ack(1, 5, 51, 5)).toBe("released");
    // Everything sent before it, of either room, was read too.
    expect(w.inFlight).toBe(100);
    expect(w.ack(0, 5, 50, 6)).toBe("stale");
    expect(w.ack(0, 6, 60, 6)).toBe("released");
    expect(w.inFlight).toBe(0);
  });

  it("counts answers apart, released by the ack of a later frame or the answer to a later solicitation", () => {
    const w = new SendWindow();
    w.answerSent(300);
    w.answerSent(200);
    expect(w.answersInFlight).toBe(500);
    expect(w.hasAnswerRoom(600)).toBe(true);
    expect(w.hasAnswerRoom(500)).toBe(false);
    // Answers alone ask for a proof at half the allowance, where messages ask at half the window.
    expect(w.wantsSolicit(10_000, 2000)).toBe(false);
    w.answerSent(500);
    expect(w.wantsSolicit(10_000, 2000)).toBe(true);
    w.solicit();
    expect(w.wantsSolicit(10_000, 2000)).toBe(false);
    w.answerSent(100);
    // The answer releases what was sent before the request, not the answer sent after it.
    expect(w.answered()).toBe("released");
    expect(w.answersInFlight).toBe(100);
    expect(w.answered()).toBe("forged");
    // An ack of a frame sent after an answer releases it too.
    frame(w, 1, 50);
    expect(w.ack(0, 1, 7, 1)).toBe("released");
    expect(w.answersInFlight).toBe(0);
  });
});

describe("SocketState", () => {
  const attachment = { id: "s", connectedAt: 0, canPublish: true, expiresAt: null };
  const ws = {} as WebSocket;

  it("rate-limits client frames with a token bucket", () => {
    const s = new SocketState(ws, attachment);
    const rate = { perSecond: 10, burst: 3 };
    expect([0, 0, 0, 0].map(() => s.takeFrameToken(0, rate))).toEqual([true, true, true, false]);
    expect(s.takeFrameToken(100, rate)).toBe(true);
    expect(s.takeFrameToken(100, rate)).toBe(false);
  });

  it("starts from the activity its attachment remembers, not from when the room woke", () => {
    const s = new SocketState(ws, { ...attachment, connectedAt: 1000, activeAt: 5000 });
    expect(s.lastActivity).toBe(5000);
    expect(new SocketState(ws, { ...attachment, connectedAt: 1000 }).lastActivity).toBe(1000);
    expect(s.touch(6000)).toBe(false);
    expect(s.touch(5000 + ACTIVITY_PERSIST_MS)).toBe(true);
  });
});
