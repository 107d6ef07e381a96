import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DEFAULT_BACKOFF, backoffCeiling, backoffDelay, type BackoffOptions } from "../../client-sdk/src/backoff";

const options = fc
  .record({
    initialDelayMs: fc.integer({ min: 1, max: 10_000 }),
    extra: fc.integer({ min: 0, max: 100_000 }),
    factor: fc.double({ min: 1, max: 4, noNaN: true }),
  })
  .map(({ initialDelayMs, extra, factor }): BackoffOptions => ({ initialDelayMs, maxDelayMs: initialDelayMs + extra, factor }));

describe("backoffDelay (full jitter)", () => {
  it("stays within [0, min(max, initial * factor^attempt))", () => {
    fc.assert(
      fc.property(options, fc.integer({ min: 0, max: 10_000 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (o, attempt, r) => {
        const ceiling = backoffCeiling(attempt, o);
        const delay = backoffDelay(attempt, o, () => r);
        expect(Number.isInteger(delay)).toBe(true);
        expect(delay).toBeGreaterThanOrEqual(0);
        expect(delay).toBeLessThan(ceiling);
        expect(ceiling).toBeLessThanOrEqual(o.maxDelayMs);
        expect(ceiling).toBeLessThanOrEqual(o.initialDelayMs * Math.pow(o.factor, attempt) + 1e-6);
      }),
    );
  });

  it("has a ceiling that never shrinks with more attempts and reaches the maximum", () => {
    fc.assert(
      fc.property(options, fc.integer({ min: 0, max: 1000 }), (o, attempt) => {
        expect(backoffCeiling(attempt + 1, o)).toBeGreaterThanOrEqual(backoffCeiling(attempt, o));
      }),
    );
    expect(backoffCeiling(0, DEFAULT_BACKOFF)).toBe(DEFAULT_BACKOFF.initialDelayMs);
    expect(backoffCeiling(1, DEFAULT_BACKOFF)).toBe(DEFAULT_BACKOFF.initialDelayMs * 2);
    expect(backoffCeiling(1_000_000, DEFAULT_BACKOFF)).toBe(DEFAULT_BACKOFF.maxDelayMs);
  });

  it("spreads delays over the whole window rather than bunching at the top", () => {
    const o: BackoffOptions = { initialDelayMs: 1000, maxDelayMs: 8000, factor: 2 };
    const samples = Array.from({ length: 20_000 }, () => backoffDelay(10, o));
    const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
    // Uniform on [0, 8000): mean 4000, standard error ~16 ms.
    expect(mean).toBeGreaterThan(3800);
    expect(mean).toBeLessThan(4200);
    expect(Math.min(...samples)).toBeLessThan(400);
    expect(Math.max(...samples)).toBeGreaterThan(7600);
  });
});
