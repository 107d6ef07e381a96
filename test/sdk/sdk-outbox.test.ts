import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { PublishError } from "../../client-sdk/src/events";
import { Outbox, type OutboxTransport } from "../../client-sdk/src/outbox";
import { parseClientFrame, type ClientFrame, type WelcomeEvent } from "../../protocol";

/**
 * Outbox, where publishes wait for a connection and the room's frame budget:
 * the pace the welcome's rate allows, what survives a reconnect and what is
 * rejected as unconfirmed, answers matched by id, the message limit, and
 * closing. Its way out is a transport that is open or not; the test holds one
 * in memory, parses each frame as the room does, and runs fake timers, so
 * the pace is checked to the millisecond. The client publishing through real
 * sockets is in sdk-protocol.test.ts and sdk-client.test.ts.
 */

const welcome = (fields: Partial<WelcomeEvent> = {}): WelcomeEvent => ({
  type: "welcome",
  room: "lobby",
  seq: 0,
  epoch: "e1",
  window: 1000,
  rate: { perSecond: 4, burst: 8 },
  ...fields,
});

/** A connection in memory: open or not, taking frames or refusing them. */
class MemoryTransport implements OutboxTransport {
  writable = false;
  refuse = false;
  readonly frames: ClientFrame[] = [];
  send(text: string): boolean {
    if (!this.writable || this.refuse) return false;
    const parsed = parseClientFrame(text);
    if (!parsed.ok) throw new Error(`the room would close the socket for ${text}: ${parsed.error}`);
    this.frames.push(parsed.value);
    return true;
  }
  /** Data of the publishes sent, in order. */
  get data(): unknown[] {
    return this.frames.map((f) => (f.type === "publish" ? f.data : f.type));
  }
}

/** An outbox on a transport that is open and welcomed with `fields`. */
function opened(fields: Partial<WelcomeEvent> = {}) {
  const transport = new MemoryTransport();
  const outbox = new Outbox(transport);
  transport.writable = true;
  outbox.welcome(welcome(fields));
  return { transport, outbox };
}

/** How a publish settled, once it has: its seq, or its PublishError's code. */
function outcome(promise: Promise<number | void>): { settled: number | string | null } {
  const result: { settled: number | string | null } = { settled: null };
  promise.then(
    (seq) => (result.settled = seq ?? 0),
    (error: unknown) => (result.settled = error instanceof PublishError ? error.code : String(error)),
  );
  return result;
}

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

