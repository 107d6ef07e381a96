/**
 * The delivery of a room's webhook outbox (room/webhook-delivery.ts), as the
 * room's alarm runs it: requests of whole rows, oldest first, one at a time;
 * rows deleted once the receiver acknowledges them; failed requests retried
 * first, after a backoff; events past the retry window kept as dead letters.
 * The outbox is a real one on a real object's storage, and the receiver
 * answers each request the way the test says (helpers/workerd/webhook-fetch.ts).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { MEMORY_ONLY, RoomCounters } from "../../durable-objects/engine/counters";
import { WebhookDeadLetters } from "../../durable-objects/room/webhook-dead-letters";
import { DELIVERY_HOLD_MS, WebhookDelivery, type DeliveryOptions } from "../../durable-objects/room/webhook-delivery";
import { WebhookOutbox, type OutboxEvent } from "../../durable-objects/room/webhook-outbox";
import { inObject } from "../helpers/workerd/engine";
import { FORMAT, joinedEvent, joinedEvents } from "../helpers/workerd/webhook-events";
import { FetchReceiver, heldAnswer } from "../helpers/workerd/webhook-fetch";
import { sleep, until } from "../helpers/wait";

let receiver: FetchReceiver;
beforeEach(() => {
  receiver = FetchReceiver.install("https://hooks.example.test/fanout?token=s3cret");
});
afterEach(() => {
  receiver.stop();
  vi.restoreAllMocks();
});

interface Rig {
  outbox: WebhookOutbox;
  deadLetters: WebhookDeadLetters;
  counters: RoomCounters;
  delivery: WebhookDelivery;
  /** Stores `events` as recorded `agoMs` ago (by default, long enough ago that their hold is over). */
  record(events: readonly OutboxEvent[], agoMs?: number): void;
  /** Undelivered events as a room that starts again would find them. */
  storedEvents(): number;
}

/** A room's outbox and its delivery to the test's receiver; `rowMaxEvents` is what the recorder puts in one row. */
function deliveryOn(storage: DurableObjectStorage, options: Partial<DeliveryOptions> & { rowMaxEvents?: number } = {}): Rig {
  const outbox = new WebhookOutbox(storage.sql, options.rowMaxEvents ?? 100);
  const deadLetters = new WebhookDeadLetters(storage.sql, FORMAT);
  const counters = new RoomCounters(MEMORY_ONLY);
  const delivery = new WebhookDelivery(outbox, deadLetters, counters, {
    url: receiver.url,
    urlVar: "WEBHOOK_URL",
    format: FORMAT,
    batchMaxEvents: 100,
    retryMs: 86_400_000,
    backoffMaxMs: 300_000,
    room: () => "hooked",
    ...options,
  });
  return {
    outbox,
    deadLetters,
    counters,
    delivery,
    record: (events, agoMs = DELIVERY_HOLD_MS) => {
      outbox.append(events, Date.now() - agoMs);
    },
    storedEvents: () => new WebhookOutbox(storage.sql, 100).pendingEvents,
  };
}

/** The alarm at the time delivery asked for (or now). */
async function alarm(rig: Rig): Promise<void> {
  await rig.delivery.run(Math.max(Date.now(), rig.delivery.dueAt(Date.now()) ?? 0));
}

