/**
 * The servers a profile samples (publish-profile, handshake-profile), each on
 * workerd started with V8's --perf-basic-prof so that `perf` can name the
 * JavaScript frames, on 127.0.0.1:`port`, and the sampling itself. Ours is
 * the service's bundle with wrangler.toml's settings (plus `vars`), as the
 * local server runs it but without the launcher (so without its admission
 * sampling); the baselines run from their launchers through the kit's server
 * start. Each answer has the pid to sample, the bundle its frames map to
 * (perf-steps.ts) and a stop.
 */
import { execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveVars } from "../../local-server/local-vars.mjs";
import { encodeWorkerdConfig, workerdConfig } from "../../local-server/workerd-config.mjs";
import { startWorkerd } from "../../local-server/workerd-process.mjs";
import { DIST_DIR, REPO_ROOT } from "../src/kit/paths";
import { cpuMs } from "../src/kit/proc";
import { answersHealth, Server } from "../src/kit/server";
import { sleep } from "../src/kit/time";

// Interpreted and baseline-compiled functions get a frame of their own too, so every JS frame is named.
const PERF_FLAGS = ["--perf-basic-prof", "--interpreted-frames-native-stack"];

export interface Profiled {
  pid: number;
  /** The bundle whose source map names the frames. */
  bundle: string;
  stop(): Promise<void>;
}

/** What a profile can run: ours (durable rooms, or every room ephemeral) and the workerd baselines. */
export const PROFILED_TARGETS = ["ours", "ephemeral", "bare", "bare-durable", "partyserver"] as const;
export type ProfiledTarget = (typeof PROFILED_TARGETS)[number];

/** Starts `target` on `port`; `roomPrefix` names the rooms the profile uses (an ephemeral rule covers them). */
export function startProfiled(target: string, port: number, roomPrefix: string): Promise<Profiled> {
  switch (target) {
    case "ours":
      return startOurs(port);
    case "ephemeral":
      // docs/history.md#ephemeral-rooms: every room the profile uses keeps its messages in memory only.
      return startOurs(port, { HISTORY_RULES: JSON.stringify([{ prefix: roomPrefix, store: false }]) });
    case "bare":
    case "bare-durable":
      return startBaseline(target, port, "bare-workerd-worker.js");
    case "partyserver":
      return startBaseline(target, port, "partyserver-worker.js");
    default:
      throw new Error(`unknown target ${target}: one of ${PROFILED_TARGETS.join(", ")}`);
  }
}

/** Ours: the service's bundle and wrangler.toml settings (and `vars` over them) on workerd listening on loopback. */
async function startOurs(port: number, vars: Record<string, string> = {}): Promise<Profiled> {
  const dir = mkdtempSync(join(tmpdir(), "profiled-ours-"));
  mkdirSync(join(dir, "data"));
  const config = JSON.parse(execFileSync(process.execPath, [join(REPO_ROOT, "local-server/read-config.mjs"), join(REPO_ROOT, "wrangler.toml")], { encoding: "utf8" })) as {
    vars: Record<string, string>;
    compatibility_date: string;
    compatibility_flags: string[];
    durable_objects: { bindings: Array<{ name: string; class_name: string }> };
  };
  const bundle = join(REPO_ROOT, "dist/worker.js");
  const resolved = resolveVars({ tomlVars: config.vars, devVars: {}, env: {}, overrides: vars }).vars;
  const capnp = workerdConfig({
    bundle: readFileSync(bundle, "utf8"),
    compatibilityDate: config.compatibility_date,
    compatibilityFlags: config.compatibility_flags,
    vars: resolved,
    durableObjects: config.durable_objects.bindings.map((b) => ({ binding: b.name, className: b.class_name })),
    dataDir: join(dir, "data"),
    httpAddress: `127.0.0.1:${port}`,
    adminAddress: `unix:${join(dir, "admin.sock")}`,
    adminToken: randomUUID(),
  });
  const workerd = startWorkerd({ bin: join(REPO_ROOT, "node_modules/workerd/bin/workerd"), config: await encodeWorkerdConfig({ ...capnp, v8Flags: PERF_FLAGS }), listenFd: null, privateDir: "", env: process.env });
  const child = workerd.child;
  process.once("exit", () => child.kill("SIGKILL"));
  const deadline = Date.now() + 30_000;
  while (!(await answersHealth(port))) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error("workerd did not start");
    await sleep(100);
  }
  return {
    pid: child.pid ?? 0,
    bundle,
    stop: async () => {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await Promise.race([exited, sleep(5000)]);
      child.kill("SIGKILL");
      await workerd.release();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A workerd baseline from its launcher (kit/baselines.ts), with the profiling flags. */
async function startBaseline(kind: string, port: number, bundle: string): Promise<Profiled> {
  const server = await Server.start({ kind, port, args: PERF_FLAGS.map((f) => `--v8-flag=${f}`) });
  return { pid: server.pid, bundle: join(DIST_DIR, bundle), stop: () => server.stop() };
}

export interface Sampled<T> {
  /** What `perf script` printed. */
  text: string;
  /** The process's CPU (utime+stime) and the wall time over the work, ms. */
  cpuMs: number;
  wallMs: number;
  answer: T;
  /** perf's complaint, when it took no sample. */
  perfError: string;
}

/** Samples `pid` with `perf record -g` (on-CPU time, cpu-clock, `frequency` per second) while `work` runs. */
export async function sampleWhile<T>(pid: number, work: () => Promise<T>, frequency = 997): Promise<Sampled<T>> {
  const dataFile = join(tmpdir(), `profile-${pid}-${process.pid}.data`);
  const perf = spawn("perf", ["record", "-e", "cpu-clock", "-F", String(frequency), "-g", "-p", String(pid), "-o", dataFile], { stdio: ["ignore", "ignore", "pipe"] });
  let perfError = "";
  perf.stderr.on("data", (d: Buffer) => (perfError += d.toString()));
  await sleep(300);
  const cpu0 = cpuMs(pid);
  const t0 = performance.now();
  const answer = await work();
  const wallMs = performance.now() - t0;
  const cpu = cpuMs(pid) - cpu0;
  perf.kill("SIGINT");
  await new Promise((r) => perf.once("exit", r));
  const text = execFileSync("perf", ["script", "-i", dataFile], { encoding: "utf8", maxBuffer: 1024 * 1024 * 1024, stdio: ["ignore", "pipe", "ignore"] });
  rmSync(dataFile, { force: true });
  return { text, cpuMs: cpu, wallMs, answer, perfError: perfError.slice(-500) };
}
