import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Histogram } from "../src/stats/histogram";
import { ClientLedger, addTotals, emptyTotals, lostOf } from "../src/stats/ledger";
import { isSlowClient } from "../src/client/messages";

const DEADLINE = 1000;

function ledgerAt(seq = 0, epoch = "e1"): { ledger: ClientLedger; latency: Histogram } {
  const ledger = new ClientLedger(DEADLINE, 64);
  ledger.welcome(epoch, seq);
  return { ledger, latency: new Histogram(DEADLINE) };
}

describe("delivery matching by room seq", () => {
  it("records the latency of each message against its own ts, not the next message's", () => {
    const { ledger, latency } = ledgerAt();
    // seq 2 arrives before seq 1: each is matched to its own publish time.
    expect(ledger.record(2, 1_000, 1_050, latency)).toBe("in-time");
    expect(ledger.record(1, 900, 1_060, latency)).toBe("in-time");
    expect(latency.toJSON().buckets).toEqual([
      [50, 1],
      [160, 1],
    ]);
    const totals = ledger.settle([{ first: 1, last: 2 }]);
    expect(totals).toMatchObject({ expected: 2, inTime: 2, never: 0, outOfOrder: 1, gaps: 1, gapSeqs: 1 });
  });

  it("counts messages past the deadline as lost (late), outside the latency percentiles", () => {
    const { ledger, latency } = ledgerAt();
    expect(ledger.record(1, 0, 10, latency)).toBe("in-time");
    expect(ledger.record(2, 0, DEADLINE + 1, latency)).toBe("late");
    expect(latency.count).toBe(1);
    const totals = ledger.settle([{ first: 1, last: 2 }]);
    expect(totals).toMatchObject({ expected: 2, inTime: 1, late: 1, never: 0 });
    expect(lostOf(totals)).toBe(1);
  });

  it("counts never-received messages as lost and the jump as a gap", () => {
    const { ledger, latency } = ledgerAt();
    ledger.record(1, 0, 1, latency);
    ledger.record(5, 0, 1, latency); // 2, 3, 4 dropped
    const totals = ledger.settle([{ first: 1, last: 6 }]); // 6 never came either
    expect(totals).toMatchObject({ expected: 6, inTime: 2, never: 4, gaps: 1, gapSeqs: 3 });
  });

  it("counts duplicates once, and ignores history from before the welcome", () => {
    const { ledger, latency } = ledgerAt(10);
    expect(ledger.record(9, 0, 1, latency)).toBe("stale");
    expect(ledger.record(11, 0, 1, latency)).toBe("in-time");
    expect(ledger.record(11, 0, 1, latency)).toBe("duplicate");
    const totals = ledger.settle([{ first: 11, last: 11 }]);
    expect(totals).toMatchObject({ expected: 1, inTime: 1, duplicates: 1, never: 0 });
    expect(latency.count).toBe(1);
  });

  it("resumes from the highest contiguous seq after a reconnect with the same epoch", () => {
    const { ledger, latency } = ledgerAt();
    ledger.record(1, 0, 1, latency);
    ledger.record(2, 0, 1, latency);
    ledger.record(4, 0, 1, latency);
    expect(ledger.resumePoint()).toEqual({ since: 2, epoch: "e1" });
    ledger.welcome("e1", 6); // same epoch: same segment, nothing forgotten
    ledger.record(3, 0, 1, latency);
    expect(ledger.resumePoint()).toEqual({ since: 4, epoch: "e1" });
    expect(ledger.settle([{ first: 1, last: 4 }])).toMatchObject({ expected: 4, inTime: 4, never: 0 });
  });

  it("accounts history generations separately when the epoch changes (history lost)", () => {
    const { ledger, latency } = ledgerAt(0, "old");
    ledger.record(1, 0, 1, latency);
    ledger.record(2, 0, 1, latency);
    ledger.welcome("new", 1); // the server restarted without history and already published seq 1 again
    ledger.record(2, 0, 1, latency);
    const totals = ledger.settle([
      { first: 1, last: 3 },
      { first: 1, last: 2 },
    ]);
    // old: 1,2 of 3 ; new: only 2 of 1..2 (seq 1 of the new epoch was published before the client was back)
    expect(totals).toMatchObject({ expected: 5, inTime: 3, never: 2 });
  });

  it("treats a generation the client never saw as entirely lost", () => {
    const { ledger, latency } = ledgerAt(0, "a");
    ledger.record(1, 0, 1, latency);
    expect(ledger.settle([{ first: 1, last: 1 }, { first: 1, last: 5 }])).toMatchObject({ expected: 6, inTime: 1, never: 5 });
  });

  it("counts seqs beyond what the publisher saw accepted as unconfirmed, not as delivered", () => {
    const { ledger, latency } = ledgerAt();
    ledger.record(1, 0, 1, latency);
    ledger.record(2, 0, 1, latency);
    expect(ledger.settle([{ first: 1, last: 1 }])).toMatchObject({ expected: 1, inTime: 1, unconfirmed: 1 });
  });

  it("records lost events declared by the server", () => {
    const { ledger } = ledgerAt();
    ledger.lostEvent(3, 7);
    expect(ledger.settle([])).toMatchObject({ lostEvents: 1, lostEventSeqs: 5 });
  });

  it("always balances: expected = in time + late + never", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 60 }),
        fc.array(fc.record({ seq: fc.integer({ min: 0, max: 80 }), delay: fc.integer({ min: 0, max: 2 * DEADLINE }) }), { maxLength: 200 }),
        (last, receipts) => {
          const { ledger, latency } = ledgerAt();
          for (const r of receipts) ledger.record(r.seq, 0, r.delay, latency);
          const t = ledger.settle([{ first: 1, last }]);
          const unique = new Set(receipts.map((r) => r.seq).filter((s) => s >= 1 && s <= last)).size;
          return t.expected === last && t.inTime + t.late + t.never === t.expected && t.inTime + t.late === unique;
        },
      ),
    );
  });

  it("adds totals field by field", () => {
    const a = { ...emptyTotals(), expected: 3, inTime: 2, never: 1 };
    const b = { ...emptyTotals(), expected: 4, late: 4 };
    expect(addTotals(a, b)).toMatchObject({ expected: 7, inTime: 2, late: 4, never: 1 });
  });
});

describe("client behaviour helpers", () => {
  it("picks about the requested share of slow clients, the same in every process", () => {
    let slow = 0;
    for (let i = 0; i < 10_000; i++) if (isSlowClient(i, 0.1)) slow++;
    expect(slow).toBeGreaterThan(900);
    expect(slow).toBeLessThan(1100);
    expect(isSlowClient(123, 0.1)).toBe(isSlowClient(123, 0.1));
    expect(isSlowClient(5, 0)).toBe(false);
    expect(isSlowClient(5, 1)).toBe(true);
  });

  it("picks exactly the requested number of slow clients, spread evenly", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3000 }), fc.integer({ min: 0, max: 3000 }), (total, wanted) => {
        const count = Math.min(wanted, total);
        const slow: number[] = [];
        for (let i = 0; i < total; i++) if (isSlowClient(i, 0.5, count, total)) slow.push(i);
        if (slow.length !== count) return false;
        // Evenly spread: consecutive picks are never closer than floor(total / count) apart.
        const spacing = count > 0 ? Math.floor(total / count) : 0;
        return slow.every((index, k) => k === 0 || index - (slow[k - 1] as number) >= spacing);
      }),
    );
    let slow = 0;
    for (let i = 0; i < 1020; i++) if (isSlowClient(i, 0.0196, 20, 1020)) slow++;
    expect(slow).toBe(20);
  });
});
