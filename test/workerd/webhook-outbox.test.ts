/**
 * A room's undelivered webhook events (room/webhook-outbox.ts) in a real
 * object's SQLite storage: how a turn's events become rows, how rows become
 * requests, and what a room that starts again finds (a second outbox on the
 * same storage reads it as a restarted room would).
 */
import { describe, expect, it } from "vitest";
import { OUTBOX_ROW_MAX_BYTES, WebhookOutbox } from "../../durable-objects/room/webhook-outbox";
import { inObject } from "../helpers/workerd/engine";
import { idsOf, joinedEvent, joinedEvents } from "../helpers/workerd/webhook-events";

const ANY_SIZE = Number.MAX_SAFE_INTEGER;

/** The ids a room that starts again on `sql` would send, oldest first, and in how many rows. */
function storedIds(sql: SqlStorage): { ids: string[]; rows: number } {
  const outbox = new WebhookOutbox(sql, 100);
  const all = outbox.peek(ANY_SIZE, ANY_SIZE);
  return { ids: all ? idsOf(all.events) : [], rows: outbox.pendingRows };
}

describe("recording", () => {
  it("has no table until the first event, and a room that starts again finds every event it recorded", async () => {
    await inObject(({ storage }) => {
      const outbox = new WebhookOutbox(storage.sql, 100);
      expect(outbox.append([], 1000)).toBe(0);
      expect([outbox.exists, outbox.pendingEvents, outbox.oldest()]).toEqual([false, 0, undefined]);
      expect(new WebhookOutbox(storage.sql, 100).exists).toBe(false);

      outbox.append(joinedEvents("a", 3), 1000);
      expect([outbox.exists, outbox.pendingEvents, outbox.pendingRows]).toEqual([true, 3, 1]);
      const again = new WebhookOutbox(storage.sql, 100);
      expect([again.exists, again.pendingEvents, again.pendingRows]).toEqual([true, 3, 1]);
      expect(again.oldest()).toMatchObject({ count: 3, opened: 1000, closed: 1000 });
      expect(storedIds(storage.sql).ids).toEqual(["a1", "a2", "a3"]);
    });
  });

  it("adds a later turn's events to the newest row while it waits (one row written per turn), up to the row's event cap", async () => {
    await inObject(({ storage }) => {
      const outbox = new WebhookOutbox(storage.sql, 3);
      outbox.append([joinedEvent("a")], 1000);
      // The next turn joins the waiting row: one row rewritten, nothing inserted.
      expect(outbox.append([joinedEvent("b")], 1100)).toBe(1);
      expect([outbox.pendingRows, outbox.pendingEvents]).toEqual([1, 2]);
      expect(outbox.oldest()).toMatchObject({ count: 2, opened: 1000, closed: 1100 });
      // Two more: one fills the row to its cap of 3 events, the other opens the next row.
      expect(outbox.append([joinedEvent("c"), joinedEvent("d")], 1200)).toBe(2);
      expect(outbox.pendingRows).toBe(2);
      expect(outbox.oldest()).toMatchObject({ count: 3, closed: 1200 });
      expect(storedIds(storage.sql)).toEqual({ ids: ["a", "b", "c", "d"], rows: 2 });
    });
  });

  it("keeps a row under OUTBOX_ROW_MAX_BYTES, a single larger event in a row of its own", async () => {
    await inObject(({ storage }) => {
      const outbox = new WebhookOutbox(storage.sql, 100);
      const third = Math.floor(OUTBOX_ROW_MAX_BYTES / 3);
      outbox.append([joinedEvent("a", third), joinedEvent("b", third), joinedEvent("c", third)], 1000);
      // Three thirds and their envelopes do not fit one row.
      expect(outbox.pendingRows).toBe(2);
      expect(outbox.oldest()?.count).toBe(2);
      expect(outbox.oldest()?.bytes).toBeLessThanOrEqual(OUTBOX_ROW_MAX_BYTES);
      outbox.append([joinedEvent("big", OUTBOX_ROW_MAX_BYTES), joinedEvent("d")], 1100);
      expect(outbox.pendingRows).toBe(4);
      expect(storedIds(storage.sql)).toEqual({ ids: ["a", "b", "c", "big", "d"], rows: 4 });
    });
  });

  it("opens a new row once the newest is in a request: what a request carries does not change under it", async () => {
    await inObject(({ storage }) => {
      const outbox = new WebhookOutbox(storage.sql, 100);
      outbox.append(joinedEvents("a", 2), 1000);
      const request = outbox.peek(100, ANY_SIZE);
      if (!request) throw new Error("nothing to send");
      outbox.sending(request.lastRow);
      outbox.append([joinedEvent("b1")], 1100);
      expect(outbox.pendingRows).toBe(2);
      // The request was acknowledged: its rows go, the row written meanwhile stays.
      outbox.sending(0);
      expect(outbox.delivered(request.lastRow).events).toBe(2);
      expect(storedIds(storage.sql)).toEqual({ ids: ["b1"], rows: 1 });
      // Not in a request any more: the next turn joins it again.
      outbox.append([joinedEvent("b2")], 1200);
      expect(storedIds(storage.sql)).toEqual({ ids: ["b1", "b2"], rows: 1 });
    });
  });
});

