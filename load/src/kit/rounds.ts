/**
 * Interleaved rounds: every variant once per round, in an order rotated from
 * round to round so that none always runs first (or last, after the machine
 * warmed up), and each figure read as the median of the rounds with the
 * lowest, the highest and the spread beside it. On a shared machine only
 * figures side by side in one invocation compare.
 */
import { median } from "../stats/percentile";

/** The order of `items` in round `round`: rotated by round × `step` (a step of k keeps runs of k together). */
export function rotation<T>(items: readonly T[], round: number, step = 1): T[] {
  return items.map((_, k) => items[(k + round * step) % items.length] as T);
}

/** Runs `run` for every variant in every round, rotated; returns each variant's results in round order. */
export async function interleaved<V, R>(variants: readonly V[], rounds: number, run: (variant: V, round: number) => Promise<R>): Promise<Map<V, R[]>> {
  const out = new Map<V, R[]>(variants.map((v) => [v, []]));
  for (let round = 0; round < rounds; round++) {
    for (const variant of rotation(variants, round)) out.get(variant)?.push(await run(variant, round));
  }
  return out;
}

/** A row of a table of medians: the summary key, its label, its decimals, and a factor (bytes to KB...). */
export type MetricRow = readonly [key: string, label: string, digits: number, scale?: number];

export interface TableColumn {
  name: string;
  rounds: ReadonlyArray<{ summary: Record<string, number | undefined> }>;
}

const format = (value: number, digits: number): string => value.toLocaleString("en-US", { maximumFractionDigits: digits });

/**
 * A table with a column per variant (the median of its rounds, and beneath it lowest-highest and the spread) and
 * one per variant after the first (its median ÷ the first's). Rows no column has are left out.
 */
export function medianTable(columns: readonly TableColumn[], metrics: readonly MetricRow[], rounds: number): string {
  const first = columns[0]?.name ?? "";
  const pad = (text: string): string => text.padStart(24);
  const lines = [
    rounds > 1 ? `median of ${rounds} interleaved rounds; beneath each: lowest-highest (spread = (highest - lowest) / median)` : "one round",
    ["metric".padEnd(40), ...columns.map((c) => pad(c.name)), ...columns.slice(1).map((c) => pad(`${c.name} / ${first}`))].join("  "),
  ];
  for (const [key, label, digits, scale = 1] of metrics) {
    const values = columns.map((c) => c.rounds.map((r) => r.summary[key]).filter((v): v is number => typeof v === "number").map((v) => v * scale));
    if (values.every((v) => v.length === 0)) continue;
    const medians = values.map((v) => (v.length ? median(v) : undefined));
    const base = medians[0];
    const ratios = medians.slice(1).map((m) => pad(m !== undefined && base ? `${(m / base).toFixed(2)}x` : "-"));
    lines.push([label.padEnd(40), ...medians.map((m) => pad(m === undefined ? "-" : format(m, digits))), ...ratios].join("  "));
    if (rounds < 2) continue;
    const spreads = values.map((v, i) => {
      const m = medians[i];
      if (v.length < 2 || m === undefined) return pad("");
      const lo = Math.min(...v);
      const hi = Math.max(...v);
      return pad(`${format(lo, digits)}-${format(hi, digits)}${m ? ` (${(((hi - lo) / Math.abs(m)) * 100).toFixed(1)}%)` : ""}`);
    });
    lines.push(["".padEnd(40), ...spreads].join("  "));
  }
  return lines.join("\n");
}
