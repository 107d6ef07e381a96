import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DEFAULT_COSTS, measuredCosts } from "../../load/src/capacity/inputs";
import {
  acksPerConnection,
  cloudflareMonthlyCost,
  cloudflareRoomCeilings,
  deliveriesPerSecond,
  deliveryWireBytes,
  descriptorCeiling,
  largestRoomForCpu,
  lowestCeiling,
  selfHostedCeilings,
  vpsEstimate,
  type CostAssumptions,
  type Host,
  type UnitCosts,
  type Workload,
} from "../../load/src/capacity/model";
import { CLOUDFLARE_PRICING, SECONDS_PER_MONTH } from "../../load/src/capacity/pricing";

const costs: UnitCosts = {
  memoryPerConnectionBytes: 100_000,
  kernelMemoryPerConnectionBytes: 0,
  cpuPerDeliveryUs: 10,
  cpuPerPublishUs: 0,
  handshakesPerSecond: 1000,
};

const host: Host = { name: "test", descriptorLimit: 20_000, memoryBytes: 1e9, serverThreads: 1, linkBitsPerSecond: 8e9 };

const assumptions: CostAssumptions = {
  sessionSeconds: SECONDS_PER_MONTH, // one upgrade per connection per month
  workerCpuMsPerRequest: 1,
  rowsWrittenPerMessage: 1,
  pingsBilled: false,
  pingIntervalSeconds: 25,
  historyMessages: 1000,
  ackBytes: Number.POSITIVE_INFINITY, // no acks
};

describe("capacity arithmetic", () => {
  it("deliveries = connections × messages per connection × fan-out", () => {
    expect(deliveriesPerSecond({ connections: 1000, messagesPerConnection: 2, roomSize: 50, payloadBytes: 10, publishVia: "socket" })).toBe(100_000);
  });

  it("sizes one delivery on the wire: envelope, WebSocket header, packet", () => {
    expect(deliveryWireBytes(10)).toBe(10 + 58 + 2 + 66);
    expect(deliveryWireBytes(1000)).toBe(1000 + 58 + 4 + 66);
  });

  it("finds the CPU-bound room size from m·F·(F·d + p) = 1e6", () => {
    // d = 10 µs, p = 0, m = 1 → F² = 1e5
    expect(largestRoomForCpu(1, 10, 0)).toBeCloseTo(Math.sqrt(1e5), 6);
    const F = largestRoomForCpu(2, 10, 100);
    expect(2 * F * (F * 10 + 100)).toBeCloseTo(1e6, 3);
  });

  it("names the ceiling reached first (highest utilisation) for a self-hosted server", () => {
    const w: Workload = { connections: 5000, messagesPerConnection: 2, roomSize: 10, payloadBytes: 100, publishVia: "socket" };
    const ceilings = selfHostedCeilings(w, costs, host);
    const byName = Object.fromEntries(ceilings.map((c) => [c.resource, c]));
    expect(byName.descriptors?.limit).toBe(descriptorCeiling(20_000));
    expect(byName.memory?.limit).toBeCloseTo(1e9 / 100_000, 6);
    // 20 deliveries/s × 10 µs = 200 µs per connection per second → 5,000 connections per thread
    expect(byName["CPU (deliveries)"]?.limit).toBeCloseTo(5_000, 6);
    expect(byName["CPU (deliveries)"]?.utilization).toBeCloseTo(1, 9);
    expect(lowestCeiling(ceilings).resource).toBe("CPU (deliveries)");
  });

  it("keeps the descriptor reserve the local launcher keeps", () => {
    expect(descriptorCeiling(20_000)).toBe(19_000);
    expect(descriptorCeiling(1024)).toBe(768);
  });

  it("bounds a Cloudflare room by sockets, requests, memory and CPU per object", () => {
    const w: Workload = { connections: 100_000, messagesPerConnection: 2, roomSize: 1000, payloadBytes: 100, publishVia: "socket" };
    const ceilings = cloudflareRoomCeilings(w, { ...costs, cpuPerDeliveryUs: 0.1 }, Number.POSITIVE_INFINITY, 1000);
    const byName = Object.fromEntries(ceilings.map((c) => [c.resource, c]));
    expect(byName["sockets per object"]?.limit).toBe(32_768);
    expect(byName["requests/s per object"]?.limit).toBeCloseTo(500, 6); // 1000 req/s ÷ 2 msgs per socket
    expect(byName["requests/s per object"]?.utilization).toBeCloseTo(2, 6);
    expect(byName["frames/s per object (CPU)"]?.limit).toBeCloseTo(Math.sqrt(1e6 / 0.2), 6);
    expect(lowestCeiling(ceilings).resource).toBe("requests/s per object");
  });

  it("bills incoming socket messages at 20:1 and outgoing ones not at all", () => {
    const w: Workload = { connections: 1000, messagesPerConnection: 1, roomSize: 100, payloadBytes: 100, publishVia: "socket" };
    const est = cloudflareMonthlyCost(w, { ...costs, cpuPerDeliveryUs: 0 }, CLOUDFLARE_PRICING, assumptions);
    const requests = est.lines.find((l) => l.item.startsWith("Durable Object requests"));
    const publishes = 1000 * SECONDS_PER_MONTH;
    expect(requests?.quantity).toBeCloseTo(1000 + publishes / 20, 3);
    expect(requests?.usd).toBeCloseTo(((1000 + publishes / 20 - 1e6) / 1e6) * 0.15, 6);
    expect(est.lines.find((l) => l.item.startsWith("Outgoing"))?.usd).toBe(0);
    expect(est.lines.find((l) => l.item.startsWith("SQLite rows"))?.quantity).toBe(publishes);
  });

  it("bills duration only for the time handlers run", () => {
    const w: Workload = { connections: 100, messagesPerConnection: 0.01, roomSize: 100, payloadBytes: 10, publishVia: "http" };
    // 1 publish/s per room × (100 × 10 µs) = 1 ms per second → 0.1% active
    const est = cloudflareMonthlyCost(w, costs, CLOUDFLARE_PRICING, assumptions);
    expect(est.activeShare).toBeCloseTo(0.001, 9);
    const duration = est.lines.find((l) => l.item.startsWith("Durable Object duration"));
    expect(duration?.quantity).toBeCloseTo(1 * 0.001 * 0.128 * SECONDS_PER_MONTH, 6);
    expect(duration?.usd).toBe(0); // well inside the 400,000 GB-s included
    expect(est.totalUsd).toBeGreaterThanOrEqual(CLOUDFLARE_PRICING.workersPaidMonthly);
  });

  it("counts acks from bytes received and the ack threshold", () => {
    const w: Workload = { connections: 1, messagesPerConnection: 1, roomSize: 10, payloadBytes: 100, publishVia: "socket" };
    expect(acksPerConnection(w, deliveryWireBytes(100) * 10)).toBeCloseTo(1, 9);
  });

  it("sizes a fleet of fixed-price servers by the resource that runs out first", () => {
    const w: Workload = { connections: 25_000, messagesPerConnection: 0, roomSize: 10, payloadBytes: 100, publishVia: "socket" };
    const est = vpsEstimate(w, costs, { ...host, monthlyUsd: 6, memoryBytes: 1e9, transferBytesPerMonth: 1e12, transferOverageUsdPerGb: 0.01 });
    // memory: 10,000 per server → 3 servers; nothing is sent, so no transfer to pay
    expect(est.servers).toBe(3);
    expect(est.monthlyUsd).toBe(18);
    expect(est.bindingResource).toBe("memory");
  });

  it("adds transfer beyond what the servers include", () => {
    const w: Workload = { connections: 100, messagesPerConnection: 1, roomSize: 100, payloadBytes: 100, publishVia: "socket" };
    const offer = { ...host, monthlyUsd: 6, memoryBytes: 1e9, transferBytesPerMonth: 0, transferOverageUsdPerGb: 0.01 };
    const est = vpsEstimate(w, { ...costs, cpuPerDeliveryUs: 0 }, offer);
    const bytes = 100 * 1 * 100 * deliveryWireBytes(100) * SECONDS_PER_MONTH;
    expect(est.outgoingBytesPerMonth).toBeCloseTo(bytes, 0);
    expect(est.transferOverageUsd).toBeCloseTo((bytes / 1e9) * 0.01, 6);
    expect(est.monthlyUsd).toBeCloseTo(6 + (bytes / 1e9) * 0.01, 6);
  });
});

