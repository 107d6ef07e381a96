/**
 * The write of a room's webhook events (room/webhook-recorder.ts) into a real
 * object's SQLite storage: each turn's events as one outbox row, with the
 * record of what the receiver was told, in one transaction; a flush's message
 * events inside the flush's own transaction; what a write that rolls back
 * leaves; and the oldest rows given up as dead letters past the outbox's cap.
 * What storage holds is read as a room that starts again reads it.
 */
import { describe, expect, it } from "vitest";
import type { WebhookEventType } from "../../protocol";
import { MEMORY_ONLY, RoomCounters } from "../../durable-objects/engine/counters";
import { messageEvent } from "../../durable-objects/engine/message";
import { WebhookDeadLetters } from "../../durable-objects/room/webhook-dead-letters";
import { ServiceWebhookFormat } from "../../durable-objects/room/webhook-events";
import type { RoomChange } from "../../durable-objects/room/webhook-format";
import { WebhookOutbox } from "../../durable-objects/room/webhook-outbox";
import { WebhookRecord } from "../../durable-objects/room/webhook-record";
import { WebhookRecorder, type RecordedEvent } from "../../durable-objects/room/webhook-recorder";
import { inObject } from "../helpers/workerd/engine";
import { FORMAT, summaryOf } from "../helpers/workerd/webhook-events";

interface RecorderRig {
  recorder: WebhookRecorder;
  outbox: WebhookOutbox;
  record: WebhookRecord;
  deadLetters: WebhookDeadLetters;
  counters: RoomCounters;
  /** How many times the recorder said delivery is due. */
  due: number;
}

/** A room's webhook parts on `storage`, as the room wires them. `rowMaxEvents` is WEBHOOK_BATCH_MAX_EVENTS. */
function recorderOn(
  storage: DurableObjectStorage,
  { maxRows = 1000, rowMaxEvents = 100, events }: { maxRows?: number; rowMaxEvents?: number; events?: readonly WebhookEventType[] } = {},
): RecorderRig {
  const format = events ? new ServiceWebhookFormat(new Set(events), null) : FORMAT;
  const outbox = new WebhookOutbox(storage.sql, rowMaxEvents);
  const record = new WebhookRecord(storage.sql);
  const deadLetters = new WebhookDeadLetters(storage.sql, format);
  const counters = new RoomCounters(MEMORY_ONLY);
  const rig: RecorderRig = { outbox, record, deadLetters, counters, due: 0, recorder: undefined as unknown as WebhookRecorder };
  rig.recorder = new WebhookRecorder(storage, { outbox, record, deadLetters }, counters, {
    format,
    maxRows,
    room: () => "hooked",
    recorded: () => {
      rig.due += 1;
    },
  });
  return rig;
}

const joined = (id: string): RecordedEvent => ({ change: { type: "member.joined", id, info: undefined, verified: true }, ts: Date.now() });
const left = (id: string): RecordedEvent => ({ change: { type: "member.left", id, inferred: false }, ts: Date.now() });
const occupied: RecordedEvent = { change: { type: "room.occupied" }, ts: 0 };
function published(seq: number): RecordedEvent {
  const change: RoomChange = { type: "message.published", message: messageEvent(seq, JSON.stringify({ n: seq }), Date.now(), seq), epoch: "epoch-1" };
  return { change, ts: Date.now() };
}

