import { describe, expect, it } from "vitest";
import { CLOUDFLARE_PRICING } from "../src/capacity/pricing";
import { shardedFanout, socketsPerLeafFor, type ShardShape } from "../src/capacity/sharded";
import { DEFAULT_SHARD_COSTS } from "../src/capacity/sharded-inputs";

const shape = (subscribers: number, messagesPerSecond: number, shardSockets = 0): ShardShape => ({
  subscribers,
  messagesPerSecond,
  shardSockets,
  leafBudget: 0.5,
  acksPerSocketAt: (f) => f / (1 + f * 0.1),
  sessionSeconds: 3600,
  pingsPerSocketPerSecond: 1 / 25,
});

describe("the sharded room model", () => {
  it("places every subscriber, no object above the shard size", () => {
    for (const [n, rate, p] of [[100_000, 1, 2000], [1_000_000, 10, 3000], [15_000, 2, 2000], [1500, 1, 2000]] as const) {
      const r = shardedFanout(shape(n, rate, p), DEFAULT_SHARD_COSTS, CLOUDFLARE_PRICING);
      expect(r.rootSockets + r.leaves * r.socketsPerLeaf).toBeGreaterThanOrEqual(n);
      expect(Math.max(r.rootSockets, r.socketsPerLeaf)).toBeLessThanOrEqual(p);
    }
    expect(shardedFanout(shape(1500, 1, 2000), DEFAULT_SHARD_COSTS, CLOUDFLARE_PRICING).leaves).toBe(0);
  });

  it("chooses fewer sockets per leaf at a higher rate, so a leaf's thread keeps its budget", () => {
    const slow = socketsPerLeafFor(1, DEFAULT_SHARD_COSTS, shape(1, 1));
    const fast = socketsPerLeafFor(10, DEFAULT_SHARD_COSTS, shape(1, 10));
    expect(fast).toBeLessThan(slow);
    const r = shardedFanout(shape(100_000, 10), DEFAULT_SHARD_COSTS, CLOUDFLARE_PRICING);
    expect(r.leafCpuShare).toBeLessThanOrEqual(0.55);
  });

  it("coalesces messages into flushes once the root's pushes fill its thread, and needs a third level past 1,000 leaves", () => {
    const busy = shardedFanout({ ...shape(1_000_000, 10, 1000), rootSockets: 0 }, DEFAULT_SHARD_COSTS, CLOUDFLARE_PRICING);
    expect(busy.messagesPerFlush).toBeGreaterThan(1);
    expect(busy.flushesPerSecond).toBeLessThan(10);
    expect(busy.needsThirdLevel).toBe(false);
    const small = shardedFanout(shape(100_000, 1, 2000), DEFAULT_SHARD_COSTS, CLOUDFLARE_PRICING);
    expect(small.messagesPerFlush).toBe(1);
    expect(small.needsThirdLevel).toBe(false);
    expect(shardedFanout(shape(40_000_000, 1, 32_000), DEFAULT_SHARD_COSTS, CLOUDFLARE_PRICING).needsThirdLevel).toBe(true);
  });

  it("bills one push per leaf per flush", () => {
    const r = shardedFanout(shape(100_000, 1, 2000), DEFAULT_SHARD_COSTS, CLOUDFLARE_PRICING);
    const pushes = r.monthly.find((l) => l.item.includes("leaf pushes"));
    expect(pushes?.quantity).toBeCloseTo(r.leaves * r.flushesPerSecond * 30 * 24 * 3600, -3);
  });
});
