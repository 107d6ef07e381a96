import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { cloudflareMonthlyCost, type CostAssumptions } from "../src/capacity/cloudflare-cost";
import { ABLY, CENTRIFUGO, HOSTED_SERVICES, PUSHER, referenceCpuPerDeliveryUs } from "../src/capacity/hosted-pricing";
import { DEFAULT_COSTS, MEASURED_ACK_US, measuredCosts, measuredRowsPerMessage } from "../src/capacity/inputs";
import {
  acksPerConnection,
  cloudflareRoomResources,
  deliveriesPerSecond,
  deliveryWireBytes,
  descriptorCeiling,
  framesPerSocket,
  historyBytes,
  largestFitting,
  largestRoomForCpu,
  mostUsed,
  roomDemand,
  selfHostedResources,
  vpsEstimate,
  type Host,
  type RoomAssumptions,
  type UnitCosts,
  type Workload,
} from "../src/capacity/model";
import {
  cappedPlanEstimate,
  cloudflarePerMillion,
  countedPerDelivered,
  hostedEstimate,
  meteredEstimate,
  referenceEstimate,
} from "../src/capacity/per-million";
import { CLOUDFLARE_LIMITS, CLOUDFLARE_PRICING, SECONDS_PER_MONTH } from "../src/capacity/pricing";
import { amount, resourceTable } from "../src/capacity/render";

const costs: UnitCosts = {
  memoryPerConnectionBytes: 100_000,
  kernelMemoryPerConnectionBytes: 0,
  cpuPerDeliveryUs: 10,
  cpuPerPublishUs: 0,
  cpuPerAckUs: 0,
  handshakesPerSecond: 1000,
};

const host: Host = { name: "test", descriptorLimit: 20_000, memoryBytes: 1e9, serverThreads: 1, linkBitsPerSecond: 8e9 };

/** No acks (an ack delay that never ends, no window), no heartbeats, one row per message: the plain fan-out arithmetic. */
const plain: RoomAssumptions = {
  rowsWrittenPerMessage: 1,
  ack: { delaySeconds: Number.POSITIVE_INFINITY, windowBytes: 0 },
  pingsBilled: false,
  pingIntervalSeconds: 25,
  historyMessages: 1000,
};

const assumptions: CostAssumptions = {
  ...plain,
  sessionSeconds: SECONDS_PER_MONTH, // one upgrade per connection per month
  workerCpuMsPerRequest: 1,
};

function byName<T extends { resource: string }>(list: readonly T[]): Record<string, T> {
  return Object.fromEntries(list.map((r) => [r.resource, r]));
}

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

  it("finds the largest input a growing demand allows, and infinity when it never gets there", () => {
    expect(largestFitting((x) => x * x, 1e6)).toBeCloseTo(1000, 6);
    expect(largestFitting((x) => 3 * x, 1)).toBeCloseTo(1 / 3, 9);
    expect(largestFitting(() => 0, 1)).toBe(Number.POSITIVE_INFINITY);
    expect(largestFitting((x) => x + 5, 1)).toBe(0);
  });

  it("keeps the descriptor reserve the local launcher keeps", () => {
    expect(descriptorCeiling(20_000)).toBe(19_000);
    expect(descriptorCeiling(1024)).toBe(768);
  });
});

