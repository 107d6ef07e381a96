import { defineBench, log } from "../src/kit/bench";
import { endlessUpload, type EndlessUploadEnd } from "../src/kit/endless-upload";
import { readRssBytes } from "../src/kit/proc";
import { Server, type GateMode } from "../src/kit/server";
import { sleep } from "../src/kit/time";
import { formatSpread, spreadOf } from "../src/stats/percentile";

const MB = 1e6;

/** Peak RSS (bytes) of the processes `pids` names while `work` runs, sampled every 50 ms. */
async function peakRss<T>(pids: () => Record<string, number | undefined>, work: () => Promise<T>): Promise<{ value: T; peak: Record<string, number> }> {
  const peak: Record<string, number> = {};
  const sample = (): void => {
    for (const [name, pid] of Object.entries(pids())) {
      const rss = pid === undefined ? undefined : readRssBytes(pid);
      if (rss !== undefined) peak[name] = Math.max(peak[name] ?? 0, rss);
    }
  };
  sample();
  const timer = setInterval(sample, 50);
  try {
    return { value: await work(), peak };
  } finally {
    clearInterval(timer);
  }
}

export default defineBench({
  name: "endless-upload",
  title: "a chunked publish body that never ends: what the server reads of it before its 413 or its close",
  about: `Each target started fresh on 127.0.0.1 (ours: this checkout's local server; before: --before DIR's, built there),
with the accept gate on (the launcher reads the body first) and off (workerd reads it), in turn: --runs uploads,
one after another, each a POST /rooms/endless/publish with Transfer-Encoding: chunked whose 64 KiB chunks are
written as fast as the connection takes them, whatever comes back, until the connection ends (30 s at most).
Per run: the answer (413, or none) and how the connection ended, and the bytes the kernel took from the writer
(what the server read, plus what the sockets between hold: up to a few MB). Peak RSS of the launcher and of
workerd over the runs, above what they held before. Bounded: --runs × 30 s per target and gate.`,
  options: {
    targets: { default: "ours", help: "of ours, before" },
    before: { help: "the checkout the target before runs (built there)" },
    gates: { default: "on,off", help: "accept gate modes, each a run of its own" },
    runs: { default: "5", help: "uploads per target and gate" },
    port: { default: "18761", help: "port of each target in turn" },
  },
  limitSeconds: (args) => 120 + args.list("targets").length * args.list("gates").length * args.int("runs", { min: 1 }) * 45,
  async run(args) {
    const runs = args.int("runs", { min: 1 });
    const before = args.text("before");
    const gates = args.list("gates").map((g) => {
      if (g !== "on" && g !== "off") throw new Error(`--gates takes on and off, got ${g}`);
      return g satisfies GateMode;
    });
    const rows: string[] = [];
    const results = [];
    for (const target of args.list("targets")) {
      if (target !== "ours" && target !== "before") throw new Error(`--targets takes ours and before, got ${target}`);
      if (target === "before" && before === undefined) throw new Error("the target before needs --before DIR");
      for (const gate of gates) {
        const server = await Server.start({ kind: "ours", port: args.int("port"), gate, ...(target === "before" ? { checkout: before } : {}) });
        const start = { launcher: readRssBytes(server.launcherPid ?? 0) ?? 0, workerd: readRssBytes(server.pid) ?? 0 };
        const { value: ends, peak } = await peakRss(
          () => ({ launcher: server.launcherPid, workerd: server.pid }),
          async () => {
            const out: EndlessUploadEnd[] = [];
            for (let i = 0; i < runs; i++) out.push(await endlessUpload({ port: server.port }));
            return out;
          },
        );
        await sleep(500);
        const errorLines = server.output().split("\n").filter((line) => /"event":"error"| error: /.test(line)).length;
        await server.stop();
        const result = {
          target,
          gate,
          runs: ends.map((e) => ({ status: e.status, how: e.how, ended: e.ended, takenMb: Math.round(e.taken / 1e5) / 10 })),
          peakRssMbAbove: { launcher: Math.round(((peak.launcher ?? 0) - start.launcher) / MB), workerd: Math.round(((peak.workerd ?? 0) - start.workerd) / MB) },
          errorLines,
        };
        results.push(result);
        console.log(JSON.stringify(result));
        const endings = new Map<string, number>();
        for (const e of ends) endings.set(`${e.status ?? "no answer"}, ${e.how}`, (endings.get(`${e.status ?? "no answer"}, ${e.how}`) ?? 0) + 1);
        rows.push(
          `${target.padEnd(7)} ${gate.padEnd(5)} ${formatSpread(spreadOf(ends.map((e) => e.taken / MB)), 1).padStart(26)}  ${ends.map((e) => (e.taken / MB).toFixed(1)).join(", ").padEnd(34)} ${String(result.peakRssMbAbove.launcher).padStart(8)} ${String(result.peakRssMbAbove.workerd).padStart(8)}  ${errorLines}  ${[...endings].map(([k, n]) => `${n}× ${k}`).join("; ")}`,
        );
      }
    }
    log(["target  gate  MB taken: median (low-high, spread)  each run                           launcher  workerd  error lines  endings (peak RSS: MB above start)"].concat(rows).join("\n"));
  },
});
