import { env, exports } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { HistoryPage, ServerEvent, ServerMessage } from "../../protocol";
import { messageEvent } from "../../durable-objects/engine/message";
import { History } from "../../durable-objects/room/history";
import { historyPage, PAGE_MAX_BYTES, type PageQuery } from "../../durable-objects/room/history-pages";
import { MetaStore } from "../../durable-objects/room/meta-store";
import type { Env } from "../../worker/env";

/** GET /rooms/{room}/messages: pages of a room's history, and what each page reads. */

const bindings = env as unknown as Env;
type Entry = { fetch(input: string, init?: RequestInit): Promise<Response> };
const worker = (exports as unknown as { default: Entry }).default;

async function page(room: string, query = ""): Promise<{ status: number; body: HistoryPage & { error?: string; message?: string } }> {
  const res = await worker.fetch(`http://edge.test/rooms/${room}/messages${query}`);
  return { status: res.status, body: (await res.json()) as HistoryPage & { error?: string } };
}

/** Publishes `count` messages one at a time: one flush, one row each. */
async function publishEach(room: string, count: number, from = 1): Promise<void> {
  for (let n = from; n < from + count; n++) {
    const res = await worker.fetch(`http://edge.test/rooms/${room}/publish`, { method: "POST", body: JSON.stringify({ n }), headers: { "content-type": "application/json" } });
    expect(res.status).toBe(200);
  }
}

const seqs = (p: HistoryPage) => p.messages.map((m) => m.seq);
const range = (from: number, to: number) => Array.from({ length: Math.abs(to - from) + 1 }, (_, i) => (from <= to ? from + i : from - i));

/** Pages of a History built on a room's storage directly, for bounds the worker's vars do not set. */
function pageOf(history: History, query: Partial<PageQuery>, now?: number): HistoryPage {
  const answer = historyPage(history, "direct", { direction: "backward", after: null, before: null, limit: 100, rowHint: 0, epoch: null, ...query }, now);
  if (!answer.ok) throw new Error(answer.message);
  return JSON.parse(answer.body) as HistoryPage;
}