describe("share used per resource: demand ÷ capacity, not connections ÷ ceiling", () => {
  it("gives each self-hosted resource its demand, capacity and share, with the ceiling apart", () => {
    const w: Workload = { connections: 5000, messagesPerConnection: 2, roomSize: 10, payloadBytes: 100, publishVia: "socket" };
    const r = byName(selfHostedResources(w, costs, host, plain));
    expect(r.descriptors?.demand).toBe(5000);
    expect(r.descriptors?.capacity).toBe(descriptorCeiling(20_000));
    expect(r.descriptors?.used).toBeCloseTo(5000 / 19_000, 12);
    expect(r.memory?.demand).toBe(5000 * 100_000);
    expect(r.memory?.capacity).toBe(1e9);
    expect(r.memory?.used).toBeCloseTo(0.5, 12);
    expect(r.memory?.ceiling).toBeCloseTo(10_000, 6);
    // 20 deliveries/s × 10 µs = 200 µs per connection per second → 5,000 connections fill the thread
    expect(r["CPU of the thread"]?.demand).toBeCloseTo(1e6, 6);
    expect(r["CPU of the thread"]?.capacity).toBe(1e6);
    expect(r["CPU of the thread"]?.used).toBeCloseTo(1, 9);
    expect(r["CPU of the thread"]?.ceiling).toBeCloseTo(5_000, 6);
    const bits = 5000 * 2 * 10 * deliveryWireBytes(100) * 8;
    expect(r["network link"]?.demand).toBeCloseTo(bits, 3);
    expect(r["network link"]?.used).toBeCloseTo(bits / 8e9, 12);
    expect(mostUsed(Object.values(r)).resource).toBe("CPU of the thread");
  });

  it("reports a room's CPU share as CPU used, though its ceiling grows with the square root", () => {
    // One room of 100 at 1 msg/s per socket, 10 µs per delivery: 100 × 100 × 10 = 100,000 µs/s = 10% of a thread.
    const w: Workload = { connections: 100, messagesPerConnection: 1, roomSize: 100, payloadBytes: 100, publishVia: "socket" };
    const room = byName(selfHostedResources(w, costs, host, plain))["one room on one thread"];
    expect(room?.demand).toBeCloseTo(100_000, 6);
    expect(room?.used).toBeCloseTo(0.1, 9);
    expect(room?.ceiling).toBeCloseTo(Math.sqrt(1e5), 3);
    // Sockets ÷ ceiling would read 31.6%: not the share of the thread.
    expect((room?.used ?? 0) * 3).toBeLessThan(100 / (room?.ceiling ?? 1));
  });

  it("bounds a Cloudflare room by sockets, requests, memory and CPU per object", () => {
    const w: Workload = { connections: 100_000, messagesPerConnection: 2, roomSize: 1000, payloadBytes: 100, publishVia: "socket" };
    const r = byName(cloudflareRoomResources(w, { ...costs, cpuPerDeliveryUs: 0.1 }, plain));
    expect(r["sockets per object"]?.used).toBeCloseTo(1000 / 32_768, 12);
    expect(r["sockets per object"]?.ceiling).toBe(32_768);
    // 2 publishes per socket per second, no acks: 2,000 requests/s against 1,000
    expect(r["requests/s per object"]?.demand).toBeCloseTo(2000, 9);
    expect(r["requests/s per object"]?.used).toBeCloseTo(2, 9);
    expect(r["requests/s per object"]?.ceiling).toBeCloseTo(500, 6);
    // Memory: sockets plus history against 128 MB, not sockets ÷ (128 MB − history) per socket
    const mem = 1000 * 100_000 + historyBytes(100, 1000);
    expect(r["memory of one object"]?.demand).toBe(mem);
    expect(r["memory of one object"]?.used).toBeCloseTo(mem / CLOUDFLARE_LIMITS.memoryPerObjectBytes, 12);
    // CPU: 2 × 1000 × 1000 × 0.1 µs = 200,000 µs/s = 20% of the object's thread
    expect(r["CPU of one object"]?.used).toBeCloseTo(0.2, 9);
    expect(r["CPU of one object"]?.ceiling).toBeCloseTo(Math.sqrt(1e6 / 0.2), 3);
    expect(mostUsed(Object.values(r)).resource).toBe("requests/s per object");
  });

  it("counts acks and heartbeats in a room's requests, and the ceiling meets the limit", () => {
    const w: Workload = { connections: 10_000, messagesPerConnection: 1 / 60, roomSize: 100, payloadBytes: 200, publishVia: "socket" };
    const a: RoomAssumptions = { ...plain, ack: { delaySeconds: 0.1, windowBytes: 1 << 20 }, pingsBilled: true };
    const demand = roomDemand(w, 100, costs, a);
    const frames = (1 / 60) * 100;
    expect(demand.acksPerSecond).toBeCloseTo(100 * (frames / (1 + frames * 0.1)), 9);
    expect(demand.pingsPerSecond).toBeCloseTo(100 / 25, 12);
    expect(demand.requestsPerSecond).toBeCloseTo(demand.publishesPerSecond + demand.acksPerSecond + demand.pingsPerSecond, 9);
    const req = byName(cloudflareRoomResources(w, costs, a))["requests/s per object"];
    expect(req?.used).toBeCloseTo(demand.requestsPerSecond / 1000, 12);
    expect(roomDemand(w, req?.ceiling ?? 0, costs, a).requestsPerSecond).toBeCloseTo(1000, 3);
  });

  it("prints demand and capacity in each resource's unit, the share, and the ceiling in its own column", () => {
    expect(amount(1.5 * 1024 ** 3, "bytes")).toBe("1.5 GB");
    expect(amount(576_000, "CPU µs/s")).toBe("576 ms/s");
    expect(amount(43.7e6, "bit/s")).toBe("43.7 Mbit/s");
    const w: Workload = { connections: 100, messagesPerConnection: 1, roomSize: 100, payloadBytes: 100, publishVia: "socket" };
    const text = resourceTable("t", selfHostedResources(w, costs, host, plain));
    const roomLine = text.split("\n").find((l) => l.includes("one room on one thread")) ?? "";
    expect(roomLine).toContain("100 ms/s");
    expect(roomLine).toContain("1,000 ms/s");
    expect(roomLine).toContain("10.0%");
    expect(roomLine).toContain("316 sockets per room");
    expect(text).toContain("used = demand ÷ capacity");
  });
});

