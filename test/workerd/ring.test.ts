/**
 * A leaf's recent messages (followers/ring.ts MessageRing): what it keeps of the
 * live path and of a backfill, within which bounds, and what catch-up reads
 * from it — messages, ranges the root's history lost, and misses it must
 * fetch.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { messageEvent, type Message } from "../../durable-objects/engine/message";
import type { SourceRead } from "../../durable-objects/engine/stream";
import { MessageRing, type RingBounds } from "../../durable-objects/followers/ring";

const LIMITS = { maxBytes: 1 << 20, maxEvents: 1000 };

/** A room's messages by seq (index 0 is seq 1), each of about `size(seq)` bytes, tagged with its seq. */
function roomOf(count: number, size: (seq: number) => number = () => 50): Message[] {
  return Array.from({ length: count }, (_, i) => messageEvent(i + 1, JSON.stringify("x".repeat(size(i + 1))), 0, i + 1));
}

/** Seqs `from`..`to` of `room`. */
const slice = (room: readonly Message[], from: number, to: number) => room.slice(from - 1, to);

function ringOf(bounds: Partial<RingBounds> = {}) {
  const misses: number[] = [];
  const ring = new MessageRing({ maxMessages: 1000, maxBytes: 1 << 20, backfillBytes: 1 << 18, ...bounds }, (from) => {
    misses.push(from);
  });
  return { ring, misses };
}

function seqsOf(read: SourceRead): number[] {
  return read.runs.map((run) => run.firstSeq);
}

