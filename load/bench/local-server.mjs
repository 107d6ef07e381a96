// What the benchmark scripts share: starting the local server (local-server/server.mjs, what `npm start` runs)
// on 127.0.0.1 with a fresh data directory, stopping it with everything it started, and reading a process's CPU
// time and memory from /proc (Linux only).
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The checkout these scripts belong to. */
export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
/**
 * The launcher of the checkout in `dir`: `local-server/server.mjs`, or `worker/local/server.mjs` in checkouts
 * from before it moved (benchmarks measure the code before a change side by side with the code after it).
 */
export function launcherIn(dir = ROOT) {
  const current = join(dir, "local-server/server.mjs");
  return existsSync(current) ? current : join(dir, "worker/local/server.mjs");
}

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ is 100 on Linux). */
const CLK_TCK = 100;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const running = new Set();

// Servers must not outlive the script that started them, whatever ends it.
process.on("exit", () => {
  for (const server of running) {
    server.child.kill("SIGKILL");
    killQuietly(server.pid);
  }
});

/**
 * Starts the local server from `dir` (default this checkout; it must be built: `node tools/build-worker.mjs`)
 * on `port`, with `vars` as `--var K=V`, no .dev.vars, and the accept gate as `gate` ("off" by default: the gate
 * relays every connection through the launcher, which a benchmark would measure as client CPU; "auto" leaves it
 * to the launcher). Resolves once it listens, with its workerd pid. `dataDir` reuses the storage of a server
 * stopped with `keepData` (a restart); by default it is a fresh directory.
 */
export async function startLocalServer({ port, vars = {}, dir = ROOT, gate = "off", label = "bench", dataDir = mkdtempSync(join(tmpdir(), `${label}-`)) }) {
  const varArgs = Object.entries(vars).flatMap(([k, v]) => ["--var", `${k}=${v}`]);
  const gateArgs = gate === "auto" ? [] : ["--gate", gate];
  const child = spawn(process.execPath, [launcherIn(dir), "--no-build", "--no-dev-vars", ...gateArgs, ...varArgs], {
    env: { ...process.env, PORT: String(port), DATA_DIR: dataDir },
    stdio: ["ignore", "pipe", "pipe"],
    cwd: dir,
  });
  let output = "";
  const keep = (d) => (output = (output + d).slice(-20_000));
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const deadline = Date.now() + 30_000;
  while (!/listening on/.test(output) || !/workerd pid (\d+)/.test(output)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      rmSync(dataDir, { recursive: true, force: true });
      throw new Error(`server did not start:\n${output}`);
    }
    await sleep(100);
  }
  const server = {
    child,
    dataDir,
    pid: Number(/workerd pid (\d+)/.exec(output)[1]),
    url: `http://127.0.0.1:${port}`,
    wsUrl: `ws://127.0.0.1:${port}`,
    output: () => output,
  };
  running.add(server);
  return server;
}

/** Stops a server from `startLocalServer` (SIGTERM, then SIGKILL after 10 s), its workerd, and removes its data unless `keepData`. */
export async function stopLocalServer(server, { keepData = false } = {}) {
  if (!running.delete(server)) return;
  if (server.child.exitCode === null) {
    const exited = new Promise((r) => server.child.once("exit", r));
    server.child.kill("SIGTERM");
    await Promise.race([exited, sleep(10_000)]);
    if (server.child.exitCode === null) server.child.kill("SIGKILL");
  }
  // A launcher that was killed may have left its workerd behind.
  killQuietly(server.pid);
  if (!keepData) rmSync(server.dataDir, { recursive: true, force: true });
}

/** Stops every server still running. */
export async function stopAllLocalServers() {
  for (const server of [...running]) await stopLocalServer(server);
}

/** utime + stime of a process so far, milliseconds (10 ms clock ticks). */
export function cpuMs(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK;
}

/** Resident memory of a process, MB. */
export function rssMb(pid) {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"));
  return Number(line?.split(/\s+/)[1] ?? 0) / 1024;
}

function killQuietly(pid) {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // already gone
  }
}