describe("acks", () => {
  const w: Workload = { connections: 1, messagesPerConnection: 1, roomSize: 10, payloadBytes: 100, publishVia: "socket" };

  it("one per frame when frames are far apart, about one per delay when they are close, none with no delay and no window", () => {
    expect(acksPerConnection(w, 1, plain.ack)).toBe(0);
    expect(acksPerConnection({ ...w, messagesPerConnection: 0.01 }, 1, { delaySeconds: 0.1, windowBytes: 0 })).toBeCloseTo(0.1 / 1.01, 9);
    expect(acksPerConnection({ ...w, messagesPerConnection: 100 }, 1, { delaySeconds: 0.1, windowBytes: 0 })).toBeCloseTo(1000 / 101, 9);
    expect(acksPerConnection(w, 1, { delaySeconds: 0, windowBytes: 0 })).toBe(10);
  });

  it("at least one per half window of bytes, never more than one per frame", () => {
    const half = deliveryWireBytes(100) * 5; // half window = 5 deliveries
    expect(acksPerConnection(w, 1, { delaySeconds: 10, windowBytes: half * 2 })).toBeCloseTo(2, 9);
    expect(acksPerConnection(w, 1, { delaySeconds: 0, windowBytes: 1 })).toBe(10);
  });

  it("coalescing cuts frames, and so acks, with rows per message", () => {
    expect(framesPerSocket(w, 0.25)).toBeCloseTo(2.5, 12);
    expect(acksPerConnection(w, 0.25, { delaySeconds: 0, windowBytes: 0 })).toBeCloseTo(2.5, 12);
  });
});

