#!/usr/bin/env node
// The local server: runs the worker and its Durable Objects on workerd directly.
//
// Why workerd directly: `wrangler dev` puts a proxy in front of workerd that
// holds several descriptors per WebSocket, and Miniflare's API adds an entry
// worker (~29 KB per socket). workerd alone holds one descriptor and ~74 KB per
// idle socket (docs/benchmarks.md), so the same descriptor limit holds the
// most clients.
//
// What this launcher adds around workerd:
// - admission control: workerd aborts the whole process when accept() hits
//   EMFILE, so the launcher samples the process's descriptors and the worker
//   refuses upgrades with 503 before the limit (worker/local-admission.ts);
// - graceful shutdown: SIGTERM/SIGINT close every socket with 1012 so clients
//   reconnect and resume, then workerd exits.
//
// Usage: node worker/local/server.mjs [--no-build] [--var KEY=VALUE ...]
// Env: PORT (default 8787), HOST (default 127.0.0.1), DATA_DIR (default .data).

import { execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { buildWorker, bundlePath, root } from "./build.mjs";
import { workerdConfig } from "./workerd-config.mjs";

const SAMPLE_INTERVAL_MS = 100;
const SHUTDOWN_TIMEOUT_MS = 5000;

const args = process.argv.slice(2);
const overrides = {};
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--var" && args[i + 1]?.includes("=")) {
    const [key, ...rest] = args[++i].split("=");
    overrides[key] = rest.join("=");
  }
}
const port = Number(process.env.PORT ?? 8787);
const host = process.env.HOST ?? "127.0.0.1";
const dataDir = resolve(process.env.DATA_DIR ?? `${root}.data`);
const url = `http://${host}:${port}`;

/** The soft RLIMIT_NOFILE this process (and so workerd, its child) runs with. */
function descriptorLimit() {
  const line = readFileSync("/proc/self/limits", "utf8")
    .split("\n")
    .find((l) => l.startsWith("Max open files"));
  const soft = Number(line?.split(/\s+/)[3]);
  return Number.isFinite(soft) ? soft : 1024;
}

/**
 * Descriptors kept free for everything that is not an accepted socket: storage
 * files, the refused connections themselves (each holds a descriptor until
 * answered, and closed sockets linger ~10 s), and sockets accepted between two
 * samples (handshake rate × sample interval).
 */
function ceilingFor(limit) {
  return limit - Math.max(256, Math.ceil(limit * 0.05));
}

function countDescriptors(pid) {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 0;
  }
}

function readWranglerConfig() {
  const script = fileURLToPath(new URL("./read-config.mjs", import.meta.url));
  return JSON.parse(execFileSync(process.execPath, [script, `${root}wrangler.toml`], { encoding: "utf8" }));
}

async function waitForHealth(deadlineMs) {
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${url}/healthz`);
      if (res.ok) return true;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

async function main() {
  if (!args.includes("--no-build")) await buildWorker();
  const config = readWranglerConfig();
  const adminToken = randomUUID();
  mkdirSync(dataDir, { recursive: true });
  const configPath = `${root}dist/workerd-${port}.capnp`;
  writeFileSync(
    configPath,
    workerdConfig({
      bundleEmbedPath: relative(dirname(configPath), bundlePath),
      compatibilityDate: config.compatibility_date,
      compatibilityFlags: config.compatibility_flags ?? [],
      vars: { ...config.vars, ...overrides, LOCAL_ADMIN_TOKEN: adminToken },
      durableObjects: config.durable_objects.bindings.map((b) => ({ binding: b.name, className: b.class_name })),
      address: `${host}:${port}`,
      dataDir,
    }),
  );

  const limit = descriptorLimit();
  const ceiling = ceilingFor(limit);
  const workerdBin = resolve(root, "node_modules/workerd/bin/workerd");
  // Its own process group: Ctrl-C in a terminal signals the whole foreground
  // group, and workerd must outlive the signal long enough to close sockets.
  const child = spawn(workerdBin, ["serve", configPath, "--experimental"], {
    stdio: ["ignore", "inherit", "inherit"],
    detached: true,
  });
  process.on("exit", () => child.kill("SIGKILL"));
  let stopping = false;
  child.on("exit", (code, signal) => {
    if (!stopping) {
      console.error(`workerd exited unexpectedly (code ${code}, signal ${signal})`);
      process.exit(1);
    }
  });

  if (!(await waitForHealth(20_000))) {
    console.error("workerd did not become healthy within 20 s");
    child.kill("SIGKILL");
    process.exit(1);
  }

  // Sample descriptors and report them; the worker counts admissions since the
  // sample's basis, so sockets accepted between samples are never missed.
  let basis = 0;
  let sampling = true;
  const sampleLoop = async () => {
    while (sampling) {
      const fds = countDescriptors(child.pid);
      try {
        const res = await fetch(`${url}/__local/pressure`, {
          method: "POST",
          headers: { "x-local-admin-token": adminToken, "content-type": "application/json" },
          body: JSON.stringify({ fds, basis, ceiling }),
        });
        if (res.ok) basis = (await res.json()).admitted;
      } catch {
        // A busy moment; the next sample catches up.
      }
      await new Promise((r) => setTimeout(r, SAMPLE_INTERVAL_MS));
    }
  };
  void sampleLoop();

  // One write, so whoever waits for "listening on" also has the rest.
  console.log(
    [
      `edge-fanout listening on ${url}`,
      `  WebSocket:  ws://${host}:${port}/rooms/{room}/ws`,
      `  Publish:    curl -X POST ${url}/rooms/{room}/publish -d 'hello'`,
      `  descriptor limit ${limit}; connection ceiling ${ceiling} descriptors (upgrades past it get 503)`,
      `  data in ${dataDir}; workerd pid ${child.pid}`,
    ].join("\n"),
  );

  const shutdown = async (signal) => {
    if (stopping) return;
    stopping = true;
    sampling = false;
    console.log(`${signal}: closing every socket with 1012 (service restart)`);
    try {
      const res = await fetch(`${url}/__local/shutdown`, {
        method: "POST",
        headers: { "x-local-admin-token": adminToken },
        signal: AbortSignal.timeout(SHUTDOWN_TIMEOUT_MS),
      });
      const closed = await res.json();
      console.log(`closed ${closed.sockets} sockets in ${closed.rooms} rooms`);
      // Let the close frames leave before the process goes.
      await new Promise((r) => setTimeout(r, 250));
    } catch (error) {
      console.error(`graceful close failed: ${error}`);
    }
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
    child.on("exit", () => {
      clearTimeout(timer);
      process.exit(0);
    });
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
}

await main();