/** What a room that starts again on `sql` finds: its undelivered events (as `type:member`), rows, and its record's members. */
function stored(sql: SqlStorage): { events: string[]; rows: number; members: string[] } {
  const outbox = new WebhookOutbox(sql, 100);
  const all = outbox.peek(Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
  return { events: all ? summaryOf(all.events) : [], rows: outbox.pendingRows, members: new WebhookRecord(sql).memberIds().sort() };
}

/**
 * Lets the turn's microtasks run (the recorder writes what the turn decided
 * there, before the turn ends, so its commit holds the turn's other writes).
 */
const endOfTurn = () => Promise.resolve();

describe("a turn's events", () => {
  it("are written when the turn ends, as one row with the record's changes, and delivery is then due once", async () => {
    await inObject(async ({ storage }) => {
      const rig = recorderOn(storage);
      rig.record.setOccupied(true);
      rig.recorder.record(occupied);
      rig.record.addMember("ann");
      rig.recorder.record(joined("ann"));
      rig.record.addMember("bob");
      rig.recorder.record(joined("bob"));
      // Decided, not yet written: the turn is not over.
      expect(rig.recorder.busy).toBe(true);
      expect(stored(storage.sql).events).toEqual([]);
      await endOfTurn();
      expect(stored(storage.sql)).toEqual({ events: ["room.occupied", "member.joined:ann", "member.joined:bob"], rows: 1, members: ["ann", "bob"] });
      expect(rig.due).toBe(1);
      expect(rig.recorder.busy).toBe(false);
      expect(rig.counters.snapshot()).toMatchObject({ webhookEvents: 3 });
      expect(rig.counters.snapshot().webhookRowsWritten).toBeGreaterThan(0);
    });
  });

  it("are given ids unique to the write, which never repeat", async () => {
    await inObject(async ({ storage }) => {
      const rig = recorderOn(storage);
      rig.recorder.record(joined("ann"));
      rig.recorder.record(left("ann"));
      await endOfTurn();
      rig.recorder.record(joined("ann"));
      await endOfTurn();
      const all = rig.outbox.peek(100, Number.MAX_SAFE_INTEGER);
      const ids = (JSON.parse(`[${all?.events}]`) as Array<{ id: string }>).map((e) => e.id);
      expect(ids).toHaveLength(3);
      expect(new Set(ids).size).toBe(3);
      // Another room (or this one after a restart) names its events apart.
      const other = recorderOn(storage);
      other.recorder.record(joined("cy"));
      await endOfTurn();
      const again = new WebhookOutbox(storage.sql, 100).peek(100, Number.MAX_SAFE_INTEGER);
      const allIds = (JSON.parse(`[${again?.events}]`) as Array<{ id: string }>).map((e) => e.id);
      expect(new Set(allIds).size).toBe(4);
    });
  });

  it("leave out the changes the deployment does not send: nothing is written or paid for", async () => {
    await inObject(async ({ storage }) => {
      const rig = recorderOn(storage, { events: ["member.joined"] });
      rig.recorder.record(occupied);
      rig.recorder.record(left("ann"));
      await endOfTurn();
      expect(rig.recorder.busy).toBe(false);
      expect(rig.outbox.exists).toBe(false);
      expect([rig.due, rig.counters.snapshot().webhookRowsWritten]).toEqual([0, 0]);
      rig.recorder.record(joined("ann"));
      await endOfTurn();
      expect(stored(storage.sql).events).toEqual(["member.joined:ann"]);
      expect(rig.due).toBe(1);
      // A change of the record alone is written with the turn, and no delivery is due for it.
      rig.record.addMember("bob");
      rig.recorder.schedule();
      await endOfTurn();
      expect(stored(storage.sql).members).toEqual(["bob"]);
      expect(rig.due).toBe(1);
    });
  });
});

describe("inside a flush's transaction", () => {
  it("writes the flush's message events after the events decided earlier in the turn, in the same commit", async () => {
    await inObject(async ({ storage }) => {
      const rig = recorderOn(storage);
      rig.record.addMember("ann");
      rig.recorder.record(joined("ann"));
      storage.transactionSync(() => rig.recorder.writeWithin([published(1), published(2)]));
      rig.recorder.committed();
      expect(stored(storage.sql)).toEqual({ events: ["member.joined:ann", "message.published:1", "message.published:2"], rows: 1, members: ["ann"] });
      expect(rig.due).toBe(1);
      // The turn's end finds nothing left to write.
      await endOfTurn();
      expect(stored(storage.sql).rows).toBe(1);
      expect(rig.counters.snapshot().webhookEvents).toBe(3);
    });
  });

  it("stores nothing of a flush that rolled back; the changes decided before it are written by the next write, its messages never", async () => {
    await inObject(async ({ storage }) => {
      const rig = recorderOn(storage);
      rig.record.addMember("ann");
      rig.recorder.record(joined("ann"));
      expect(() =>
        storage.transactionSync(() => {
          rig.recorder.writeWithin([published(1)]);
          throw new Error("the history write failed");
        }),
      ).toThrow("the history write failed");
      // Neither the event nor the record's change is in storage, and nothing was counted.
      expect(stored(storage.sql)).toEqual({ events: [], rows: 0, members: [] });
      expect([rig.due, rig.counters.snapshot().webhookEvents]).toEqual([0, 0]);
      // The publisher of message 1 was told the flush failed, and seq 1 goes to the next message.
      storage.transactionSync(() => rig.recorder.writeWithin([published(1)]));
      rig.recorder.committed();
      expect(stored(storage.sql)).toEqual({ events: ["member.joined:ann", "message.published:1"], rows: 1, members: ["ann"] });
      expect(rig.counters.snapshot().webhookEvents).toBe(2);
    });
  });

  it("writes at the end of the turn what a rolled-back flush left, in a transaction of its own", async () => {
    await inObject(async ({ storage }) => {
      const rig = recorderOn(storage);
      rig.record.addMember("ann");
      rig.recorder.record(joined("ann"));
      expect(() =>
        storage.transactionSync(() => {
          rig.recorder.writeWithin([]);
          throw new Error("the history write failed");
        }),
      ).toThrow();
      await endOfTurn();
      expect(stored(storage.sql)).toEqual({ events: ["member.joined:ann"], rows: 1, members: ["ann"] });
      expect(rig.due).toBe(1);
    });
  });
});

describe("the outbox's cap", () => {
  it("gives the oldest rows up as dead letters past WEBHOOK_OUTBOX_MAX_ROWS, in the write that overflows", async () => {
    await inObject(async ({ storage }) => {
      // One event per row: each turn's event is a row of its own.
      const rig = recorderOn(storage, { maxRows: 2, rowMaxEvents: 1 });
      for (const id of ["a", "b"]) rig.recorder.record(joined(id));
      await endOfTurn();
      expect(rig.deadLetters.count()).toBe(0);
      for (const id of ["c", "d", "e"]) rig.recorder.record(joined(id));
      await endOfTurn();
      expect(stored(storage.sql).events).toEqual(["member.joined:d", "member.joined:e"]);
      expect(rig.deadLetters.count()).toBe(3);
      expect(rig.deadLetters.recent().map((d) => d.reason)).toEqual(["overflow", "overflow", "overflow"]);
      expect(rig.counters.snapshot()).toMatchObject({ webhookEvents: 5, webhookDeadLetters: 3 });
      // Kept where a room that starts again finds them.
      expect(new WebhookDeadLetters(storage.sql, FORMAT).count()).toBe(3);
    });
  });
});
