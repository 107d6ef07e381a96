import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { OrderedStream } from "../../client-sdk/src/stream";
import { parseClientFrame, type LostEvent, type ServerMessage, type WelcomeEvent } from "../../protocol";

/**
 * OrderedStream, the client's position in a room and its acks: which
 * message to deliver, what a `lost` or another epoch does to the position,
 * and when an ack goes out. Its one way out is the `send` function it is
 * given, so the test takes what it sends (and parses it as the room would);
 * fake timers put each ack to the millisecond. The client doing the same over
 * real sockets is in sdk-protocol.test.ts.
 */

const BASE = "ws://room.test/rooms/lobby/ws";
const welcome = (fields: Partial<WelcomeEvent> = {}): WelcomeEvent => ({
  type: "welcome",
  room: "lobby",
  seq: 0,
  epoch: "e1",
  window: 1000,
  rate: { perSecond: 20, burst: 60 },
  ...fields,
});
const message = (seq: number): ServerMessage => ({ type: "message", seq, data: seq, ts: 0, tag: 1000 + seq });
const lost = (reason: LostEvent["reason"], from: number, to: number): LostEvent => ({ type: "lost", reason, from, to });

/** A stream whose acks land in `acks`, parsed as the room parses them; `accept` false makes sending fail (no open socket). */
function stream(start: { since?: number; epoch?: string } = {}, ackDelayMs = 1000) {
  const acks: Array<{ seq: number; tag: number }> = [];
  const state = { accept: true };
  const s = new OrderedStream(start, ackDelayMs, (text) => {
    if (!state.accept) return false;
    const parsed = parseClientFrame(text);
    if (!parsed.ok || parsed.value.type !== "ack") throw new Error(`not an ack: ${text}`);
    acks.push({ seq: parsed.value.seq, tag: parsed.value.tag });
    return true;
  });
  return { s, acks, state };
}

describe("admitting messages", () => {
  it("delivers the next seq, drops one already delivered, and calls anything further a gap without moving", () => {
    const { s } = stream();
    s.welcome(welcome({ seq: 10 }));
    expect([s.lastSeq, s.expected]).toEqual([10, 11]);
    expect(s.admit(message(11))).toBe("deliver");
    expect(s.admit(message(11))).toBe("duplicate");
    expect(s.admit(message(9))).toBe("duplicate");
    expect(s.admit(message(13))).toBe("gap");
    expect([s.lastSeq, s.expected]).toEqual([11, 12]);
    expect(s.admit(message(12))).toBe("deliver");
    expect(s.lastSeq).toBe(12);
  });

  it("resumes after `since`: the welcome's seq does not move a position it already has", () => {
    const { s } = stream({ since: 5, epoch: "e1" });
    s.welcome(welcome({ seq: 20 }));
    expect([s.lastSeq, s.epoch]).toEqual([5, "e1"]);
    expect(s.resumeUrl(BASE)).toBe(`${BASE}?since=5&epoch=e1`);
    expect(s.admit(message(6))).toBe("deliver");
    expect(s.resumeUrl(BASE)).toBe(`${BASE}?since=6&epoch=e1`);
  });

  it("starts at the room's position from the first welcome, and asks for nothing before it has one", () => {
    const { s } = stream();
    expect(s.resumeUrl(BASE)).toBe(BASE);
    s.welcome(welcome({ seq: 7, epoch: "e9" }));
    expect([s.lastSeq, s.epoch]).toEqual([7, "e9"]);
    expect(s.resumeUrl(BASE)).toBe(`${BASE}?since=7&epoch=e9`);
  });
});

