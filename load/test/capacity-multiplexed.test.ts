/**
 * The capacity model of multiplexed connections: the same subscriptions in
 * four designs (hubs, an object per connection, a Worker-held socket, and
 * single-room sockets), from explicit per-step costs.
 */
import { describe, expect, it } from "vitest";
import { breakEvenRoomRate, hubsFollowing, hubsFor, multiplexedFanout, type MuxCosts, type MuxShape } from "../src/capacity/multiplexed";
import { CLOUDFLARE_PRICING, SECONDS_PER_MONTH } from "../src/capacity/pricing";

const costs: MuxCosts = { sendUs: 20, flushUs: 100, pushIssueUs: 50, pushReceiveUs: 50, ackUs: 0, relayUs: 20, rpcLatencyMs: 1, workerCpuMsPerRequest: 1 };

/** 1,000 connections × 20 of 400 rooms of 50 followers, 2 msg/s per room: the benchmark's shape at full size. */
const shape: MuxShape = {
  connections: 1000,
  roomsPerConnection: 20,
  followersPerRoom: 50,
  roomRate: 2,
  publishVia: "http",
  hubs: 16,
  maxConnectionsPerHub: 2000,
  hubBudget: 0.5,
  rowsPerMessage: 1,
  sessionSeconds: 3600,
  pingsBilled: true,
  pingIntervalSeconds: 25,
  acksAt: () => 0,
};

const design = (e: ReturnType<typeof multiplexedFanout>, name: string) => {
  const d = e.designs.find((x) => x.design === name);
  if (!d) throw new Error(`no design ${name}`);
  return d;
};

