import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Histogram } from "../src/stats/histogram";
import { nearestRank, percentileOfSorted, summarize } from "../src/stats/percentile";
import { classifyConnectError, isClientSideCause, refusalCode } from "../src/stats/failures";
import { SeqSet } from "../src/stats/seq-set";

describe("percentiles (nearest rank)", () => {
  it("returns observed values, never interpolations", () => {
    const sorted = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    expect(percentileOfSorted(sorted, 50)).toBe(5);
    expect(percentileOfSorted(sorted, 90)).toBe(9);
    expect(percentileOfSorted(sorted, 95)).toBe(10);
    expect(percentileOfSorted(sorted, 99)).toBe(10);
    expect(percentileOfSorted(sorted, 100)).toBe(10);
    expect(percentileOfSorted(sorted, 0)).toBe(1);
  });

  it("p99 of 100 values is the 99th, of 1000 values the 990th", () => {
    const hundred = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentileOfSorted(hundred, 99)).toBe(99);
    const thousand = Array.from({ length: 1000 }, (_, i) => i + 1);
    expect(percentileOfSorted(thousand, 99)).toBe(990);
    expect(percentileOfSorted(thousand, 99.9)).toBe(999);
  });

  it("is NaN for no values and the value itself for one", () => {
    expect(percentileOfSorted([], 50)).toBeNaN();
    expect(percentileOfSorted([7], 1)).toBe(7);
    expect(percentileOfSorted([7], 99)).toBe(7);
  });

  it("rank is within 1..n and monotonic in p", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10_000 }), fc.double({ min: 0, max: 100, noNaN: true }), fc.double({ min: 0, max: 100, noNaN: true }), (n, p, q) => {
        const [lo, hi] = p <= q ? [p, q] : [q, p];
        const a = nearestRank(n, lo);
        const b = nearestRank(n, hi);
        return a >= 1 && b <= n && a <= b;
      }),
    );
  });

  it("summarize sorts its input", () => {
    const s = summarize([30, 10, 20]);
    expect(s).toMatchObject({ count: 3, min: 10, p50: 20, max: 30, mean: 20 });
  });
});

describe("Histogram", () => {
  it("agrees with percentiles of the raw values", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 500 }), { minLength: 1, maxLength: 400 }), fc.constantFrom(1, 50, 90, 95, 99, 99.9, 100), (values, p) => {
        const h = new Histogram(1000);
        for (const v of values) h.add(v);
        const sorted = [...values].sort((a, b) => a - b);
        return h.percentile(p) === percentileOfSorted(sorted, p);
      }),
    );
  });

  it("merging histograms equals one histogram of the pooled values", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 300 })), fc.array(fc.integer({ min: 0, max: 300 })), (a, b) => {
        const ha = new Histogram(300);
        const hb = new Histogram(300);
        const all = new Histogram(300);
        for (const v of a) (ha.add(v), all.add(v));
        for (const v of b) (hb.add(v), all.add(v));
        const merged = Histogram.fromJSON(ha.toJSON()).merge(hb.toJSON());
        return merged.count === all.count && [50, 95, 99, 100].every((p) => Object.is(merged.percentile(p), all.percentile(p)));
      }),
    );
  });

  it("keeps the exact max for values above its ceiling and reports them there", () => {
    const h = new Histogram(100);
    for (let i = 0; i < 98; i++) h.add(10);
    h.add(250);
    h.add(900);
    expect(h.max).toBe(900);
    expect(h.percentile(50)).toBe(10);
    expect(h.percentile(100)).toBe(900);
    const cdf = h.cdf();
    expect(cdf[cdf.length - 1]).toEqual([900, 1]);
  });

  it("counts negative latencies (clock skew) as zero rather than dropping them", () => {
    const h = new Histogram(10);
    h.add(-3);
    expect(h.count).toBe(1);
    expect(h.min).toBe(0);
  });

  it("refuses to merge different ceilings", () => {
    expect(() => new Histogram(10).merge(new Histogram(20))).toThrow(RangeError);
  });
});

describe("SeqSet", () => {
  it("adds once, grows, ignores seqs below its base", () => {
    const set = new SeqSet(100, 8);
    expect(set.add(99)).toBe(false);
    expect(set.add(100)).toBe(true);
    expect(set.add(100)).toBe(false);
    expect(set.add(5000)).toBe(true);
    expect(set.has(5000)).toBe(true);
    expect(set.has(4999)).toBe(false);
    expect(set.size).toBe(2);
    expect(set.countInRange(0, 10_000)).toBe(2);
    expect(set.countInRange(101, 4999)).toBe(0);
  });
});

describe("connect failure causes", () => {
  it("names client-side limits as the client's", () => {
    const cause = classifyConnectError(Object.assign(new Error("connect EADDRNOTAVAIL"), { code: "EADDRNOTAVAIL" }));
    expect(cause).toBe("client EADDRNOTAVAIL");
    expect(isClientSideCause(cause)).toBe(true);
    expect(classifyConnectError(Object.assign(new Error("x"), { code: "EMFILE" }))).toBe("client EMFILE");
  });

  it("names the server's answers and network failures", () => {
    expect(classifyConnectError(undefined, 503)).toBe("http 503");
    expect(classifyConnectError(new Error("Unexpected server response: 429"))).toBe("http 429");
    expect(classifyConnectError(Object.assign(new Error("refused"), { code: "ECONNREFUSED" }))).toBe("refused");
    expect(classifyConnectError(new Error("Opening handshake has timed out"))).toBe("timeout");
    expect(isClientSideCause("refused")).toBe(false);
  });

  it("names a refusal by its JSON body's error, so a server's limit reads apart from its other answers", () => {
    expect(refusalCode('{"error":"over_capacity","message":"the server is at its connection ceiling; retry later"}')).toBe("over_capacity");
    expect(classifyConnectError(undefined, 503, refusalCode('{"error":"room_full","message":"…"}'))).toBe("http 503 room_full");
    for (const body of ["", "not json", '{"error":42}', '{"error":"<script>"}', "[]"]) expect(refusalCode(body), body).toBeUndefined();
    expect(classifyConnectError(undefined, 503, refusalCode("busy"))).toBe("http 503");
  });
});
