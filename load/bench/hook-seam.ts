import { join } from "node:path";
import { defineBench, log } from "../src/kit/bench";
import { REPO_ROOT } from "../src/kit/paths";
import { Server, type ServerSpec } from "../src/kit/server";
import { spreadOf } from "../src/stats/percentile";
import { compare } from "./compare";

const HOOKS = join(REPO_ROOT, "load/bench/hooks/wrangler.toml");

export default defineBench({
  name: "hook-seam",
  title: "what the hook seam costs on the fast path: the many-rooms fanout against servers with and without hooks",
  positionals: "[-- <fanout options>]",
  about: `The many-rooms fanout scenario (docs/benchmarks.md section 3) against servers started side by side, each on its
own port and data directory, measured in one compare invocation (with --rounds N, interleaved):
  before         the code before the seam, from another checkout (--before DIR, built there with npm run build)
  no hooks       this checkout's service, the plain Room
  beforePublish  a Room subclass whose beforePublish checks every message's shape (load/bench/hooks/)
  transform      the same hook returning the message with a field added
Every server runs with the accept gate off (workerd holds the sockets, as on Cloudflare). After the table, the
deliveries per server CPU-second of each server over the rounds: median, lowest, highest, and the median's
difference from the first server's. Default fanout options: --rooms 200 --sockets 20 --rate 3 --duration 20
(600 publishes/s, 12,000 deliveries/s: below what the machine holds, so every run does the same work).
Build first: npm run build.`,
  options: {
    before: { help: "another checkout: the code before the seam" },
    rounds: { default: "1", help: "interleaved rounds" },
    port: { default: "18641", help: "port of the first server (the others follow it)" },
  },
  async run(args) {
    const rounds = args.int("rounds", { min: 1, max: 20 });
    const firstPort = args.int("port", { min: 1, max: 65000 });
    const scenario = args.positionals.length ? args.positionals : ["--rooms", "200", "--sockets", "20", "--rate", "3", "--duration", "20"];
    const before = args.text("before");
    const servers: Array<{ name: string; spec: Omit<ServerSpec, "port"> }> = [
      ...(before ? [{ name: "before", spec: { kind: "ours", checkout: before } }] : []),
      { name: "no hooks", spec: { kind: "ours" } },
      // Another config's worker is bundled as the server starts.
      { name: "beforePublish", spec: { kind: "ours", build: true, args: ["--config", HOOKS] } },
      { name: "transform", spec: { kind: "ours", build: true, args: ["--config", HOOKS], vars: { BENCH_HOOK: "transform" } } },
    ];
    const variants = [];
    for (const [i, s] of servers.entries()) {
      const server = await Server.start({ ...s.spec, port: firstPort + i, env: { ACCEPT_GATE: "off" }, unsetEnv: ["PUBLISH_KEY", "TOKEN_SECRET"] });
      log(`${s.name}: ${server.url} (${s.spec.checkout ?? REPO_ROOT})`);
      variants.push({ name: s.name, extra: ["--url", server.url] });
    }
    const { code, columns } = await compare(variants, ["fanout", ...scenario], rounds, args.argv);
    if (code !== 0) return code;
    const figures = columns.map((c) => ({ name: c.name, values: c.rounds.map((r) => r.summary.deliveriesPerServerCpuSecond).filter((v): v is number => typeof v === "number") }));
    const first = spreadOf(figures[0]?.values ?? []).median;
    const fmt = (x: number): string => Math.round(x).toLocaleString("en-US");
    console.log(`\ndeliveries per server CPU-second over ${rounds} round(s):`);
    console.log(["server".padEnd(16), "median".padStart(8), "lowest".padStart(8), "highest".padStart(8), "spread".padStart(7), `median / ${figures[0]?.name}`.padStart(20), "  runs"].join("  "));
    for (const { name, values } of figures) {
      if (values.length === 0) continue;
      const s = spreadOf(values);
      console.log([name.padEnd(16), fmt(s.median).padStart(8), fmt(s.low).padStart(8), fmt(s.high).padStart(8), `${((s.spread ?? 0) * 100).toFixed(1)}%`.padStart(7), `${((s.median / first - 1) * 100).toFixed(1)}%`.padStart(20), `  ${values.map(fmt).join(", ")}`].join("  "));
    }
  },
});