/** Which of `from`..`to` the ring can serve without asking the root. */
function covered(ring: MessageRing, from: number, to: number): number[] {
  const seqs: number[] = [];
  for (let seq = from; seq <= to; seq++) if (ring.covers(seq)) seqs.push(seq);
  return seqs;
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe("the live part", () => {
  it("ends at the last message pushed and keeps at most maxMessages of them", () => {
    const room = roomOf(8);
    const { ring } = ringOf({ maxMessages: 5 });
    expect(ring.seq).toBe(0);
    ring.append(slice(room, 1, 3));
    ring.append(slice(room, 4, 8));
    expect(ring.seq).toBe(8);
    expect(ring.size.messages).toBe(5);
    expect(covered(ring, 1, 8)).toEqual([4, 5, 6, 7, 8]);
    expect(ring.size.bytes).toBe(slice(room, 4, 8).reduce((sum, m) => sum + m.bytes, 0));
  });

  it("keeps at most maxBytes less the backfill's share, the oldest going first, and a single larger message alone", () => {
    const room = roomOf(20);
    // Seqs 10..99 have messages of one size (seq and tag have two digits).
    const each = (room[14] as Message).bytes;
    const bounds = { maxBytes: 10 * each, backfillBytes: 4 * each };
    const { ring } = ringOf(bounds);
    ring.append(room);
    expect(ring.size).toEqual({ messages: 6, bytes: 6 * each });
    expect(covered(ring, 1, 20)).toEqual(range(15, 20));

    // A message larger than the live part's share is kept, alone.
    const big = messageEvent(21, JSON.stringify("y".repeat(10 * each)), 0, 21);
    ring.append([big]);
    expect(ring.size).toEqual({ messages: 1, bytes: big.bytes });
    expect(covered(ring, 15, 21)).toEqual([21]);
  });

  it("starts over empty at the seq it is reset to", () => {
    const { ring } = ringOf();
    ring.append(roomOf(5));
    ring.reset(40);
    expect([ring.seq, ring.size.messages, ring.size.bytes]).toEqual([40, 0, 0]);
    // Level at 40: nothing to read below it is held, anything after it is not due yet.
    expect([ring.covers(40), ring.covers(41)]).toEqual([false, true]);
  });
});

describe("the backfill", () => {
  /** A ring whose live part holds 51..60 of `room`. */
  function withLive() {
    const room = roomOf(70);
    const r = ringOf({ maxMessages: 10 });
    r.ring.reset(40);
    r.ring.append(slice(room, 41, 60));
    expect(covered(r.ring, 1, 60)).toEqual(range(51, 60));
    return { room, ...r };
  }

  it("keeps what was fetched below the live part, and a fetch that touches it extends it", () => {
    const { room, ring } = withLive();
    ring.backfill(slice(room, 41, 45), null);
    expect(covered(ring, 1, 60)).toEqual([...range(41, 45), ...range(51, 60)]);
    ring.backfill(slice(room, 46, 50), null);
    expect(covered(ring, 1, 60)).toEqual(range(41, 60));
    // One inside it changes nothing.
    ring.backfill(slice(room, 44, 47), null);
    expect(covered(ring, 1, 60)).toEqual(range(41, 60));
    expect(ring.size.messages).toBe(20);
  });

  it("replaces the backfill with a fetch that does not touch it", () => {
    const { room, ring } = withLive();
    ring.backfill(slice(room, 41, 45), null);
    ring.backfill(slice(room, 20, 25), null);
    expect(covered(ring, 1, 60)).toEqual([...range(20, 25), ...range(51, 60)]);
    expect(ring.size.messages).toBe(16);
  });

  it("keeps only what is older than the live part", () => {
    const { room, ring } = withLive();
    const before = ring.size;
    ring.backfill(slice(room, 53, 58), null);
    expect(ring.size).toEqual(before);
    ring.backfill(slice(room, 47, 56), null);
    expect(covered(ring, 1, 60)).toEqual(range(47, 60));
    expect(ring.size.messages).toBe(14);
  });

  it("moves forward past its bound: extended towards the live part, the oldest go", () => {
    const room = roomOf(70);
    // Seqs 10..99 have messages of one size (seq and tag have two digits).
    const each = (room[40] as Message).bytes;
    const { ring } = ringOf({ maxMessages: 10, maxBytes: 100 * each, backfillBytes: 5 * each });
    ring.reset(40);
    ring.append(slice(room, 41, 60));
    ring.backfill(slice(room, 41, 45), null);
    expect(covered(ring, 1, 50)).toEqual(range(41, 45));
    // A cursor that read 41..45 fetches what follows: the backfill holds 5 messages, the newest.
    ring.backfill(slice(room, 46, 48), null);
    expect(covered(ring, 1, 50)).toEqual(range(44, 48));
    expect(ring.size.messages).toBe(15);
  });

  it("keeps the first message of a fetch larger than its bound, which the sockets that asked need", () => {
    const room = roomOf(70);
    const each = (room[40] as Message).bytes;
    const { ring } = ringOf({ maxMessages: 10, maxBytes: 100 * each, backfillBytes: 5 * each });
    ring.reset(40);
    ring.append(slice(room, 41, 60));
    // A fetch returns its budget and a message more: six, for a backfill of five.
    ring.backfill(slice(room, 11, 16), null);
    expect(ring.covers(11)).toBe(true);
    expect(covered(ring, 1, 40)).toEqual(range(11, 15));
    // A cursor further back fetches again: the new, older messages are kept, the newest go.
    ring.backfill(slice(room, 5, 10), null);
    expect(ring.covers(5)).toBe(true);
    expect(covered(ring, 1, 40)).toEqual(range(5, 9));
  });

  it("keeps nothing the root's history reported lost, and serves those seqs as lost", () => {
    const { room, ring } = withLive();
    ring.backfill(slice(room, 46, 50), { from: 30, to: 45 });
    // Up to 45 as lost, 46..50 held: everything up to the live part can be answered without the root.
    expect(covered(ring, 1, 60)).toEqual(range(1, 60));
    ring.backfill(slice(room, 41, 50), null);
    // 41..45 are lost, not held: the read says so rather than sending them.
    const read = ring.read(41, Number.POSITIVE_INFINITY, LIMITS);
    expect(read.lost).toEqual({ from: 41, to: 45 });
    expect(seqsOf(read)).toEqual(range(46, 60));
  });
});

describe("the total bound", () => {
  /** A room of messages of random sizes, and what is done to a ring: pushes of the next messages, or backfills of older ones. */
  const scenario = fc.record({
    sizes: fc.array(fc.integer({ min: 0, max: 400 }), { minLength: 30, maxLength: 120 }),
    steps: fc.array(
      fc.oneof(
        fc.record({ push: fc.integer({ min: 1, max: 6 }) }),
        fc.record({ backfillFrom: fc.nat(), backfillCount: fc.integer({ min: 1, max: 15 }) }),
      ),
      { maxLength: 60 },
    ),
    maxBytes: fc.integer({ min: 200, max: 4000 }),
    backfillShare: fc.double({ min: 0.05, max: 0.9, noNaN: true }),
    maxMessages: fc.integer({ min: 1, max: 40 }),
  });

  it("never holds more than maxBytes, plus one message for each part whose share a single message exceeds", () => {
    fc.assert(
      fc.property(scenario, ({ sizes, steps, maxBytes, backfillShare, maxMessages }) => {
        const room = roomOf(sizes.length, (seq) => sizes[seq - 1] as number);
        const backfillBytes = Math.max(1, Math.floor(maxBytes * backfillShare));
        const { ring } = ringOf({ maxMessages, maxBytes, backfillBytes });
        const largest = Math.max(...room.map((m) => m.bytes));
        const liveShare = maxBytes - backfillBytes;
        // A part whose share every message fits never goes over it.
        const slack = (largest > liveShare ? largest : 0) + (largest > backfillBytes ? largest : 0);
        for (const step of steps) {
          if ("push" in step) {
            ring.append(slice(room, ring.seq + 1, Math.min(room.length, ring.seq + step.push)));
          } else if (ring.seq > 0) {
            const from = 1 + (step.backfillFrom % ring.seq);
            ring.backfill(slice(room, from, Math.min(ring.seq, from + step.backfillCount - 1)), null);
          }
          expect(ring.size.bytes).toBeLessThanOrEqual(maxBytes + slack);
          // Whatever it holds, it reads back as the room's messages, in order.
          for (const seq of covered(ring, 1, ring.seq)) {
            const read = ring.read(seq, 1, LIMITS);
            expect(read.runs[0]?.text).toBe((room[seq - 1] as Message).event);
          }
        }
      }),
      { numRuns: 150 },
    );
  });
});

describe("reading", () => {
  it("reads runs of one message from `from` on until the budget is reached", () => {
    const room = roomOf(10);
    const each = (room[0] as Message).bytes;
    const { ring, misses } = ringOf();
    ring.append(room);
    const read = ring.read(3, 2 * each + 1, LIMITS);
    // The budget stops after the message that reaches it.
    expect(seqsOf(read)).toEqual([3, 4, 5]);
    expect(read.runs.map((r) => [r.count, r.lastTag, r.text])).toEqual(slice(room, 3, 5).map((m) => [1, m.tag, m.event]));
    expect(read).toMatchObject({ nextSeq: 6, lost: null, rowsRead: 0 });
    expect(seqsOf(ring.read(9, Number.POSITIVE_INFINITY, LIMITS))).toEqual([9, 10]);
    // Nothing after the latest message, and nothing to fetch for it.
    expect(ring.read(11, Number.POSITIVE_INFINITY, LIMITS)).toMatchObject({ runs: [], nextSeq: 11 });
    expect(misses).toEqual([]);
  });

  it("reports a message it does not hold through onMiss and stops there, with what it read before", () => {
    const room = roomOf(30);
    const { ring, misses } = ringOf({ maxMessages: 10 });
    ring.reset(5);
    ring.append(slice(room, 6, 30));
    ring.backfill(slice(room, 12, 15), null);
    const read = ring.read(12, Number.POSITIVE_INFINITY, LIMITS);
    expect(seqsOf(read)).toEqual([12, 13, 14, 15]);
    expect(read.nextSeq).toBe(16);
    expect(misses).toEqual([16]);
    expect(ring.covers(16)).toBe(false);
    // The leaf fetches it; the read then goes on into the live part.
    ring.backfill(slice(room, 16, 20), null);
    expect(seqsOf(ring.read(16, Number.POSITIVE_INFINITY, LIMITS))).toEqual(range(16, 30));
    expect(misses).toEqual([16]);
  });

  it("skips past what the root's history lost, reports it once, and never claims a loss of its own", () => {
    const room = roomOf(30);
    const { ring, misses } = ringOf();
    ring.append(slice(room, 1, 10));
    // The root says 11..20 are gone and the leaf moves past them.
    ring.skipLost(20);
    expect(ring.seq).toBe(20);
    expect(ring.size.messages).toBe(0);
    ring.append(slice(room, 21, 25));
    expect(covered(ring, 1, 25)).toEqual(range(1, 25));
    const read = ring.read(3, Number.POSITIVE_INFINITY, LIMITS);
    expect(read.lost).toEqual({ from: 3, to: 20 });
    expect(seqsOf(read)).toEqual(range(21, 25));
    expect(misses).toEqual([]);

    // What the ring merely does not hold is a miss, not a loss.
    const other = ringOf({ maxMessages: 3 });
    other.ring.append(slice(room, 1, 10));
    const missed = other.ring.read(2, Number.POSITIVE_INFINITY, LIMITS);
    expect(missed).toMatchObject({ runs: [], lost: null, nextSeq: 2 });
    expect(other.misses).toEqual([2]);
  });

  it("keeps the messages it holds when told of a loss below them", () => {
    const room = roomOf(30);
    const { ring } = ringOf();
    ring.append(slice(room, 1, 12));
    ring.skipLost(4);
    expect(ring.seq).toBe(12);
    const read = ring.read(1, Number.POSITIVE_INFINITY, LIMITS);
    expect(read.lost).toEqual({ from: 1, to: 4 });
    expect(seqsOf(read)).toEqual(range(5, 12));
  });
});
