import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ResultHeader } from "../result";
import { RESULTS_DIR } from "./paths";

/** The header of a benchmark's result: what wrote it, when, and the command as it was given. */
export function resultHeader<B extends string>(bench: B, argv: readonly string[], startedAt = new Date()): ResultHeader & { bench: B } {
  return { tool: "edge-fanout-load", schema: 1, bench, startedAt: startedAt.toISOString(), command: `npm run bench -- ${bench} ${argv.join(" ")}`.trim() };
}

/** Writes a result to load/results/<bench>-<time>.json and returns the path. */
export function writeResult<T extends ResultHeader>(result: T): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const file = join(RESULTS_DIR, `${result.bench}-${result.startedAt.replace(/[:.]/g, "-")}.json`);
  writeFileSync(file, JSON.stringify(result, null, 2));
  return file;
}
