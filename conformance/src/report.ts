import type { CheckResult } from "./check.js";

export interface SuiteReport {
  url: string;
  runId: string;
  /** Wall time of the whole run, ms. */
  ms: number;
  passed: number;
  failed: number;
  skipped: number;
  results: CheckResult[];
}

export function summarize(url: string, runId: string, ms: number, results: CheckResult[]): SuiteReport {
  const count = (outcome: CheckResult["result"]) => results.filter((r) => r.result === outcome).length;
  // In the order of docs/guarantees.md's clauses, whatever order the checks ran in.
  const clause = (r: CheckResult) => Number(/^G(\d+)/.exec(r.id)?.[1] ?? 0);
  const ordered = results.map((r, i) => ({ r, i })).sort((a, b) => clause(a.r) - clause(b.r) || a.i - b.i).map(({ r }) => r);
  return { url, runId, ms, passed: count("pass"), failed: count("fail"), skipped: count("skip"), results: ordered };
}

/** The results as a plain-text table (clause, check, result, evidence) and a summary line. */
export function formatTable(report: SuiteReport): string {
  const rows = report.results.map((r) => [r.clause, r.id, r.result.toUpperCase(), `${r.evidence} (${(r.ms / 1000).toFixed(1)} s)`]);
  const header = ["clause", "check", "result", "evidence"];
  const widths = [0, 1, 2].map((i) => Math.max(header[i]!.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => cells.map((cell, i) => (i < 3 ? cell.padEnd(widths[i]!) : cell)).join("  ");
  return [
    line(header),
    line(widths.map((w) => "-".repeat(w)).concat("--------")),
    ...rows.map(line),
    "",
    `${report.passed} passed, ${report.failed} failed, ${report.skipped} skipped in ${(report.ms / 1000).toFixed(1)} s against ${report.url} (rooms conformance-${report.runId}-*)`,
  ].join("\n");
}
