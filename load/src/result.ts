import { readFileSync } from "node:fs";
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

/** What every result the load tool writes starts with: which tool and benchmark wrote it, when, and the command. */
export interface ResultHeader {
  tool: "edge-fanout-load";
  schema: 1;
  bench: string;
  startedAt: string;
  command: string;
}

/** Everything `npm run load -- --json` prints and the HTML report is drawn from. */
export interface LoadReport extends ResultHeader {
  bench: "load";
  scenario: LoadOptions["scenario"];
  options: LoadOptions;
  machine: MachineInfo;
  runs: TargetRun[];
  comparison?: ComparisonRow[];
}

/** One variant's figures over interleaved rounds (the compare and multiplex benchmarks). */
export interface RoundsColumn {
  name: string;
  /** Its arguments on top of the common ones. */
  extra: string[];
  rounds: Array<{ round: number; summary: Record<string, number | undefined> }>;
}

/** `npm run bench -- multiplex`: per table, its variants' rounds. */
export interface MultiplexResult extends ResultHeader {
  bench: "multiplex";
  rounds: number;
  scale: number;
  rate: number;
  tables: Array<{ name: string; title: string; common: string[]; columns: RoundsColumn[] }>;
}

/** `npm run bench -- sharded`: the per-step costs it derived from its fanout pair (others are in the file for the reader). */
export interface ShardedResult extends ResultHeader {
  bench: "sharded";
  steps?: { sendPerDeliveryUs?: number; leafExtraPerDeliveryUs?: number; [figure: string]: number | undefined };
}

/** The results the capacity tool reads. */
export type MeasuredResult = LoadReport | MultiplexResult | ShardedResult;

const DESCRIBED: Record<MeasuredResult["bench"], string> = { load: "load tool JSON", multiplex: "multiplex benchmark", sharded: "sharded benchmark" };

/**
 * Reads a result file of the kind asked for, or says what it is not. Files from before the header named the
 * benchmark pass as well: a load report by its tool and scenario, a benchmark's by its `bench`.
 */
export function readResult<B extends MeasuredResult["bench"]>(file: string, bench: B): Extract<MeasuredResult, { bench: B }> {
  const value = JSON.parse(readFileSync(file, "utf8")) as { bench?: unknown; tool?: unknown; schema?: unknown; scenario?: unknown };
  const kind = value.bench ?? (value.tool === "edge-fanout-load" && value.schema === 1 && typeof value.scenario === "string" ? "load" : undefined);
  if (kind !== bench) throw new Error(`${file} is not a ${DESCRIBED[bench]} result`);
  return value as Extract<MeasuredResult, { bench: B }>;
}
