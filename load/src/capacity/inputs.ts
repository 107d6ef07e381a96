import { readFileSync } from "node:fs";
import type { LoadReport } from "../result";
import type { UnitCosts } from "./model";

/** Figures used when no measurement is given: docs/benchmarks.md, this machine kind (2 cores, workerd run directly). */
export const DEFAULT_COSTS: Record<"ours" | "baseline", UnitCosts> = {
  ours: {
    memoryPerConnectionBytes: 74 * 1024,
    kernelMemoryPerConnectionBytes: 3 * 1024,
    cpuPerDeliveryUs: 22,
    cpuPerPublishUs: 300,
    handshakesPerSecond: 3000,
  },
  baseline: {
    memoryPerConnectionBytes: 10 * 1024,
    kernelMemoryPerConnectionBytes: 3 * 1024,
    cpuPerDeliveryUs: 9,
    cpuPerPublishUs: 100,
    handshakesPerSecond: 3100,
  },
};

export interface MeasuredCosts {
  costs: UnitCosts;
  /** Where each figure came from: a file and scenario, or "default". */
  sources: Record<keyof UnitCosts, string>;
}

/**
 * Unit costs for one target ("ours" or "baseline"), taken from load JSON
 * results where they hold the figure and from defaults otherwise. A connect
 * run gives memory and handshakes; a fanout run gives CPU per delivery.
 */
export function measuredCosts(files: readonly string[], label: "ours" | "baseline"): MeasuredCosts {
  const costs: UnitCosts = { ...DEFAULT_COSTS[label] };
  const sources = Object.fromEntries(Object.keys(costs).map((k) => [k, "default"])) as Record<keyof UnitCosts, string>;
  for (const file of files) {
    const report = JSON.parse(readFileSync(file, "utf8")) as LoadReport;
    if (report.tool !== "edge-fanout-load" || report.schema !== 1) throw new Error(`${file} is not a load tool JSON result`);
    const run = report.runs.find((r) => r.label === label && r.ok);
    if (!run) continue;
    const where = `${file} (${report.scenario}, ${label})`;
    const s = run.summary;
    const take = (key: keyof UnitCosts, value: number | undefined, scenarios: readonly string[]): void => {
      if (value === undefined || !Number.isFinite(value) || value <= 0) return;
      if (!scenarios.includes(report.scenario)) return;
      costs[key] = value;
      sources[key] = where;
    };
    take("memoryPerConnectionBytes", s.idleMemoryPerConnectionBytes, ["connect"]);
    take("kernelMemoryPerConnectionBytes", s.kernelTcpMemoryPerConnectionBytes, ["connect"]);
    take("handshakesPerSecond", s.handshakesPerSecond, ["connect"]);
    take("cpuPerDeliveryUs", s.serverCpuPerDeliveryUs, ["fanout"]);
  }
  return { costs, sources };
}
