import { defineBench, log } from "../src/kit/bench";
import { columnNotes, runVariants, type Variant } from "../src/kit/load-runs";
import { resultHeader, writeResult } from "../src/kit/results";
import { medianTable, type MetricRow } from "../src/kit/rounds";

/** The headline figures of a load run, in the order a reader wants them. */
export const HEADLINE: readonly MetricRow[] = [
  ["connected", "sockets connected", 0],
  ["connectFailures", "connect failures", 0],
  ["handshakesPerSecond", "handshakes/s (accepted)", 0],
  ["serverCpuPerHandshakeUs", "server CPU per handshake (µs)", 0],
  ["idleMemoryPerConnectionBytes", "server RSS per idle connection (KB)", 1, 1 / 1024],
  ["published", "messages published", 0],
  ["publishRate", "publish rate achieved (/s)", 1],
  ["historyRowsStoredPerMessage", "history rows stored per message (SQLite)", 3],
  ["expected", "deliveries expected", 0],
  ["delivered", "delivered in time", 0],
  ["deliveriesPerSecond", "deliveries/s", 0],
  ["serverCpuPerDeliveryUs", "server CPU per delivery (µs)", 2],
  ["deliveriesPerServerCpuSecond", "deliveries per server CPU-second", 0],
  ["eventsPerFrame", "messages per frame", 2],
  ["latencyP50Ms", "latency p50 (ms)", 0],
  ["latencyP95Ms", "latency p95 (ms)", 0],
  ["latencyP99Ms", "latency p99 (ms)", 0],
  ["latencyMaxMs", "latency max (ms)", 0],
  ["lost", "lost (late + never)", 0],
  ["lostLate", "  late (after deadline)", 0],
  ["lostNever", "  never received", 0],
  ["gaps", "seq gaps seen", 0],
  ["duplicates", "duplicates", 0],
  ["slowClients", "slow clients (stalled)", 0],
  ["slowClosed", "slow clients closed", 0],
  ["slowClosedAfterS", "first kick after stall, server (s)", 1],
  ["serverBehindPeak", "sockets behind at once, server (peak)", 0],
  ["serverCatchUpFrames", "frames sent from history, server", 0],
  ["serverRssPeakBytes", "server RSS peak (MB)", 1, 1 / 1048576],
  ["serverRssGrowthBytes", "server RSS growth, run (MB)", 1, 1 / 1048576],
  ["publishRssGrowthBytes", "server RSS growth, publishing (MB)", 1, 1 / 1048576],
  ["tcpMemGrowthBytes", "kernel TCP memory growth, machine (MB)", 1, 1 / 1048576],
  ["serverCpuPercent", "server CPU (% of a core)", 0],
  ["clientCpuPercent", "client CPU (% of a core)", 0],
  ["busiestClientProcessPercent", "busiest client process (% of a core)", 0],
  ["machineBusyPercent", "machine busy (%)", 0],
];

/** "name::extra args" → a variant. */
export function variantOf(spec: string): Variant {
  const [name = "", extra = ""] = spec.split("::");
  return { name, extra: extra.split(/\s+/).filter(Boolean) };
}

/**
 * Runs `common` once per variant and round, prints the medians table and the notes, writes the result
 * (load/results/compare-<time>.json); resolves with the exit code and the result file.
 */
export async function compare(variants: readonly Variant[], common: readonly string[], rounds: number, argv: readonly string[], env?: NodeJS.ProcessEnv): Promise<{ code: number; file?: string; columns: Awaited<ReturnType<typeof runVariants>>["columns"] }> {
  const header = resultHeader("compare", argv);
  const ran = await runVariants(variants, common, rounds, { stopOnFailure: true, ...(env ? { env } : {}) });
  if (ran.failed) {
    log("a load run failed: no table");
    return { code: 1, columns: ran.columns };
  }
  console.log([medianTable(ran.columns, HEADLINE, rounds), ...columnNotes(ran.columns, rounds)].join("\n"));
  const file = writeResult({ ...header, rounds, columns: ran.columns.map((c) => ({ name: c.name, extra: c.extra, rounds: c.rounds.map((r) => ({ round: r.round, summary: r.summary })) })), results: ran.runs });
  console.log(`\nresults: ${file}`);
  return { code: 0, file, columns: ran.columns };
}

export default defineBench({
  name: "compare",
  title: "one load scenario in several variants side by side, in interleaved rounds",
  positionals: "-- <scenario> [common load options]",
  about: `Runs one load scenario (npm run load) once per variant, back to back in one invocation, and prints the
headline figures side by side with ratios against the first variant: on a noisy machine only side-by-side
ratios mean much. Each variant's text after "::" is appended to the common arguments. A variant run with a
baseline adds a column "<name> (<baseline>)"; --baseline-only makes the variant the baseline.

  npm run bench -- compare --variant "coalescing::" \\
    --variant "one frame per message::--server-var BATCH_MAX_EVENTS=1" \\
    -- fanout --spawn --sockets 5000 --rate 40 --publishers 16 --duration 20

With --rounds N every variant runs N times, interleaved (round r rotates the order by r); each cell is then the
median of the rounds with the lowest-highest and the spread ((highest - lowest) / median) beneath it, and
ratios are of medians. The result goes to load/results/compare-<time>.json.`,
  options: {
    variant: { multiple: true, help: '"name::extra args" (repeat)' },
    rounds: { default: "1", help: "rounds, 1 to 20" },
  },
  async run(args) {
    const variants = args.texts("variant").map(variantOf);
    if (variants.length === 0 || args.positionals.length === 0) throw new Error('usage: compare --variant "name::extra args" [--variant ...] -- <scenario> [common options]');
    const rounds = args.int("rounds", { min: 1, max: 20 });
    return (await compare(variants, args.positionals, rounds, args.argv)).code;
  },
});