describe("measured inputs from load results", () => {
  it("takes memory and handshakes from connect runs and CPU per delivery from fanout runs", () => {
    const dir = mkdtempSync(join(tmpdir(), "load-capacity-"));
    const report = (scenario: string, summary: Record<string, number>) => ({
      tool: "edge-fanout-load",
      schema: 1,
      scenario,
      runs: [
        { label: "ours", ok: true, summary },
        { label: "baseline", ok: true, summary: { ...summary, serverCpuPerDeliveryUs: 1 } },
      ],
    });
    const connect = join(dir, "connect.json");
    const fanout = join(dir, "fanout.json");
    writeFileSync(connect, JSON.stringify(report("connect", { idleMemoryPerConnectionBytes: 50_000, handshakesPerSecond: 2000, serverCpuPerDeliveryUs: 999 })));
    writeFileSync(fanout, JSON.stringify(report("fanout", { serverCpuPerDeliveryUs: 30, idleMemoryPerConnectionBytes: 1 })));
    const { costs: measured, sources } = measuredCosts([connect, fanout], "ours");
    expect(measured.memoryPerConnectionBytes).toBe(50_000);
    expect(measured.handshakesPerSecond).toBe(2000);
    expect(measured.cpuPerDeliveryUs).toBe(30);
    expect(measured.cpuPerPublishUs).toBe(DEFAULT_COSTS.ours.cpuPerPublishUs);
    expect(sources.cpuPerDeliveryUs).toContain("fanout");
    expect(sources.cpuPerPublishUs).toBe("default");
    expect(measuredCosts([fanout], "baseline").costs.cpuPerDeliveryUs).toBe(1);
  });

  it("refuses files that are not load results", () => {
    const dir = mkdtempSync(join(tmpdir(), "load-capacity-"));
    const file = join(dir, "x.json");
    writeFileSync(file, JSON.stringify({ hello: 1 }));
    expect(() => measuredCosts([file], "ours")).toThrow(/not a load tool JSON result/);
  });
});