describe("Cloudflare bill", () => {
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

  it("counts acks and heartbeats as incoming messages", () => {
    const w: Workload = { connections: 1000, messagesPerConnection: 0.01, roomSize: 100, payloadBytes: 100, publishVia: "http" };
    const a: CostAssumptions = { ...assumptions, ack: { delaySeconds: 0.1, windowBytes: 1 << 20 }, pingsBilled: true };
    const est = cloudflareMonthlyCost(w, costs, CLOUDFLARE_PRICING, a);
    const acks = 1000 * acksPerConnection(w, 1, a.ack) * SECONDS_PER_MONTH;
    const pings = (1000 * SECONDS_PER_MONTH) / 25;
    const publishes = 1000 * 0.01 * SECONDS_PER_MONTH;
    const requests = est.lines.find((l) => l.item.startsWith("Durable Object requests"));
    expect(requests?.quantity).toBeCloseTo(1000 + publishes + (acks + pings) / 20, 3);
  });

  it("writes rows per message as given: a room that flushes 10 messages at a time writes a tenth", () => {
    const w: Workload = { connections: 1000, messagesPerConnection: 1, roomSize: 100, payloadBytes: 100, publishVia: "socket" };
    const est = cloudflareMonthlyCost(w, costs, CLOUDFLARE_PRICING, { ...assumptions, rowsWrittenPerMessage: 0.1 });
    const rows = est.lines.find((l) => l.item.startsWith("SQLite rows"));
    expect(rows?.quantity).toBeCloseTo(1000 * SECONDS_PER_MONTH * 0.1, 3);
    expect(rows?.usd).toBeCloseTo(((1000 * SECONDS_PER_MONTH * 0.1 - 50e6) / 1e6) * 1.0, 6);
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

  it("gives the whole bill per million delivered messages", () => {
    const w: Workload = { connections: 10_000, messagesPerConnection: 1 / 60, roomSize: 100, payloadBytes: 200, publishVia: "socket" };
    const est = cloudflareMonthlyCost(w, costs, CLOUDFLARE_PRICING, assumptions);
    expect(est.deliveriesPerMonth).toBeCloseTo(deliveriesPerSecond(w) * SECONDS_PER_MONTH, 0);
    expect(cloudflarePerMillion(est).usdPerMillionDelivered).toBeCloseTo((est.totalUsd / est.deliveriesPerMonth) * 1e6, 12);
  });
});

describe("fixed-price servers", () => {
  it("sizes a fleet by the connection-bound resource that runs out first", () => {
    const w: Workload = { connections: 25_000, messagesPerConnection: 0, roomSize: 10, payloadBytes: 100, publishVia: "socket" };
    const est = vpsEstimate(w, costs, { ...host, monthlyUsd: 6, memoryBytes: 1e9, transferBytesPerMonth: 1e12, transferOverageUsdPerGb: 0.01 }, plain);
    // memory: 10,000 per server → 3 servers; nothing is sent, so no transfer to pay
    expect(est.servers).toBe(3);
    expect(est.monthlyUsd).toBe(18);
    expect(est.bindingResource).toBe("memory");
  });

  it("adds transfer beyond what the servers include", () => {
    const w: Workload = { connections: 100, messagesPerConnection: 1, roomSize: 100, payloadBytes: 100, publishVia: "socket" };
    const offer = { ...host, monthlyUsd: 6, memoryBytes: 1e9, transferBytesPerMonth: 0, transferOverageUsdPerGb: 0.01 };
    const est = vpsEstimate(w, { ...costs, cpuPerDeliveryUs: 0 }, offer, plain);
    const bytes = 100 * 1 * 100 * deliveryWireBytes(100) * SECONDS_PER_MONTH;
    expect(est.outgoingBytesPerMonth).toBeCloseTo(bytes, 0);
    expect(est.transferOverageUsd).toBeCloseTo((bytes / 1e9) * 0.01, 6);
    expect(est.monthlyUsd).toBeCloseTo(6 + (bytes / 1e9) * 0.01, 6);
  });
});

describe("hosted services, per million delivered", () => {
  it("keeps a source and a reading date for every price, and no price without one", () => {
    for (const s of HOSTED_SERVICES) {
      expect(s.sources.length).toBeGreaterThan(0);
      for (const p of s.plans) {
        expect(p.sources.length).toBeGreaterThan(0);
        for (const src of p.sources) {
          expect(src.url).toMatch(/^https:\/\//);
          expect(src.readOn).toMatch(/^\d{4}-\d{2}-\d{2}$/);
        }
      }
    }
    for (const src of [...CENTRIFUGO.sources, ...CLOUDFLARE_PRICING.sources]) expect(src.url).toMatch(/^https:\/\//);
    // Unpublished prices stay unknown rather than zero.
    expect(ABLY.plans.find((p) => p.plan === "Enterprise")?.monthlyUsd).toBeUndefined();
    expect(PUSHER.plans.find((p) => p.plan === "Enterprise")?.monthlyUsd).toBeUndefined();
  });

  it("counts a publish and each delivery: 1 + F counted messages for F deliveries", () => {
    expect(countedPerDelivered(ABLY, 10)).toBeCloseTo(1.1, 12);
    expect(countedPerDelivered(PUSHER, 50)).toBeCloseTo(51 / 50, 12);
  });

  it("prices a metered service per counted message plus connection and channel minutes, on the plan that fits", () => {
    const w: Workload = { connections: 1000, messagesPerConnection: 0.01, roomSize: 100, payloadBytes: 100, publishVia: "socket" };
    const e = meteredEstimate(w, ABLY);
    // 10 publishes/s × 101 counted = 1,010 msg/s: within Standard's 2,500 and 10,000 connections
    expect(e.plan).toBe("Standard");
    const counted = 10 * 101 * SECONDS_PER_MONTH;
    const minutes = SECONDS_PER_MONTH / 60;
    const monthly = 29 + (counted / 1e6) * 2.5 + ((1000 * minutes) / 1e6) * 1 + ((10 * minutes) / 1e6) * 1;
    expect(e.monthlyUsd).toBeCloseTo(monthly, 6);
    expect(e.usdPerMillionDelivered).toBeCloseTo((monthly / (1000 * SECONDS_PER_MONTH)) * 1e6, 9);
  });

  it("says when no self-serve plan fits, and gives no monthly price for an unpublished plan", () => {
    const w: Workload = { connections: 10_000, messagesPerConnection: 1 / 60, roomSize: 100, payloadBytes: 200, publishVia: "socket" };
    const ably = hostedEstimate(w, ABLY);
    expect(ably.plan).toBe("Enterprise");
    expect(ably.monthlyUsd).toBeUndefined();
    expect(ably.fits).toContain("price not published");
    const pusher = cappedPlanEstimate(w, PUSHER);
    expect(pusher.monthlyUsd).toBeUndefined();
    expect(pusher.fits).toContain("price not published");
    // The figure given is the best listed plan used to its daily cap: Growth Plus, $1,199 for 90 M a day.
    expect(pusher.plan).toBe("Growth Plus");
    expect(pusher.usdPerMillionDelivered).toBeCloseTo((1199 / ((90e6 * SECONDS_PER_MONTH) / 86_400 / 1e6)) * 1.01, 9);
  });

  it("fits a small workload on a capped plan and divides its price by the deliveries", () => {
    const w: Workload = { connections: 400, messagesPerConnection: 0.0001, roomSize: 100, payloadBytes: 100, publishVia: "socket" };
    // 0.04 publishes/s × 101 × 86,400 = 349,056 counted a day: Startup (1 M/day, 500 connections)
    const e = cappedPlanEstimate(w, PUSHER);
    expect(e.plan).toBe("Startup");
    expect(e.monthlyUsd).toBe(49);
    expect(e.usdPerMillionDelivered).toBeCloseTo((49 / (deliveriesPerSecond(w) * SECONDS_PER_MONTH)) * 1e6, 9);
  });

  it("derives a self-hosted reference from its benchmark's CPU, labelled as derived", () => {
    const cpu = referenceCpuPerDeliveryUs(CENTRIFUGO);
    expect(cpu.allIn).toBeCloseTo(((40 + 1.6) * 1e6) / (28e6 / 60), 6);
    expect(cpu.marginal).toBeLessThan(cpu.allIn);
    const w: Workload = { connections: 10_000, messagesPerConnection: 1 / 60, roomSize: 100, payloadBytes: 200, publishVia: "socket" };
    const e = referenceEstimate(w, CENTRIFUGO, { ...host, monthlyUsd: 6, transferBytesPerMonth: 0, transferOverageUsdPerGb: 0 });
    expect(e.usdPerMillionDelivered).toBeCloseTo(cpu.allIn * (6 / SECONDS_PER_MONTH), 12);
    expect(e.basis).toContain("not a list price");
  });
});

describe("measured inputs from load results", () => {
  const dir = mkdtempSync(join(tmpdir(), "load-capacity-"));
  const report = (scenario: string, summary: Record<string, number>, details: Record<string, unknown> = {}) => ({
    tool: "edge-fanout-load",
    schema: 1,
    scenario,
    options: { rate: 5, sockets: 20 },
    runs: [
      { label: "ours", ok: true, summary, details, marks: [], timeline: [] },
      { label: "baseline", ok: true, summary: { ...summary, serverCpuPerDeliveryUs: 1 }, details: {}, marks: [], timeline: [] },
    ],
  });
  const write = (name: string, body: unknown): string => {
    const file = join(dir, name);
    writeFileSync(file, JSON.stringify(body));
    return file;
  };

  it("takes memory and handshakes from connect runs and CPU per delivery (with its ±) from fanout runs", () => {
    const connect = write("connect.json", report("connect", { idleMemoryPerConnectionBytes: 50_000, handshakesPerSecond: 2000, serverCpuPerDeliveryUs: 999 }));
    const fanout = write("fanout.json", report("fanout", { serverCpuPerDeliveryUs: 30, serverCpuPerDeliveryUsPlusMinus: 0.4, idleMemoryPerConnectionBytes: 1 }));
    const { costs: measured, sources, plusMinus } = measuredCosts([connect, fanout], "ours");
    expect(measured.memoryPerConnectionBytes).toBe(50_000);
    expect(measured.handshakesPerSecond).toBe(2000);
    expect(measured.cpuPerDeliveryUs).toBe(30);
    expect(plusMinus.cpuPerDeliveryUs).toBe(0.4);
    expect(measured.cpuPerPublishUs).toBe(DEFAULT_COSTS.ours.cpuPerPublishUs);
    expect(measured.cpuPerAckUs).toBe(MEASURED_ACK_US);
    expect(sources.cpuPerDeliveryUs).toContain("fanout");
    expect(sources.cpuPerPublishUs).toContain("assumption");
    expect(measuredCosts([fanout], "baseline").costs.cpuPerDeliveryUs).toBe(1);
  });

  it("measures rows per message from room stats, else from messages per frame, else assumes 1", () => {
    const stats = write(
      "fanout-stats.json",
      report("fanout", { eventsPerFrame: 2 }, { roomStats: [{ room: "a", historyRowsWritten: 30, published: 100 }, { room: "b", historyRowsWritten: 10, published: 100 }] }),
    );
    const frames = write("fanout-frames.json", report("fanout", { eventsPerFrame: 4 }));
    const connect = write("connect-only.json", report("connect", { eventsPerFrame: 4 }));
    const fromStats = measuredRowsPerMessage([stats]);
    expect(fromStats.value).toBeCloseTo(0.2, 12);
    expect(fromStats.measured).toBe(true);
    expect(fromStats.source).toContain("historyRowsWritten");
    const fromFrames = measuredRowsPerMessage([connect, frames]);
    expect(fromFrames.value).toBeCloseTo(0.25, 12);
    expect(fromFrames.source).toContain("messages per frame");
    const assumed = measuredRowsPerMessage([connect]);
    expect(assumed).toMatchObject({ value: 1, measured: false });
    expect(assumed.source).toContain("assumption");
  });

  it("refuses files that are not load results", () => {
    const file = write("x.json", { hello: 1 });
    expect(() => measuredCosts([file], "ours")).toThrow(/not a load tool JSON result/);
  });
});