describe("lost messages", () => {
  it("moves past history that aged out, once: a report it is already past is not for the application", () => {
    const { s } = stream({ since: 5, epoch: "e1" });
    s.welcome(welcome({ seq: 20 }));
    expect(s.lost(lost("history", 6, 9))).toBe(true);
    expect(s.lastSeq).toBe(9);
    expect(s.lost(lost("history", 3, 8))).toBe(false);
    expect(s.lastSeq).toBe(9);
    expect(s.admit(message(10))).toBe("deliver");
  });

  it("keeps the old epoch after a welcome of another until the `lost` for it, so a reconnect in between is told again", () => {
    const { s } = stream({ since: 5, epoch: "old" });
    s.welcome(welcome({ seq: 3, epoch: "new" }));
    expect([s.lastSeq, s.epoch]).toEqual([5, "old"]);
    // The connection ends before the `lost` arrives: the next one resumes from the old position.
    s.reset();
    expect(s.resumeUrl(BASE)).toBe(`${BASE}?since=5&epoch=old`);
    s.welcome(welcome({ seq: 3, epoch: "new" }));
    expect(s.lost(lost("epoch", 1, 3))).toBe(true);
    expect([s.lastSeq, s.epoch]).toEqual([3, "new"]);
    expect(s.admit(message(4))).toBe("deliver");
    expect(s.resumeUrl(BASE)).toBe(`${BASE}?since=4&epoch=new`);
  });
});

describe("acks", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it("acks ackDelayMs after the first frame not yet acknowledged, naming the last one received with its tag", () => {
    const { s, acks } = stream({}, 1000);
    s.welcome(welcome());
    s.received(message(1), "x".repeat(100));
    vi.advanceTimersByTime(500);
    s.received(message(2), "x".repeat(100)); // does not push the ack back
    vi.advanceTimersByTime(499);
    expect(acks).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(acks).toEqual([{ seq: 2, tag: 1002 }]);
    vi.advanceTimersByTime(10_000);
    expect(acks).toHaveLength(1); // nothing new, no ack
  });

  it("acks at once when half the window is unacknowledged, counting UTF-8 bytes", () => {
    const { s, acks } = stream({}, 1000);
    s.welcome(welcome({ window: 1000 }));
    s.received(message(1), "x".repeat(499));
    expect(acks).toEqual([]);
    s.received(message(2), "x");
    expect(acks).toEqual([{ seq: 2, tag: 1002 }]); // 500 bytes: half
    // 250 characters of two bytes each are 500 bytes, not 250.
    s.received(message(3), "é".repeat(250));
    expect(acks).toEqual([
      { seq: 2, tag: 1002 },
      { seq: 3, tag: 1003 },
    ]);
    vi.advanceTimersByTime(1000);
    expect(acks).toHaveLength(2); // the delayed ack went with the one at half the window
  });

  it("acks only on the timer when the welcome announces no window", () => {
    const { s, acks } = stream({}, 1000);
    s.welcome(welcome({ window: 0 }));
    s.received(message(1), "x".repeat(1_000_000));
    expect(acks).toEqual([]);
    vi.advanceTimersByTime(1000);
    expect(acks).toEqual([{ seq: 1, tag: 1001 }]);
  });

  it("keeps what it owes when an ack could not be sent, and names the latest frame in the next", () => {
    const { s, acks, state } = stream({}, 1000);
    s.welcome(welcome({ window: 1000 }));
    state.accept = false;
    s.received(message(1), "x".repeat(600));
    expect(acks).toEqual([]);
    state.accept = true;
    s.received(message(2), "x");
    expect(acks).toEqual([{ seq: 2, tag: 1002 }]);
  });

  it("forgets, on reset, the ack it owed and the bytes it counted: they belonged to the connection that ended", () => {
    const { s, acks } = stream({}, 1000);
    s.welcome(welcome({ window: 1000 }));
    expect(s.admit(message(1))).toBe("deliver");
    s.received(message(1), "x".repeat(400));
    s.reset();
    vi.advanceTimersByTime(5000);
    expect(acks).toEqual([]);
    s.welcome(welcome({ seq: 1, window: 1000 }));
    s.received(message(2), "x".repeat(400)); // 400, not 800: no ack at once
    expect(acks).toEqual([]);
    vi.advanceTimersByTime(1000);
    expect(acks).toEqual([{ seq: 2, tag: 1002 }]);
    expect(s.lastSeq).toBe(1); // the position is the client's, and survives the reset
  });
});