describe("multiplexed connections: the model", () => {
  it("a room's followers placed at random reach H·(1 − (1 − 1/H)^F) hubs", () => {
    expect(hubsFollowing(16, 50)).toBeCloseTo(16 * (1 - (15 / 16) ** 50), 9);
    expect(hubsFollowing(16, 50)).toBeCloseTo(15.37, 2);
    expect(hubsFollowing(4, 50)).toBeCloseTo(4, 3);
    expect(hubsFollowing(1, 50)).toBe(1);
    expect(hubsFollowing(1024, 50)).toBeCloseTo(48.8, 1);
  });

  it("prices the same subscriptions: 400 rooms, 40,000 deliveries/s, 20,000 single-room sockets", () => {
    const e = multiplexedFanout(shape, costs, CLOUDFLARE_PRICING);
    expect(e.rooms).toBe(400);
    expect(e.deliveriesPerSecond).toBe(40_000);
    expect(design(e, "single-room sockets").clientSockets).toBe(20_000);
    expect(design(e, "hubs").clientSockets).toBe(1000);
    // Hubs: one push per hub that follows a room, per flush; an object per connection: one per follower.
    expect(design(e, "hubs").pushesPerSecond).toBeCloseTo(400 * 2 * hubsFollowing(16, 50), 6);
    expect(design(e, "object per connection").pushesPerSecond).toBe(40_000);
    expect(design(e, "single-room sockets").pushesPerSecond).toBe(0);
    // Every push is a billed request.
    const pushes = design(e, "hubs").monthly.find((l) => l.item.includes("of which pushes"));
    expect(pushes?.quantity).toBeCloseTo(400 * 2 * hubsFollowing(16, 50) * SECONDS_PER_MONTH, 0);
    expect(pushes?.usd).toBeCloseTo(((400 * 2 * hubsFollowing(16, 50) * SECONDS_PER_MONTH) / 1e6) * 0.15, 6);
  });

  it("CPU per delivery: a send, plus a push's share (pushes per flush ÷ followers)", () => {
    const e = multiplexedFanout(shape, costs, CLOUDFLARE_PRICING);
    const perRoom = hubsFollowing(16, 50);
    expect(design(e, "hubs").cpuPerDeliveryUs).toBeCloseTo(20 + (100 + perRoom * 100) / 50, 6);
    expect(design(e, "object per connection").cpuPerDeliveryUs).toBeCloseTo(20 + (100 + 50 * 100) / 50, 6);
    expect(design(e, "single-room sockets").cpuPerDeliveryUs).toBeCloseTo(20 + 100 / 50, 6);
  });

  it("an idle connection-month of single-room sockets is K of the multiplexed one (K upgrades and heartbeats)", () => {
    const e = multiplexedFanout(shape, costs, CLOUDFLARE_PRICING);
    expect(design(e, "single-room sockets").idleConnectionMonthUsd / design(e, "hubs").idleConnectionMonthUsd).toBeCloseTo(20, 9);
    // 720 sessions (Worker + object request each) and 103,680 heartbeats at 20:1, at the marginal prices.
    const expected = (720 * 0.3 + (720 + 103_680 / 20) * 0.15 + 720 * 1 * 0.02) / 1e6;
    expect(design(e, "hubs").idleConnectionMonthUsd).toBeCloseTo(expected, 12);
  });

  it("the Worker-held design cannot hibernate and is over the 6 open connections of an invocation at 20 rooms, not at 5", () => {
    const e = multiplexedFanout(shape, costs, CLOUDFLARE_PRICING);
    const worker = design(e, "Worker-held socket");
    expect(worker.idleHibernates).toBe(false);
    expect(worker.limits.find((l) => l.name.startsWith("internal sockets"))?.ok).toBe(false);
    const five = design(multiplexedFanout({ ...shape, roomsPerConnection: 5, connections: 4000 }, costs, CLOUDFLARE_PRICING), "Worker-held socket");
    expect(five.limits.find((l) => l.name.startsWith("internal sockets"))?.ok).toBe(true);
  });

  it("a lost hub drops its connections, a lost connection object one", () => {
    const e = multiplexedFanout(shape, costs, CLOUDFLARE_PRICING);
    expect(design(e, "hubs").lostObjectDrops).toBeCloseTo(1000 / 16, 9);
    expect(design(e, "object per connection").lostObjectDrops).toBe(1);
  });

  it("chooses hubs that hold the connections at 80% and within their CPU budget", () => {
    const common = { rooms: 40_000, flushes: 0.01, deliveries: 40_000 * 0.01 * 50 };
    expect(hubsFor({ ...shape, hubs: 0, connections: 100_000 }, costs, common)).toBe(Math.ceil(100_000 / 1600));
    expect(hubsFor({ ...shape, hubs: 0 }, costs, { rooms: 400, flushes: 0.01, deliveries: 200 })).toBe(16);
    // 4,000,000 deliveries/s at 20 µs is 80 cores: a hub's half-thread budget needs 160 hubs or more.
    expect(hubsFor({ ...shape, hubs: 0, connections: 100_000 }, costs, { rooms: 40_000, flushes: 2, deliveries: 4_000_000 })).toBeGreaterThanOrEqual(160);
  });

  it("finds the room rate where hubs and single-room sockets cost the same, hubs cheaper below it", () => {
    const idleHeavy: MuxShape = { ...shape, connections: 100_000, hubs: 0 };
    const rate = breakEvenRoomRate(idleHeavy, costs, CLOUDFLARE_PRICING);
    expect(rate).toBeDefined();
    const at = (r: number) => multiplexedFanout({ ...idleHeavy, roomRate: r }, costs, CLOUDFLARE_PRICING);
    const hubs = (r: number) => design(at(r), "hubs").monthlyUsd;
    const single = (r: number) => design(at(r), "single-room sockets").monthlyUsd;
    expect(hubs(rate as number) / single(rate as number)).toBeCloseTo(1, 3);
    expect(hubs((rate as number) / 4)).toBeLessThan(single((rate as number) / 4));
    expect(hubs((rate as number) * 4)).toBeGreaterThan(single((rate as number) * 4));
  });
});
