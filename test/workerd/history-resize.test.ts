import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { messageEvent } from "../../durable-objects/engine/message";
import { History, type HistoryRead } from "../../durable-objects/room/storage/history";
import { MetaStore } from "../../durable-objects/room/storage/meta-store";
import type { Env } from "../../worker/env";

/**
 * A room's ring size changes (HISTORY_MAX_MESSAGES, or the room's HISTORY_RULES
 * rule) while the room has history: the room keeps its seq and epoch, and the
 * messages still within the new bounds.
 */

const bindings = env as unknown as Env;
const WIDE = { maxBytes: 1 << 20, maxEvents: 1000 };

function seqsOf(read: HistoryRead): number[] {
  const seqs: number[] = [];
  for (const run of read.runs) for (let s = run.firstSeq; s <= run.lastSeq; s++) seqs.push(s);
  return seqs;
}

function opener(state: DurableObjectState, maxAgeMs = 600_000): (size: number) => History {
  return (size) => new History(state.storage, new MetaStore(state.storage.sql), { maxMessages: size, maxAgeMs });
}

function publishInto(history: History, count: number, ts: number): void {
  for (let i = 0; i < count; i++) {
    const seq = history.seq + 1;
    history.append([messageEvent(seq, JSON.stringify({ n: seq }), ts, seq)], ts);
  }
}

const rowsIn = (state: DurableObjectState) => state.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM log").one().n;

describe("a ring whose size changes", () => {
  it("grows: the seq and epoch stay, the messages it held are still served, and new ones follow", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("resize-grow"));
    await runInDurableObject(stub, (_instance, state) => {
      const open = opener(state);
      const now = Date.now();
      const small = open(10);
      publishInto(small, 25, now);
      const grown = open(100);
      expect(grown.seq).toBe(25);
      expect(grown.epoch).toBe(small.epoch);
      expect(seqsOf(grown.read(16, Number.POSITIVE_INFINITY, WIDE))).toEqual([16, 17, 18, 19, 20, 21, 22, 23, 24, 25]);
      publishInto(grown, 1, now);
      const again = open(100);
      expect(again.seq).toBe(26);
      // Past the new size's first lap too.
      publishInto(again, 150, now);
      expect(open(100).seq).toBe(176);
      expect(seqsOf(open(100).read(77, Number.POSITIVE_INFINITY, WIDE))).toEqual(Array.from({ length: 100 }, (_, i) => 77 + i));
    });
  });

  it("shrinks: the seq stays, the newest messages are kept, older ones are reported lost", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("resize-shrink"));
    await runInDurableObject(stub, (_instance, state) => {
      const open = opener(state);
      const now = Date.now();
      publishInto(open(10), 25, now);
      const shrunk = open(5);
      expect(shrunk.seq).toBe(25);
      expect(rowsIn(state)).toBe(5);
      const read = shrunk.read(18, Number.POSITIVE_INFINITY, WIDE);
      expect(read.lost).toEqual({ from: 18, to: 20 });
      expect(seqsOf(read)).toEqual([21, 22, 23, 24, 25]);
      publishInto(shrunk, 7, now);
      expect(open(5).seq).toBe(32);
      expect(seqsOf(open(5).read(28, Number.POSITIVE_INFINITY, WIDE))).toEqual([28, 29, 30, 31, 32]);
    });
  });

  it("carries only what is within the age bound, and always the newest row, which holds the seq", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("resize-aged"));
    await runInDurableObject(stub, (_instance, state) => {
      const long = Date.now() - 3_600_000;
      publishInto(opener(state)(10), 12, long);
      const resized = opener(state, 60_000)(50);
      expect(resized.seq).toBe(12);
      expect(rowsIn(state)).toBe(1);
      const read = resized.read(1, Number.POSITIVE_INFINITY, WIDE);
      expect(read.runs).toEqual([]);
      expect(read.lost).toEqual({ from: 1, to: 12 });
      publishInto(resized, 1, Date.now());
      expect(opener(state, 60_000)(50).seq).toBe(13);
    });
  });

  it("leaves a ring alone that the new size reads right: one not yet round, read with a larger size", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("resize-first-lap"));
    await runInDurableObject(stub, (_instance, state) => {
      const now = Date.now();
      publishInto(opener(state)(10), 6, now);
      const slots = () => state.storage.sql.exec<{ slot: number; row: number }>("SELECT slot, row FROM log ORDER BY slot").toArray();
      const before = slots();
      const larger = opener(state)(1000);
      expect(larger.seq).toBe(6);
      expect(slots()).toEqual(before);
      expect(seqsOf(larger.read(1, Number.POSITIVE_INFINITY, WIDE))).toEqual([1, 2, 3, 4, 5, 6]);
    });
  });
});
