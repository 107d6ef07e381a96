import { readResult, type LoadReport, type TargetRun } from "../result";
import { cpuUncertainties } from "../report/uncertainty";
import type { UnitCosts } from "./model";

/**
 * Server CPU per incoming ack, µs, and its share of a delivery's: the same
 * fanout run (10 rooms × 100 sockets, 1 msg/s, 15 s, 2026-12-01) with an ack
 * per frame (--ack-bytes 1) took 68 ± 2 µs per delivery against 50 ± 2 µs
 * with none. One run each on a shared machine: an estimate, not a constant.
 */
export const MEASURED_ACK_US = 18;
export const ACK_SHARE_OF_DELIVERY = 18 / 50;

/**
 * Figures used when no measurement is given: docs/benchmarks.md section 1
 * (5,000 idle sockets in one room; 5,000 sockets at one message per frame),
 * this machine kind (2 cores, workerd run directly).
 */
export const DEFAULT_COSTS: Record<"ours" | "baseline", UnitCosts> = {
  ours: {
    memoryPerConnectionBytes: 89.2 * 1024,
    kernelMemoryPerConnectionBytes: 3 * 1024,
    cpuPerDeliveryUs: 31.5,
    cpuPerPublishUs: 300,
    cpuPerAckUs: MEASURED_ACK_US,
    handshakesPerSecond: 1717,
  },
  baseline: {
    memoryPerConnectionBytes: 10.8 * 1024,
    kernelMemoryPerConnectionBytes: 3 * 1024,
    cpuPerDeliveryUs: 13.0,
    cpuPerPublishUs: 100,
    cpuPerAckUs: 13.0 * ACK_SHARE_OF_DELIVERY,
    handshakesPerSecond: 1556,
  },
};

/** Where each default comes from, printed beside it. */
export const DEFAULT_SOURCES: Record<keyof UnitCosts, string> = {
  memoryPerConnectionBytes: "default: docs/benchmarks.md, 5,000 idle sockets",
  kernelMemoryPerConnectionBytes: "default: kernel TCP memory per idle connection measured with the connect scenario",
  cpuPerDeliveryUs: "default: docs/benchmarks.md, 5,000 sockets at one message per frame",
  cpuPerPublishUs: "assumption (not measured)",
  cpuPerAckUs: "default: fanout 10 × 100 sockets at 1 msg/s with an ack per frame (--ack-bytes 1) minus without, 2026-12-01",
  handshakesPerSecond: "default: docs/benchmarks.md, 5,000 sockets",
};

export interface MeasuredCosts {
  costs: UnitCosts;
  /** Where each figure came from: a file and scenario, or a default. */
  sources: Record<keyof UnitCosts, string>;
  /** ± of figures derived from CPU time (10 ms ticks), when measured. */
  plusMinus: Partial<Record<keyof UnitCosts, number>>;
}

function runOf(report: LoadReport, label: "ours" | "baseline"): TargetRun | undefined {
  return report.runs.find((r) => r.label === label && r.ok);
}

/**
 * Unit costs for one target ("ours" or "baseline"), taken from load JSON
 * results where they hold the figure and from defaults otherwise. A connect
 * run gives memory and handshakes; a fanout run gives CPU per delivery.
 */
export function measuredCosts(files: readonly string[], label: "ours" | "baseline"): MeasuredCosts {
  const costs: UnitCosts = { ...DEFAULT_COSTS[label] };
  const sources: Record<keyof UnitCosts, string> = { ...DEFAULT_SOURCES };
  if (label === "baseline") sources.cpuPerAckUs = `assumption: ${Math.round(ACK_SHARE_OF_DELIVERY * 100)}% of a delivery, the share measured for ours`;
  const plusMinus: Partial<Record<keyof UnitCosts, number>> = {};
  for (const file of files) {
    const report = readResult(file, "load");
    const run = runOf(report, label);
    if (!run) continue;
    const where = `${file} (${report.scenario}, ${label})`;
    const s = run.summary;
    const take = (key: keyof UnitCosts, value: number | undefined, scenarios: readonly string[]): boolean => {
      if (value === undefined || !Number.isFinite(value) || value <= 0) return false;
      if (!scenarios.includes(report.scenario)) return false;
      costs[key] = value;
      sources[key] = where;
      return true;
    };
    take("memoryPerConnectionBytes", s.idleMemoryPerConnectionBytes, ["connect"]);
    take("kernelMemoryPerConnectionBytes", s.kernelTcpMemoryPerConnectionBytes, ["connect"]);
    take("handshakesPerSecond", s.handshakesPerSecond, ["connect"]);
    if (take("cpuPerDeliveryUs", s.serverCpuPerDeliveryUs, ["fanout"])) {
      const pm = s.serverCpuPerDeliveryUsPlusMinus ?? cpuUncertainties(run).serverCpuPerDeliveryUsPlusMinus;
      if (pm !== undefined) plusMinus.cpuPerDeliveryUs = pm;
    }
  }
  // The baseline's acks were never measured: they keep the share of a delivery measured for ours.
  if (label === "baseline") costs.cpuPerAckUs = costs.cpuPerDeliveryUs * ACK_SHARE_OF_DELIVERY;
  return { costs, sources, plusMinus };
}

export interface RowsPerMessage {
  value: number;
  source: string;
  /** False when no result held a figure and the value is an assumption. */
  measured: boolean;
}

function sumRoomRows(value: unknown): { rows: number; published: number; rooms: number } | undefined {
  if (!Array.isArray(value)) return undefined;
  let rows = 0;
  let published = 0;
  let rooms = 0;
  for (const row of value) {
    if (typeof row !== "object" || row === null) continue;
    const r = row as Record<string, unknown>;
    if (typeof r.historyRowsWritten !== "number" || typeof r.published !== "number") continue;
    rows += r.historyRowsWritten;
    published += r.published;
    rooms++;
  }
  return rooms > 0 && published > 0 ? { rows, published, rooms } : undefined;
}

/**
 * SQLite rows written per message, from the first fanout result (ours) that
 * shows it: rooms' historyRowsWritten ÷ published when the run kept room
 * stats, else frames ÷ messages seen by the clients (each live frame is one
 * flush and one history row); otherwise 1, an assumption.
 */
export function measuredRowsPerMessage(files: readonly string[]): RowsPerMessage {
  let fromFrames: RowsPerMessage | undefined;
  for (const file of files) {
    const report = readResult(file, "load");
    if (report.scenario !== "fanout") continue;
    const run = runOf(report, "ours");
    if (!run) continue;
    const rate = `${report.options.rate} msg/s per room, ${report.options.sockets} sockets per room`;
    for (const [key, value] of Object.entries(run.details)) {
      const sum = sumRoomRows(value);
      if (sum) {
        return {
          value: sum.rows / sum.published,
          source: `${file}: historyRowsWritten ÷ published over ${sum.rooms} rooms (details.${key}), measured at ${rate}`,
          measured: true,
        };
      }
    }
    const perFrame = run.summary.eventsPerFrame;
    if (!fromFrames && perFrame !== undefined && perFrame > 0) {
      fromFrames = {
        value: Math.min(1, 1 / perFrame),
        source: `${file}: 1 ÷ ${perFrame.toFixed(2)} messages per frame seen by the clients (each live frame is one flush, one row), measured at ${rate}`,
        measured: true,
      };
    }
  }
  return fromFrames ?? { value: 1, source: "assumption: one row per message (rooms that send lone frames; pass --from a fanout result or --rows-per-message)", measured: false };
}
