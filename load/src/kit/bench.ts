/**
 * What a benchmark is to the kit: a name, what it measures, its options, and
 * a run. `npm run bench -- <name> [options]` parses the options, bounds the
 * run, stops every server it started however it ends, and prints --help from
 * the same specs the parser reads.
 */
import { optionsUsage, parseOptions, UsageRequested, type Options, type OptionSpecs } from "./args";
import { stopAllServers } from "./server";

export interface Bench {
  name: string;
  /** One line, for the list of benchmarks. */
  title: string;
  /** What --help prints above the options: what it measures and how. */
  about: string;
  options: OptionSpecs;
  /** The positional arguments it takes, for --help ("churn|messages"); none when absent. */
  positionals?: string;
  /** Seconds after which a run gives up (its servers stopped, exit 2). */
  limitSeconds?(args: Options<string>): number;
  run(args: Options<string>): Promise<number | void>;
}

/** A benchmark whose run reads its options by the names it declared. */
export function defineBench<const S extends OptionSpecs>(bench: {
  name: string;
  title: string;
  about: string;
  options: S;
  positionals?: string;
  limitSeconds?(args: Options<Extract<keyof S, string>>): number;
  run(args: Options<Extract<keyof S, string>>): Promise<number | void>;
}): Bench {
  return bench as unknown as Bench;
}

export function log(...parts: unknown[]): void {
  console.error(...parts);
}

export function benchUsage(bench: Bench): string {
  const positionals = bench.positionals ? ` ${bench.positionals}` : "";
  return `Usage: npm run bench -- ${bench.name} [options]${positionals}\n\n${bench.about.trim()}\n\nOptions:\n${optionsUsage(bench.options)}\n`;
}

/** Runs a benchmark with its command line; resolves with the exit code. */
export async function runBench(bench: Bench, argv: readonly string[]): Promise<number> {
  let args: Options<string>;
  try {
    args = parseOptions(argv, bench.options, bench.positionals !== undefined);
  } catch (error) {
    if (error instanceof UsageRequested) {
      process.stdout.write(benchUsage(bench));
      return 0;
    }
    log(`${error instanceof Error ? error.message : String(error)}\n\n${benchUsage(bench)}`);
    return 2;
  }
  const stop = (code: number, why: string): void => {
    log(`${bench.name}: ${why}`);
    void stopAllServers().finally(() => process.exit(code));
  };
  process.once("SIGINT", () => stop(130, "interrupted"));
  process.once("SIGTERM", () => stop(143, "terminated"));
  const limit = bench.limitSeconds?.(args);
  if (limit !== undefined) setTimeout(() => stop(2, `gave up after ${limit} s`), limit * 1000).unref();
  try {
    return (await bench.run(args)) ?? 0;
  } catch (error) {
    log(error instanceof Error ? (error.stack ?? error.message) : String(error));
    return 1;
  } finally {
    await stopAllServers();
  }
}