describe("GET /rooms/{room}/messages", () => {
  it("answers 404 for a room that holds no history, and creates nothing by asking", async () => {
    expect(await page("pages-nobody")).toMatchObject({ status: 404, body: { error: "not_found" } });
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("pages-nobody"));
    // A socket makes the room known, but it holds no message: still no history.
    const res = await worker.fetch("http://edge.test/rooms/pages-nobody/ws", { headers: { Upgrade: "websocket" } });
    const ws = res.webSocket as WebSocket;
    ws.accept();
    expect(await page("pages-nobody")).toMatchObject({ status: 404, body: { error: "not_found" } });
    const tables = await runInDurableObject(stub, (_i, state) => state.storage.sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'").toArray().map((r) => r.name));
    expect(tables).not.toContain("log");
    ws.close(1000);
  });

  it("pages newest first by default, and forward after a seq, each page reading about one row per message published alone", async () => {
    const room = "pages-walk";
    await publishEach(room, 250);
    const first = await page(room);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ room, direction: "backward", lost: null });
    expect(seqs(first.body)).toEqual(range(250, 151));
    expect(first.body.messages[0]).toEqual({ seq: 250, ts: expect.any(Number), data: { n: 250 } });
    // One row per message (they were flushed one by one), plus a range read's look at the next slot.
    expect(first.body.rowsRead).toBeGreaterThanOrEqual(100);
    expect(first.body.rowsRead).toBeLessThanOrEqual(110);
    const second = await page(room, `?cursor=${encodeURIComponent(first.body.cursor!)}`);
    expect(seqs(second.body)).toEqual(range(150, 51));
    const third = await page(room, `?cursor=${encodeURIComponent(second.body.cursor!)}&limit=1000`);
    expect(seqs(third.body)).toEqual(range(50, 1));
    expect(third.body.cursor).toBeNull();
    expect(third.body.lost).toBeNull();

    const forward = await page(room, "?after=0&limit=120");
    expect(forward.body.direction).toBe("forward");
    expect(seqs(forward.body)).toEqual(range(1, 120));
    const next = await page(room, `?cursor=${encodeURIComponent(forward.body.cursor!)}&limit=120`);
    expect(seqs(next.body)).toEqual(range(121, 240));
    const last = await page(room, `?cursor=${encodeURIComponent(next.body.cursor!)}&limit=120`);
    expect(seqs(last.body)).toEqual(range(241, 250));
    expect(last.body.cursor).toBeNull();
  }, 30_000); // 250 publishes one after another: seconds on a busy machine

  it("serves a range between after and before in either direction, and what a socket's events say", async () => {
    const room = "pages-range";
    const res = await worker.fetch(`http://edge.test/rooms/${room}/ws`, { headers: { Upgrade: "websocket" } });
    const ws = res.webSocket as WebSocket;
    const events: ServerEvent[] = [];
    ws.addEventListener("message", (e) => events.push(...([] as ServerEvent[]).concat(JSON.parse(e.data as string) as ServerEvent)));
    ws.accept();
    await publishEach(room, 30);
    expect(seqs((await page(room, "?after=10&before=15")).body)).toEqual([11, 12, 13, 14]);
    expect(seqs((await page(room, "?after=10&before=15&direction=backward")).body)).toEqual([14, 13, 12, 11]);
    expect(seqs((await page(room, "?before=4")).body)).toEqual([3, 2, 1]);
    expect(seqs((await page(room, "?after=29")).body)).toEqual([30]);
    expect((await page(room, "?after=30")).body).toMatchObject({ messages: [], cursor: null, lost: null });
    expect((await page(room, "?after=10&before=11")).body.messages).toEqual([]);
    const socketSaw = events.filter((e): e is ServerMessage => e.type === "message").map(({ seq, ts, data }) => ({ seq, ts, data }));
    expect((await page(room, "?after=0")).body.messages).toEqual(socketSaw);
    ws.close(1000);
  });

  it("refuses bad parameters with 400 and a JSON error, and other methods with 405", async () => {
    const room = "pages-bad";
    await publishEach(room, 3);
    const { body: ok } = await page(room);
    for (const query of [
      "?limit=0", "?limit=1001", "?limit=ten", "?limit=-1", "?after=-1", "?after=1.5", "?before=x", "?after=5&before=5", "?after=6&before=2",
      "?direction=sideways", "?cursor=nope", `?cursor=${encodeURIComponent(ok.cursor ?? "b1.0.1." + ok.epoch)}&after=1`, "?epoch=not%20an%20epoch", "?epoch=", `?epoch=${"e".repeat(65)}`, "?epoch=a%2Fb", "?epoch=%C3%A9poque",
      `?cursor=b2..1.${ok.epoch}&epoch=another-epoch`,
    ]) {
      const res = await page(room, query);
      expect(res.status, query).toBe(400);
      expect(res.body, query).toMatchObject({ error: "bad_request", message: expect.any(String) });
    }
    const post = await worker.fetch(`http://edge.test/rooms/${room}/messages`, { method: "POST", body: "{}" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET");
  });

  it("refuses a cursor or an epoch of another history with 409 conflict", async () => {
    const room = "pages-epoch";
    await publishEach(room, 3);
    const stale = `b3..1.00000000-0000-0000-0000-000000000000`;
    expect(await page(room, `?cursor=${stale}`)).toMatchObject({ status: 409, body: { error: "conflict" } });
    expect(await page(room, "?epoch=another-epoch")).toMatchObject({ status: 409, body: { error: "conflict" } });
    const { body } = await page(room);
    expect((await page(room, `?epoch=${body.epoch}`)).status).toBe(200);
  });
});

