/**
 * The load tool run as a user runs it (load/dist/cli.js), once per variant
 * and round, each run's headline figures kept per column: what the compare,
 * multiplex, runtime-floor and hook-seam benchmarks are made of.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import type { LoadReport, RoundsColumn, TargetRun } from "../result";
import { log } from "./bench";
import { DIST_DIR, REPO_ROOT } from "./paths";
import { rotation } from "./rounds";

/** Runs the bundled load tool with `args` (its table on stderr) and resolves with its report; rejects when it printed none. */
export function runLoadTool(args: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<{ report: LoadReport; status: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(DIST_DIR, "cli.js"), ...args, "--json"], { cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "inherit"] });
    const chunks: Buffer[] = [];
    child.stdout.on("data", (chunk: Buffer) => chunks.push(chunk));
    child.once("error", reject);
    child.once("close", (status) => {
      const out = Buffer.concat(chunks).toString("utf8");
      const start = out.indexOf("{");
      if (start < 0) return reject(new Error(`the load tool exited with ${status} and printed no report`));
      resolve({ report: JSON.parse(out.slice(start)) as LoadReport, status: status ?? 1 });
    });
  });
}

export interface Variant {
  name: string;
  /** Arguments on top of the common ones. */
  extra: string[];
}

/** One round of a column: its summary (with the figures only the timeline holds) and what a reader should see beside it. */
export interface ColumnRound {
  round: number;
  summary: Record<string, number | undefined>;
  notes: string[];
  details: { closesByCode?: unknown; connectFailuresByCause?: unknown; slow?: unknown; subscribeStorm?: unknown };
}

export interface LoadColumn extends RoundsColumn {
  rounds: ColumnRound[];
}

export interface VariantRuns {
  /** A column per variant, and one more per baseline a variant runs beside ours, in the order the variants were given. */
  columns: LoadColumn[];
  /** Every run's whole report, in the order they ran. */
  runs: Array<{ round: number; name: string; result: LoadReport }>;
  failed: boolean;
}

/**
 * Runs the load tool once per variant and round, interleaved (round r rotates the variants by r), with `common`
 * arguments and each variant's own. A variant run with a baseline gives a column "<name> (<baseline>)" too.
 * With `stopOnFailure`, the first run that fails ends the whole.
 */
export async function runVariants(variants: readonly Variant[], common: readonly string[], rounds: number, options: { env?: NodeJS.ProcessEnv; stopOnFailure?: boolean; only?: "first" } = {}): Promise<VariantRuns> {
  const columns = new Map<string, LoadColumn & { order: number }>();
  const out: VariantRuns = { columns: [], runs: [], failed: false };
  for (let round = 0; round < rounds; round++) {
    for (const variant of rotation(variants, round)) {
      const args = [...common, ...variant.extra, "--quiet", "--no-report"];
      log(`\n== round ${round + 1}/${rounds}, ${variant.name}: npm run load -- ${args.join(" ")}`);
      const ran = await runLoadTool(args, options.env).catch((error: unknown) => {
        log(`${variant.name}: FAILED: ${String(error)}`);
        return undefined;
      });
      const runs = ran === undefined ? [] : options.only === "first" ? ran.report.runs.slice(0, 1) : ran.report.runs;
      if (ran) out.runs.push({ round: round + 1, name: variant.name, result: ran.report });
      for (const [i, run] of runs.entries()) {
        const name = i === 0 ? variant.name : `${variant.name} (${run.label})`;
        if (!run.ok) log(`${name}: FAILED: ${run.error}`);
        const column = columns.get(name) ?? { name, extra: variant.extra, order: variants.indexOf(variant) * 10 + i, rounds: [] };
        const d = run.details as ColumnRound["details"];
        column.rounds.push({
          round: round + 1,
          summary: { ...run.summary, ...timelineFigures(run) },
          notes: run.notes ?? [],
          details: { closesByCode: d.closesByCode, connectFailuresByCause: d.connectFailuresByCause, slow: d.slow, subscribeStorm: d.subscribeStorm },
        });
        columns.set(name, column);
      }
      if (ran?.status !== 0) {
        out.failed = true;
        if (options.stopOnFailure) return { ...out, columns: ordered(columns) };
      }
    }
  }
  return { ...out, columns: ordered(columns) };
}

function ordered(columns: Map<string, LoadColumn & { order: number }>): LoadColumn[] {
  return [...columns.values()].sort((a, b) => a.order - b.order).map(({ order: _order, ...column }) => column);
}

/**
 * Figures only the timeline holds: server RSS growth from the start of publishing to its peak after it (what the
 * publishing itself cost), and the machine's kernel TCP memory growth over the same span (socket buffers, which show
 * in no process's RSS; other processes move it too).
 */
export function timelineFigures(run: TargetRun): Record<string, number> {
  const out: Record<string, number> = {};
  const samples = run.timeline ?? [];
  const start = run.marks?.find((m) => m.label.startsWith("publish"));
  if (!start) return out;
  const later = samples.filter((s) => s.t >= start.t && s.server);
  const from = later[0]?.server;
  if (from) out.publishRssGrowthBytes = Math.max(...later.map((s) => s.server?.rssBytes ?? 0)) - from.rssBytes;
  const tcpFrom = later[0]?.machine.tcpMemBytes;
  if (tcpFrom !== undefined) out.tcpMemGrowthBytes = Math.max(...samples.filter((s) => s.t >= start.t).map((s) => s.machine.tcpMemBytes)) - tcpFrom;
  return out;
}

/** What a reader should see beside a table of columns: each column's distinct notes, and per round its closes, failures and the like. */
export function columnNotes(columns: readonly LoadColumn[], rounds: number): string[] {
  const lines: string[] = [];
  for (const c of columns) {
    for (const r of c.rounds) {
      const tag = rounds > 1 ? `${c.name}, round ${r.round}` : c.name;
      const d = r.details;
      const some = (value: unknown): boolean => typeof value === "object" && value !== null && Object.keys(value).length > 0;
      if (some(d.closesByCode)) lines.push(`${tag}: closes by code ${JSON.stringify(d.closesByCode)}`);
      if (some(d.connectFailuresByCause)) lines.push(`${tag}: connection failures by cause ${JSON.stringify(d.connectFailuresByCause)}`);
      if (some(d.slow)) lines.push(`${tag}: slow clients ${JSON.stringify({ ...(d.slow as object), totals: undefined, note: undefined })}`);
      if (some(d.subscribeStorm)) lines.push(`${tag}: subscribe storm ${JSON.stringify(d.subscribeStorm)}`);
    }
    // Notes are the same every round more often than not: each distinct one once.
    for (const note of new Set(c.rounds.flatMap((r) => r.notes))) lines.push(`${c.name}: ${note}`);
  }
  return lines;
}
