import { describe, expect, it } from "vitest";
import { checkSoak, cleanRecord, CORRUPTIONS, selfCheck } from "../bench/fault-soak-check";

/**
 * The checker of the fault soak (load/bench/fault-soak.ts) on synthetic records only (no server): a clean record passes, and
 * every corruption (a skipped seq, a delivery twice, a lost acknowledged publish...) is reported as what it is.
 */
describe("the fault soak's checker", () => {
  it("passes a clean record and counts what it checked", () => {
    const result = checkSoak(cleanRecord());
    expect(result.violations).toEqual({});
    expect(result.ok).toBe(true);
    expect(result.counts).toMatchObject({ rooms: 2, historyMessages: 6, publishesChecked: 4, deliveriesChecked: 12, broadcastDeliveries: 2, lost: 0, duplicates: 0, outOfOrder: 0, gaps: 0, resumes: 2 });
  });

  for (const corruption of CORRUPTIONS) {
    it(`reports ${corruption.name} as "${corruption.expect}"`, () => {
      const record = cleanRecord();
      corruption.corrupt(record);
      const result = checkSoak(record);
      expect(result.ok).toBe(false);
      expect(result.violations[corruption.expect]).toBeGreaterThan(0);
    });
  }

  it("counts one skipped seq and one duplicated delivery in one record", () => {
    const record = cleanRecord();
    const events = record.readers[0]!.events;
    events.splice(2, 1); // seq 2 never delivered
    events.push({ ...events[2]! }); // seq 3 twice
    const result = checkSoak(record);
    expect(result.counts.gaps).toBe(1);
    expect(result.counts.duplicates).toBe(1);
    expect(result.examples.gap).toEqual(["a-0: 2-2 never delivered"]);
  });

  it("self-check: every case as expected", () => {
    const cases = selfCheck();
    expect(cases.filter((c) => !c.ok)).toEqual([]);
    expect(cases).toHaveLength(CORRUPTIONS.length + 1);
  });
});
