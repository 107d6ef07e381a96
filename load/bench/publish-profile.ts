import { execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveVars } from "../../local-server/local-vars.mjs";
import { encodeWorkerdConfig, workerdConfig } from "../../local-server/workerd-config.mjs";
import { startWorkerd } from "../../local-server/workerd-process.mjs";
import { defineBench, log } from "../src/kit/bench";
import { httpLoad, jsonPost } from "../src/kit/http-load";
import { DIST_DIR, REPO_ROOT } from "../src/kit/paths";
import { cpuMs } from "../src/kit/proc";
import { RawClient } from "../src/kit/raw-client";
import { answersHealth, Server } from "../src/kit/server";
import { sleep } from "../src/kit/time";
import { perfSteps } from "./perf-steps";

// Interpreted and baseline-compiled functions get a frame of their own too, so every JS frame is named.
const PERF_FLAGS = ["--perf-basic-prof", "--interpreted-frames-native-stack"];

interface Profiled {
  pid: number;
  /** The bundle whose source map names the frames. */
  bundle: string;
  stop(): Promise<void>;
}

/**
 * Ours: the service's bundle and wrangler.toml settings on workerd listening on loopback, as the local server
 * runs it but without the launcher (so without its admission sampling), plus the profiling flags.
 */
async function startOurs(port: number): Promise<Profiled> {
  const dir = mkdtempSync(join(tmpdir(), "publish-profile-"));
  mkdirSync(join(dir, "data"));
  const config = JSON.parse(execFileSync(process.execPath, [join(REPO_ROOT, "local-server/read-config.mjs"), join(REPO_ROOT, "wrangler.toml")], { encoding: "utf8" })) as {
    vars: Record<string, string>;
    compatibility_date: string;
    compatibility_flags: string[];
    durable_objects: { bindings: Array<{ name: string; class_name: string }> };
  };
  const bundle = join(REPO_ROOT, "dist/worker.js");
  const { vars } = resolveVars({ tomlVars: config.vars, devVars: {}, env: {}, overrides: {} });
  const capnp = workerdConfig({
    bundle: readFileSync(bundle, "utf8"),
    compatibilityDate: config.compatibility_date,
    compatibilityFlags: config.compatibility_flags,
    vars,
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

async function startBare(port: number, durable: boolean): Promise<Profiled> {
  const server = await Server.start({ kind: durable ? "bare-durable" : "bare", port, args: PERF_FLAGS.map((f) => `--v8-flag=${f}`) });
  return { pid: server.pid, bundle: join(DIST_DIR, "bare-workerd-worker.js"), stop: () => server.stop() };
}

export default defineBench({
  name: "publish-profile",
  title: "where a publish's microseconds go, ours against the bare workerd baseline (perf record)",
  about: `Each target's workerd is started with V8's --perf-basic-prof, rooms get a few subscribers, autocannon publishes
into them over HTTP, and perf record -g samples workerd's on-CPU time (cpu-clock) meanwhile. The samples are split
into steps (load/bench/perf-steps.ts); µs per publish are each step's share of workerd's CPU per publish
(utime+stime over the same window ÷ publishes answered). Needs perf (linux-perf). Build first: npm run build.`,
  options: {
    targets: { default: "ours,bare,bare-durable", help: "of ours, bare, bare-durable" },
    rooms: { default: "100", help: "rooms" },
    sockets: { default: "1", help: "subscribers per room" },
    connections: { default: "20", help: "keep-alive connections publishing" },
    seconds: { default: "10", help: "seconds sampled" },
    port: { default: "18731", help: "port of each target in turn" },
  },
  async run(args) {
    const port = args.int("port", { min: 1, max: 65535 });
    const [roomCount, perRoom, connections, seconds] = [args.int("rooms", { min: 1 }), args.int("sockets"), args.int("connections", { min: 1 }), args.number("seconds", { min: 1 })];
    const results = [];
    for (const target of args.list("targets")) {
      const server = target === "ours" ? await startOurs(port) : await startBare(port, target === "bare-durable");
      const url = `http://127.0.0.1:${port}`;
      const tag = Math.random().toString(36).slice(2, 8);
      const rooms = Array.from({ length: roomCount }, (_, i) => `profile-${tag}-${i}`);
      const requests = rooms.map((room, i) => jsonPost(`/rooms/${room}/publish`, `{"n":${i},"text":"a small message"}`));
      const sockets: RawClient[] = [];
      for (const room of rooms) for (let i = 0; i < perRoom; i++) sockets.push(await new RawClient(`ws://127.0.0.1:${port}/rooms/${room}/ws`, { ack: "none" }).open());
      // Every room exists and the hot paths are optimised before anything is sampled.
      await httpLoad(url, connections, 3, requests);
      await sleep(500);
      const dataFile = join(tmpdir(), `publish-profile-${target}-${process.pid}.data`);
      const perf = spawn("perf", ["record", "-e", "cpu-clock", "-F", "997", "-g", "-p", String(server.pid), "-o", dataFile], { stdio: ["ignore", "ignore", "pipe"] });
      let perfErr = "";
      perf.stderr.on("data", (d: Buffer) => (perfErr += d.toString()));
      await sleep(300);
      const cpu0 = cpuMs(server.pid);
      const t0 = performance.now();
      const load = await httpLoad(url, connections, seconds, requests);
      const wallMs = performance.now() - t0;
      const cpu = cpuMs(server.pid) - cpu0;
      perf.kill("SIGINT");
      await new Promise((r) => perf.once("exit", r));
      const text = execFileSync("perf", ["script", "-i", dataFile], { encoding: "utf8", maxBuffer: 1024 * 1024 * 1024, stdio: ["ignore", "pipe", "ignore"] });
      rmSync(dataFile, { force: true });
      const cpuPerPublishUs = (cpu * 1000) / load.ok;
      const profile = perfSteps(text, { bundle: server.bundle });
      const result = {
        target,
        rooms: roomCount,
        socketsPerRoom: perRoom,
        connections,
        publishes: load.ok,
        failed: load.non2xx + load.errors,
        publishesPerSecond: Math.round(load.ok / (wallMs / 1000)),
        serverCpuPerPublishUs: Math.round(cpuPerPublishUs),
        serverCpuPlusMinusUs: Math.round(20_000 / load.ok),
        serverCorePercent: Math.round((cpu / wallMs) * 100),
        samples: profile.samples,
        steps: profile.steps.map((s) => ({ ...s, usPerPublish: Math.round(s.share * cpuPerPublishUs * 10) / 10, ownUs: Math.round((s.own / profile.samples) * cpuPerPublishUs * 10) / 10 })),
        ...(profile.samples === 0 ? { perfError: perfErr.slice(-500) } : {}),
      };
      results.push(result);
      console.log(JSON.stringify(result));
      for (const ws of sockets) ws.cut();
      await server.stop();
      await sleep(1000);
    }
    for (const r of results) {
      log(`\n${r.target}: ${r.publishesPerSecond} publishes/s into ${r.rooms} rooms of ${r.socketsPerRoom} socket(s), ${r.serverCpuPerPublishUs} ± ${r.serverCpuPlusMinusUs} µs of workerd CPU each (${r.serverCorePercent}% of a core), ${r.samples} samples`);
      for (const s of r.steps.filter((x) => x.share >= 0.005)) log(`  ${s.step.padEnd(52)} ${`${(s.share * 100).toFixed(1)}%`.padStart(6)}  ${`${s.usPerPublish} µs`.padStart(9)}  (its own JS ${s.ownUs} µs)`);
    }
  },
});