describe("sending", () => {
  it("sends the oldest rows first, whole, in requests of at most WEBHOOK_BATCH_MAX_EVENTS, and deletes each request's rows once acknowledged", async () => {
    await inObject(async ({ storage }) => {
      const rig = deliveryOn(storage, { rowMaxEvents: 2, batchMaxEvents: 4 });
      // Rows e1-e2, e3-e4, e5.
      const events = joinedEvents("e", 5);
      rig.record(events);
      await alarm(rig);
      expect(receiver.idsByRequest).toEqual([["e1", "e2", "e3", "e4"], ["e5"]]);
      // Each body is the stored texts as they were written, byte for byte.
      expect(receiver.requests[0]?.body).toBe(`{"events":[${events.slice(0, 4).map((e) => e.text).join(",")}]}`);
      expect(receiver.requests[0]?.method).toBe("POST");
      expect(receiver.requests[0]?.headers.get("content-type")).toBe("application/json");
      expect([rig.outbox.pendingEvents, rig.storedEvents()]).toEqual([0, 0]);
      expect(rig.counters.snapshot()).toMatchObject({ webhookRequests: 2, webhookDelivered: 5, webhookFailedRequests: 0 });
      // Nothing left: no alarm is wanted for delivery.
      expect(rig.delivery.dueAt(Date.now())).toBeNull();
    });
  });

  it("holds a new row for DELIVERY_HOLD_MS, so the next turns' events go in the same request", async () => {
    await inObject(async ({ storage }) => {
      const rig = deliveryOn(storage);
      const recordedAt = Date.now();
      rig.record([joinedEvent("first")], 0);
      expect(rig.delivery.dueAt(recordedAt)).toBeGreaterThanOrEqual(recordedAt + DELIVERY_HOLD_MS - 5);
      await rig.delivery.run(Date.now());
      expect(receiver.requests).toHaveLength(0);
      rig.record([joinedEvent("second")], 0);
      await sleep(DELIVERY_HOLD_MS + 10);
      await alarm(rig);
      expect(receiver.idsByRequest).toEqual([["first", "second"]]);
    });
  });

  it("holds a row recorded while a round is out like any other: the round ends, the next alarm takes it", async () => {
    await inObject(async ({ storage }) => {
      const rig = deliveryOn(storage);
      rig.record([joinedEvent("old")]);
      const slow = heldAnswer();
      receiver.answers.push(slow.answer);
      const round = alarm(rig);
      await until(() => receiver.requests.length === 1, { what: "the first request" });
      rig.record([joinedEvent("fresh")], 0);
      slow.give(204);
      await round;
      expect(receiver.idsByRequest).toEqual([["old"]]);
      expect(rig.delivery.dueAt(Date.now())).toBeGreaterThan(Date.now());
      await sleep(DELIVERY_HOLD_MS + 10);
      await alarm(rig);
      expect(receiver.idsByRequest).toEqual([["old"], ["fresh"]]);
    });
  });

  it("sends one request at a time: while one is out, no alarm is wanted and another run sends nothing", async () => {
    await inObject(async ({ storage }) => {
      const rig = deliveryOn(storage, { rowMaxEvents: 1, batchMaxEvents: 1 });
      rig.record(joinedEvents("e", 2));
      const slow = heldAnswer();
      receiver.answers.push(slow.answer);
      const first = alarm(rig);
      await until(() => receiver.requests.length === 1, { what: "the first request" });
      expect(rig.delivery.dueAt(Date.now())).toBeNull();
      await rig.delivery.run(Date.now());
      expect(receiver.requests).toHaveLength(1);
      slow.give(204);
      await first;
      expect(receiver.idsByRequest).toEqual([["e1"], ["e2"]]);
    });
  });

  it("ends an alarm's round after a bounded number of requests; the next alarm sends the rest, in order", async () => {
    await inObject(async ({ storage }) => {
      const rig = deliveryOn(storage, { rowMaxEvents: 1, batchMaxEvents: 1 });
      rig.record(joinedEvents("e", 30));
      await alarm(rig);
      const firstRound = receiver.requests.length;
      expect(firstRound).toBeGreaterThan(0);
      expect(firstRound).toBeLessThan(30);
      expect(rig.delivery.dueAt(Date.now())).not.toBeNull();
      await alarm(rig);
      expect(receiver.idsByRequest.flat()).toEqual(joinedEvents("e", 30).map((_, i) => `e${i + 1}`));
    });
  });
});

