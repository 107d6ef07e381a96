// The servers a profile samples (publish-profile.mjs, handshake-profile.mjs): each on workerd started with V8's
// --perf-basic-prof, so that `perf` can name the JavaScript frames, on 127.0.0.1:`port`. Ours is the service's
// bundle with wrangler.toml's settings (plus `vars`), as the local server runs it; the bare workerd baseline and
// the PartyServer baseline run from their launchers (node load/build.mjs first). Each answer has the pid to sample,
// the bundle its frames map to (perf-steps.mjs) and a stop. Every server is killed if the script exits first.
import { execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeWorkerdConfig, workerdConfig } from "../../local-server/workerd-config.mjs";
import { resolveVars } from "../../local-server/local-vars.mjs";
import { startWorkerd } from "../../local-server/workerd-process.mjs";
import { cpuMs, ROOT } from "./local-server.mjs";

// Interpreted and baseline-compiled functions get a frame of their own too, so every JS frame is named.
export const PERF_FLAGS = ["--perf-basic-prof", "--interpreted-frames-native-stack"];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const cleanups = [];
process.on("exit", () => cleanups.forEach((c) => c()));

const healthy = (port) => fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false);
async function until(ready, child, what) {
  const deadline = Date.now() + 30_000;
  while (!(await ready())) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${what} did not start`);
    await sleep(100);
  }
}

/** Ours: the service's bundle and wrangler.toml settings (and `vars` over them) on workerd listening on loopback, as the local server runs it. */
export async function startOurs(port, vars = {}) {
  const dir = mkdtempSync(join(tmpdir(), "profiled-ours-"));
  const config = JSON.parse(execFileSync(process.execPath, [join(ROOT, "local-server/read-config.mjs"), join(ROOT, "wrangler.toml")], { encoding: "utf8" }));
  const bundle = join(ROOT, "dist/worker.js");
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
  execFileSync("mkdir", ["-p", join(dir, "data")]);
  const workerd = startWorkerd({ bin: join(ROOT, "node_modules/workerd/bin/workerd"), config: await encodeWorkerdConfig({ ...capnp, v8Flags: PERF_FLAGS }), listenFd: null, privateDir: "", env: process.env });
  const child = workerd.child;
  cleanups.push(() => child.kill("SIGKILL"));
  await until(() => healthy(port), child, "workerd");
  return {
    pid: child.pid,
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

/** A baseline from its launcher in load/dist (`bare-server.js` with `--durable` or not, `partyserver-server.js`). */
async function startLauncher(port, launcher, bundle, args = []) {
  const dir = mkdtempSync(join(tmpdir(), "profiled-baseline-"));
  const child = spawn(process.execPath, [join(ROOT, "load/dist", launcher), "--port", String(port), "--data", dir, ...args, ...PERF_FLAGS.map((f) => `--v8-flag=${f}`)], { stdio: ["ignore", "pipe", "inherit"] });
  cleanups.push(() => child.kill("SIGKILL"));
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  await until(async () => /workerd pid \d+/.test(out) && (await healthy(port)), child, launcher);
  return {
    pid: Number(/workerd pid (\d+)/.exec(out)[1]),
    bundle: join(ROOT, "load/dist", bundle),
    stop: async () => {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await Promise.race([exited, sleep(5000)]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function startBare(port, durable) {
  return startLauncher(port, "bare-server.js", "bare-workerd-worker.js", durable ? ["--durable"] : []);
}

export function startPartyserver(port) {
  return startLauncher(port, "partyserver-server.js", "partyserver-worker.js");
}

/**
 * Samples `pid` with `perf record -g` (on-CPU time, cpu-clock, `frequency` per second) while `work` runs:
 * what `perf script` prints, the process's CPU (utime+stime, ms) and the wall time over the work, and the
 * work's answer. `perfError` holds perf's complaint when it took no sample.
 */
export async function sampleWhile(pid, work, frequency = 997) {
  const dataFile = join(tmpdir(), `profile-${pid}-${process.pid}.data`);
  const perf = spawn("perf", ["record", "-e", "cpu-clock", "-F", String(frequency), "-g", "-p", String(pid), "-o", dataFile], { stdio: ["ignore", "ignore", "pipe"] });
  let perfError = "";
  perf.stderr.on("data", (d) => (perfError += d));
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
