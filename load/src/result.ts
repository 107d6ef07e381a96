import { cpus, release, totalmem } from "node:os";
import type { LoadOptions } from "./options";
import type { Summary } from "./report/metrics";
import type { Mark, TimelineSample } from "./target/sampler";

export interface MachineInfo {
  cpuModel: string;
  cores: number;
  memTotalBytes: number;
  kernel: string;
  node: string;
}

export function machineInfo(): MachineInfo {
  const list = cpus();
  return {
    cpuModel: list[0]?.model.trim() ?? "unknown",
    cores: list.length,
    memTotalBytes: totalmem(),
    kernel: release(),
    node: process.version,
  };
}

export interface WaveRow {
  index: number;
  attempted: number;
  ok: number;
  seconds: number;
  /** Accepted handshakes per second in this wave. */
  rate: number;
  failures: Record<string, number>;
  /** Server CPU per accepted handshake in this wave, µs (local targets). */
  serverCpuPerHandshakeUs?: number;
}

/** One scenario run against one target. */
export interface TargetRun {
  label: string;
  url: string;
  server?: { pid: number; name?: string; descriptorLimit?: number };
  ok: boolean;
  error?: string;
  startedAt: string;
  durationMs: number;
  summary: Summary;
  /** Scenario-specific breakdowns (failures by cause, close codes, room stats...). */
  details: Record<string, unknown>;
  waves?: WaveRow[];
  /** [latency ms, cumulative fraction] of in-time deliveries. */
  latencyCdf?: Array<[number, number]>;
  timeline: TimelineSample[];
  marks: Mark[];
  notes: string[];
}

export interface ComparisonRow {
  metric: string;
  label: string;
  ours?: number;
  baseline?: number;
  /** ours / baseline */
  ratio?: number;
}

/** Everything `--json` prints and the HTML report is drawn from. */
export interface LoadReport {
  tool: "edge-fanout-load";
  schema: 1;
  scenario: LoadOptions["scenario"];
  startedAt: string;
  command: string;
  options: LoadOptions;
  machine: MachineInfo;
  runs: TargetRun[];
  comparison?: ComparisonRow[];
}