describe("failures", () => {
  it("keeps a failed request's rows and retries them first, after a backoff, under the same ids", async () => {
    await inObject(async ({ storage }) => {
      const rig = deliveryOn(storage, { rowMaxEvents: 2 });
      rig.record(joinedEvents("e", 2));
      receiver.answers.push(503);
      const before = Date.now();
      await alarm(rig);
      expect(receiver.idsByRequest).toEqual([["e1", "e2"]]);
      expect([rig.delivery.failures, rig.delivery.lastError]).toEqual([1, "status 503"]);
      const retryAt = rig.delivery.nextAttemptAt ?? 0;
      // At least the floor of 250 ms, at most the floor and the first ceiling of 1 s.
      expect(retryAt).toBeGreaterThanOrEqual(before + 250);
      expect(retryAt).toBeLessThanOrEqual(Date.now() + 1250);
      expect(rig.delivery.dueAt(Date.now())).toBe(retryAt);
      expect(rig.storedEvents()).toBe(2);

      // Events recorded meanwhile go after the failed ones; nothing is sent before the retry is due.
      rig.record([joinedEvent("late")]);
      await rig.delivery.run(Date.now());
      expect(receiver.requests).toHaveLength(1);
      await rig.delivery.run(retryAt);
      expect(receiver.idsByRequest).toEqual([
        ["e1", "e2"],
        ["e1", "e2", "late"],
      ]);
      expect([rig.delivery.failures, rig.delivery.lastError, rig.delivery.nextAttemptAt]).toEqual([0, null, null]);
      expect(rig.storedEvents()).toBe(0);
      expect(rig.counters.snapshot()).toMatchObject({ webhookRequests: 2, webhookFailedRequests: 1, webhookDelivered: 3 });
    });
  });

  it("backs off with full jitter, the ceiling doubling from 1 s up to WEBHOOK_BACKOFF_MAX_MS, never sooner than 250 ms", async () => {
    await inObject(async ({ storage }) => {
      const rig = deliveryOn(storage, { backoffMaxMs: 4000 });
      rig.record([joinedEvent("e")]);
      receiver.otherwise = 503;
      // The top of each jitter range, then its bottom.
      const random = vi.spyOn(Math, "random").mockReturnValue(0.999_999);
      const waits: number[] = [];
      for (let attempt = 0; attempt < 5; attempt++) {
        await alarm(rig);
        waits.push((rig.delivery.nextAttemptAt ?? 0) - Date.now());
      }
      const ceilings = [1000, 2000, 4000, 4000, 4000];
      waits.forEach((wait, i) => {
        expect(wait).toBeLessThanOrEqual(250 + (ceilings[i] as number));
        expect(wait).toBeGreaterThan(250 + (ceilings[i] as number) - 50);
      });
      random.mockReturnValue(0);
      await alarm(rig);
      const wait = (rig.delivery.nextAttemptAt ?? 0) - Date.now();
      expect(wait).toBeLessThanOrEqual(250);
      expect(wait).toBeGreaterThan(200);
      expect(receiver.requests).toHaveLength(6);
      expect(rig.delivery.failures).toBe(6);
    });
  });

  it("takes a network error for a failure and names WEBHOOK_URL in it, never the address", async () => {
    await inObject(async ({ storage }) => {
      const rig = deliveryOn(storage);
      rig.record([joinedEvent("e")]);
      receiver.answers.push("network error");
      await alarm(rig);
      expect(rig.delivery.failures).toBe(1);
      expect(rig.delivery.lastError).toBe("network error: Network connection lost reaching WEBHOOK_URL");
      expect(rig.storedEvents()).toBe(1);
    });
  });

  it("takes a redirect for a failure and does not follow it", async () => {
    await inObject(async ({ storage }) => {
      const rig = deliveryOn(storage);
      rig.record([joinedEvent("e")]);
      receiver.answers.push(302);
      await alarm(rig);
      expect(receiver.requests.map((r) => r.redirect)).toEqual(["manual"]);
      expect([rig.delivery.failures, rig.delivery.lastError, rig.storedEvents()]).toEqual([1, "status 302", 1]);
    });
  });
});

describe("dead letters", () => {
  it("keeps events undelivered past WEBHOOK_RETRY_SECONDS as dead letters before the next attempt, and sends the newer ones", async () => {
    await inObject(async ({ storage }) => {
      const retryMs = 60_000;
      const rig = deliveryOn(storage, { rowMaxEvents: 1, retryMs });
      rig.record([joinedEvent("old1"), joinedEvent("old2")], retryMs + 1000);
      rig.record([joinedEvent("fresh")], retryMs - 5000);
      await alarm(rig);
      expect(receiver.idsByRequest).toEqual([["fresh"]]);
      expect(rig.deadLetters.count()).toBe(2);
      expect(rig.deadLetters.recent().map((d) => [d.id, d.reason])).toEqual([
        ["old2", "expired"],
        ["old1", "expired"],
      ]);
      expect(rig.counters.snapshot()).toMatchObject({ webhookDeadLetters: 2, webhookDelivered: 1 });
      expect(rig.storedEvents()).toBe(0);
    });
  });

  it("gives up a failing request's events once they pass the window, rather than retrying them", async () => {
    await inObject(async ({ storage }) => {
      const retryMs = 1000;
      const rig = deliveryOn(storage, { retryMs });
      rig.record([joinedEvent("e")], retryMs - 300);
      receiver.answers.push(503);
      await alarm(rig);
      expect(rig.delivery.failures).toBe(1);
      await sleep(350);
      await alarm(rig);
      expect(receiver.requests).toHaveLength(1);
      expect(rig.deadLetters.recent().map((d) => [d.id, d.reason])).toEqual([["e", "expired"]]);
      expect(rig.delivery.dueAt(Date.now())).toBeNull();
    });
  });
});