describe("requests", () => {
  it("batches whole rows, oldest first, up to maxEvents and maxBytes, and always at least one row", async () => {
    await inObject(({ storage }) => {
      const outbox = new WebhookOutbox(storage.sql, 2);
      // Three rows of two events each.
      outbox.append(joinedEvents("e", 6), 1000);
      expect(outbox.pendingRows).toBe(3);
      const four = outbox.peek(4, ANY_SIZE);
      expect(four).toMatchObject({ rows: 2, count: 4 });
      expect(idsOf(four?.events ?? "")).toEqual(["e1", "e2", "e3", "e4"]);
      // Rows are not split: three events of room means one row of two.
      expect(outbox.peek(3, ANY_SIZE)).toMatchObject({ rows: 1, count: 2 });
      // A request smaller than the oldest row still carries it.
      expect(idsOf(outbox.peek(1, 1)?.events ?? "")).toEqual(["e1", "e2"]);
      const firstRow = outbox.oldest()?.bytes ?? 0;
      expect(outbox.peek(100, firstRow + 1)).toMatchObject({ rows: 1 });
      // Looking is not sending: everything is still there.
      expect(outbox.pendingEvents).toBe(6);
    });
  });

  it("deletes the rows a receiver acknowledged, up to the request's last row, and only those", async () => {
    await inObject(({ storage }) => {
      const outbox = new WebhookOutbox(storage.sql, 2);
      outbox.append(joinedEvents("e", 5), 1000);
      const request = outbox.peek(4, ANY_SIZE);
      if (!request) throw new Error("nothing to send");
      const done = outbox.delivered(request.lastRow);
      expect(done.events).toBe(4);
      expect(done.rowsWritten).toBeGreaterThanOrEqual(1);
      expect([outbox.pendingEvents, outbox.pendingRows]).toEqual([1, 1]);
      expect(storedIds(storage.sql)).toEqual({ ids: ["e5"], rows: 1 });
      // An acknowledgement of rows already gone deletes nothing.
      expect(outbox.delivered(request.lastRow)).toEqual({ events: 0, rowsWritten: 0 });
    });
  });

  it("takes the oldest row out whole (for dead letters), events and all", async () => {
    await inObject(({ storage }) => {
      const outbox = new WebhookOutbox(storage.sql, 2);
      outbox.append(joinedEvents("e", 3), 1000);
      const taken = outbox.takeOldest();
      expect(taken?.count).toBe(2);
      expect(idsOf(taken?.events ?? "")).toEqual(["e1", "e2"]);
      expect(storedIds(storage.sql)).toEqual({ ids: ["e3"], rows: 1 });
      outbox.takeOldest();
      expect(outbox.takeOldest()).toBeNull();
      expect([outbox.pendingEvents, outbox.oldest()]).toEqual([0, undefined]);
    });
  });

  it("numbers rows after those a room that starts again finds, so an acknowledgement never reaches a newer row", async () => {
    await inObject(({ storage }) => {
      const first = new WebhookOutbox(storage.sql, 1);
      first.append(joinedEvents("old", 2), 1000);
      const restarted = new WebhookOutbox(storage.sql, 1);
      const request = restarted.peek(1, ANY_SIZE);
      if (!request) throw new Error("nothing to send");
      restarted.sending(request.lastRow);
      restarted.append([joinedEvent("new")], 1100);
      restarted.sending(0);
      restarted.delivered(request.lastRow);
      expect(storedIds(storage.sql).ids).toEqual(["old2", "new"]);
    });
  });
});