describe("history pages", () => {
  it("read one row for a flush's messages, and stop at about a megabyte of text", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("pages-rows"));
    await runInDurableObject(stub, (_i, state) => {
      const history = new History(state.storage, new MetaStore(state.storage.sql), { maxMessages: 1000, maxAgeMs: 600_000 });
      const now = Date.now();
      // 8 flushes of 25 small messages, then 40 messages of 60 KB one per flush.
      for (let f = 0; f < 8; f++) history.append(Array.from({ length: 25 }, (_, i) => messageEvent(f * 25 + i + 1, String(i), now, 1)), now);
      const forward = pageOf(history, { direction: "forward", after: 0, limit: 200 });
      expect(seqs(forward)).toEqual(range(1, 200));
      expect(forward.rowsRead).toBeLessThanOrEqual(9);
      const big = JSON.stringify("y".repeat(60_000));
      for (let seq = 201; seq <= 240; seq++) history.append([messageEvent(seq, big, now, 1)], now);
      const large = pageOf(history, { limit: 1000 });
      expect(large.messages.length).toBe(Math.floor(PAGE_MAX_BYTES / 60_100));
      expect(large.cursor).not.toBeNull();
      expect(JSON.stringify(large.messages).length).toBeLessThan(PAGE_MAX_BYTES + 100_000);
    });
  });

  it("mark what the range asks for beyond what history still holds as lost, and end there", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("pages-lost"));
    await runInDurableObject(stub, (_i, state) => {
      const history = new History(state.storage, new MetaStore(state.storage.sql), { maxMessages: 10, maxAgeMs: 60_000 });
      const now = Date.now();
      for (let seq = 1; seq <= 30; seq++) history.append([messageEvent(seq, String(seq), now, 1)], now);
      const back = pageOf(history, { limit: 100 });
      expect(seqs(back)).toEqual(range(30, 21));
      expect(back).toMatchObject({ lost: { from: 1, to: 20 }, cursor: null });
      const paged = pageOf(history, { limit: 6 });
      expect(paged.lost).toBeNull();
      expect(seqs(paged)).toEqual(range(30, 25));
      const rest = historyPage(history, "direct", { direction: "backward", after: null, before: 25, limit: 6, rowHint: 0, epoch: null });
      expect(rest.ok && (JSON.parse(rest.body) as HistoryPage)).toMatchObject({ lost: { from: 1, to: 20 }, cursor: null });
      const forward = pageOf(history, { direction: "forward", after: 4, limit: 5 });
      expect(forward).toMatchObject({ lost: { from: 5, to: 20 } });
      expect(seqs(forward)).toEqual(range(21, 25));
      expect(pageOf(history, { direction: "forward", after: 4, before: 12 })).toMatchObject({ messages: [], lost: { from: 5, to: 11 }, cursor: null });
      // Past the age bound nothing is held.
      const later = now + 120_000;
      expect(pageOf(history, { limit: 100 }, later)).toMatchObject({ messages: [], lost: { from: 1, to: 30 }, cursor: null });
      expect(pageOf(history, { direction: "forward", after: 0 }, later)).toMatchObject({ messages: [], lost: { from: 1, to: 30 } });
    });
  });

  it("continue where the cursor's row says, and look the row up when the ring moved on", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("pages-hint"));
    await runInDurableObject(stub, (_i, state) => {
      const open = () => new History(state.storage, new MetaStore(state.storage.sql), { maxMessages: 500, maxAgeMs: 600_000 });
      const now = Date.now();
      const writer = open();
      for (let seq = 1; seq <= 400; seq++) writer.append([messageEvent(seq, String(seq), now, 1)], now);
      // A new instance knows no row in memory: the first page searches, the next one starts at the cursor's row.
      const reader = open();
      const first = pageOf(reader, { direction: "forward", after: 100, limit: 10 });
      const cursor = /^f(\d+)\.(\d*)\.(\d+)\./.exec(first.cursor!)!;
      const next = pageOf(reader, { direction: "forward", after: Number(cursor[1]), limit: 10, rowHint: Number(cursor[3]) });
      expect(seqs(next)).toEqual(range(111, 120));
      expect(next.rowsRead).toBeLessThan(first.rowsRead);
      const wrong = pageOf(reader, { direction: "forward", after: 110, limit: 10, rowHint: 3 });
      expect(seqs(wrong)).toEqual(range(111, 120));
    });
  });
});