describe("the frame budget", () => {
  it("sends half the welcome's burst at once, then at three quarters of its rate", async () => {
    const { transport, outbox } = opened({ rate: { perSecond: 4, burst: 8 } });
    for (let i = 1; i <= 6; i++) outcome(outbox.publish(i));
    expect(transport.data).toEqual([1, 2, 3, 4]); // half of 8
    // 3 frames a second: one every 333.3 ms.
    await vi.advanceTimersByTimeAsync(333);
    expect(transport.data).toHaveLength(4);
    await vi.advanceTimersByTimeAsync(1);
    expect(transport.data).toEqual([1, 2, 3, 4, 5]);
    await vi.advanceTimersByTimeAsync(332);
    expect(transport.data).toHaveLength(5);
    await vi.advanceTimersByTimeAsync(1);
    expect(transport.data).toEqual([1, 2, 3, 4, 5, 6]);

    // However long it was idle, the budget holds no more than half the burst.
    await vi.advanceTimersByTimeAsync(60_000);
    for (let i = 7; i <= 12; i++) outcome(outbox.publish(i));
    expect(transport.data).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it("takes a new budget from each welcome, and sends without pacing when the rate is 0", async () => {
    const { transport, outbox } = opened({ rate: { perSecond: 4, burst: 2 } });
    for (let i = 1; i <= 3; i++) outcome(outbox.publish(i));
    expect(transport.data).toEqual([1]);
    outbox.connectionEnded();
    outbox.welcome(welcome({ rate: { perSecond: 0, burst: 0 } }));
    outbox.pump();
    expect(transport.data).toEqual([1, 2, 3]);
  });

  it("paces application frames with publishes, in order, and settles them once sent", async () => {
    const { transport, outbox } = opened({ rate: { perSecond: 4, burst: 2 } });
    const first = outcome(outbox.publish("a"));
    const custom = outcome(outbox.sendCustom({ type: "x-typing" }));
    const second = outcome(outbox.publish("b"));
    await vi.advanceTimersByTimeAsync(0);
    expect(transport.data).toEqual(["a"]);
    expect(custom.settled).toBeNull();
    await vi.advanceTimersByTimeAsync(334);
    expect(transport.data).toEqual(["a", "x-typing"]);
    expect(custom.settled).toBe(0);
    await vi.advanceTimersByTimeAsync(334);
    expect(transport.data).toEqual(["a", "x-typing", "b"]);
    expect([first.settled, second.settled]).toEqual([null, null]); // publishes wait for their answers
  });
});

describe("across connections", () => {
  it("holds publishes while there is no connection and sends them in order once one is welcomed", async () => {
    const transport = new MemoryTransport();
    const outbox = new Outbox(transport);
    for (const data of ["a", "b", "c"]) outcome(outbox.publish(data));
    outbox.pump();
    expect(transport.frames).toEqual([]);
    transport.writable = true;
    outbox.welcome(welcome());
    outbox.pump();
    expect(transport.frames).toEqual([
      { type: "publish", id: "1", data: "a" },
      { type: "publish", id: "2", data: "b" },
      { type: "publish", id: "3", data: "c" },
    ]);
  });

  it("rejects what the ended connection carried as unconfirmed, and sends what it had not yet on the next", async () => {
    const { transport, outbox } = opened({ rate: { perSecond: 4, burst: 4 } });
    const results = ["a", "b", "c", "d"].map((data) => outcome(outbox.publish(data)));
    expect(transport.data).toEqual(["a", "b"]);
    outbox.connectionEnded();
    transport.writable = false;
    expect(vi.getTimerCount()).toBe(0); // no pacing timer outlives the connection
    await vi.advanceTimersByTimeAsync(0);
    expect(results.map((r) => r.settled)).toEqual(["unconfirmed", "unconfirmed", null, null]);
    // A late answer from the ended connection is no longer for these publishes.
    expect(outbox.settle({ type: "published", id: "1", seq: 5 })).toBe(false);

    transport.writable = true;
    outbox.welcome(welcome({ rate: { perSecond: 4, burst: 4 } }));
    outbox.pump();
    expect(transport.data).toEqual(["a", "b", "c", "d"]);
    expect(transport.frames.slice(2).map((f) => (f as { id?: string }).id)).toEqual(["3", "4"]);
    outbox.settle({ type: "published", id: "3", seq: 1 });
    outbox.settle({ type: "published", id: "4", seq: 2 });
    await vi.advanceTimersByTimeAsync(0);
    expect(results.map((r) => r.settled)).toEqual(["unconfirmed", "unconfirmed", 1, 2]);
  });

  it("keeps a frame the transport refused at the head of the queue", async () => {
    const { transport, outbox } = opened();
    transport.refuse = true;
    outcome(outbox.publish("a"));
    outcome(outbox.publish("b"));
    expect(transport.frames).toEqual([]);
    transport.refuse = false;
    outbox.pump();
    expect(transport.data).toEqual(["a", "b"]);
  });
});

describe("answers", () => {
  it("settles the publish an answer names by id, and takes no answer that names none of its own", async () => {
    const { outbox } = opened();
    const a = outcome(outbox.publish("a"));
    const b = outcome(outbox.publish("b"));
    expect(outbox.settle({ type: "published", id: "2", seq: 8 })).toBe(true);
    expect(outbox.settle({ type: "error", code: "forbidden", message: "this socket may not publish", id: "1" })).toBe(true);
    await vi.advanceTimersByTimeAsync(0);
    expect([a.settled, b.settled]).toEqual(["forbidden", 8]);
    expect(outbox.settle({ type: "published", id: "1", seq: 9 })).toBe(false); // settled already
    expect(outbox.settle({ type: "published", id: "99", seq: 9 })).toBe(false);
    expect(outbox.settle({ type: "error", code: "bad_frame", message: "no id" })).toBe(false);
  });
});

describe("refused before sending", () => {
  it("refuses data over the welcome's maxMessageBytes without sending it or spending the budget", async () => {
    const { transport, outbox } = opened({ rate: { perSecond: 4, burst: 2 }, maxMessageBytes: 10 });
    const over = outcome(outbox.publish("é".repeat(5))); // 12 bytes of JSON, 7 characters
    const atLimit = outcome(outbox.publish("12345678")); // 10 bytes
    await vi.advanceTimersByTimeAsync(0);
    expect(over.settled).toBe("too_large");
    expect(transport.data).toEqual(["12345678"]); // the one frame of the budget went to it
    expect(atLimit.settled).toBeNull();
  });

  it("measures a publish queued without a connection against the limit of the one it goes out on; no limit announced, no check", async () => {
    const transport = new MemoryTransport();
    const outbox = new Outbox(transport);
    const fits = outcome(outbox.publish("x".repeat(30))); // 32 bytes of JSON
    const over = outcome(outbox.publish("x".repeat(50))); // 52
    transport.writable = true;
    outbox.welcome(welcome({ maxMessageBytes: 40 }));
    outbox.pump();
    await vi.advanceTimersByTimeAsync(0);
    expect([fits.settled, over.settled]).toEqual([null, "too_large"]);
    expect(transport.data).toEqual(["x".repeat(30)]);

    // The next connection's server announces no limit (an older one): it gets the publish and answers for itself.
    outbox.connectionEnded();
    outbox.welcome(welcome());
    outcome(outbox.publish("x".repeat(50)));
    expect(transport.data).toEqual(["x".repeat(30), "x".repeat(50)]);
  });

  it("refuses data with no JSON text as bad_request, sending nothing", async () => {
    const { transport, outbox } = opened();
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    const results = [10n, cycle, () => 1].map((data) => outcome(outbox.publish(data)));
    await vi.advanceTimersByTimeAsync(0);
    expect(results.map((r) => r.settled)).toEqual(["bad_request", "bad_request", "bad_request"]);
    expect(transport.frames).toEqual([]);
  });
});

describe("closing", () => {
  it("rejects what is still queued as closed; what was sent waits for its answer or the end of its connection", async () => {
    const { transport, outbox } = opened({ rate: { perSecond: 4, burst: 2 } });
    const sent = outcome(outbox.publish("a"));
    const queued = [outcome(outbox.publish("b")), outcome(outbox.sendCustom({ type: "x-bye" }))];
    outbox.close("the client was closed");
    await vi.advanceTimersByTimeAsync(1000);
    expect(queued.map((r) => r.settled)).toEqual(["closed", "closed"]);
    expect(sent.settled).toBeNull();
    expect(transport.data).toEqual(["a"]);
    outbox.connectionEnded();
    await vi.advanceTimersByTimeAsync(0);
    expect(sent.settled).toBe("unconfirmed");
  });
});
