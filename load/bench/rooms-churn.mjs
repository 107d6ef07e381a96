#!/usr/bin/env node
// What strangers' room names cost the local server's disk and memory: N looks at rooms that do
// not exist, then N rooms that each get one message; files and bytes under the data directory
// and workerd's RSS after each step, after the rooms' history has aged out (they give their
// storage back), and after a restart (the launcher removes the empty database stubs).
//
// Usage: node load/bench/rooms-churn.mjs [--rooms 1000] [--age 5] [--port 18731]
// (build first: npm run build). Starts its own server with HISTORY_MAX_AGE_SECONDS=--age on
// 127.0.0.1 and a fresh data directory; stops it at the end.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const argv = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
};
const ROOMS = opt("rooms", 1000);
const AGE = opt("age", 5);
const PORT = opt("port", 18731);
const root = fileURLToPath(new URL("../../", import.meta.url));
const dataDir = mkdtempSync(join(tmpdir(), "rooms-churn-"));
const url = `http://127.0.0.1:${PORT}`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function disk() {
  let files = 0;
  let bytes = 0;
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else {
        try {
          bytes += statSync(path).size;
          files += 1;
        } catch {
          // Removed while we looked (an object closed its database).
        }
      }
    }
  };
  walk(dataDir);
  return { files, mb: Math.round((bytes / 1048576) * 10) / 10 };
}

const rssMb = (pid) => Math.round(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024);

async function start() {
  const child = spawn(process.execPath, [join(root, "local-server/server.mjs"), "--no-build", "--no-dev-vars", "--var", `HISTORY_MAX_AGE_SECONDS=${AGE}`], {
    env: { ...process.env, PORT: String(PORT), DATA_DIR: dataDir },
    stdio: ["ignore", "pipe", "pipe"],
  });
  // The server must not outlive this script, whatever ends it.
  process.on("exit", () => child.kill("SIGTERM"));
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const deadline = Date.now() + 30_000;
  while (!/workerd pid (\d+)/.test(out)) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(out);
    await sleep(100);
  }
  return { child, pid: Number(/workerd pid (\d+)/.exec(out)[1]), output: () => out };
}

async function stop(server) {
  const exited = new Promise((r) => server.child.once("exit", r));
  server.child.kill("SIGTERM");
  await exited;
}

let failures = 0;
async function inParallel(count, work) {
  let next = 0;
  await Promise.all(Array.from({ length: 20 }, async () => {
    while (next < count) {
      try {
        await work(next++);
      } catch {
        failures += 1;
      }
    }
  }));
}

const report = [];
let server = await start();
report.push({ step: "started", ...disk(), rssMb: rssMb(server.pid) });
await inParallel(ROOMS, async (i) => {
  const res = await fetch(`${url}/rooms/look-${i}`);
  await res.arrayBuffer();
});
report.push({ step: `${ROOMS} looks at rooms that do not exist`, ...disk(), rssMb: rssMb(server.pid) });
await inParallel(ROOMS, async (i) => {
  const res = await fetch(`${url}/rooms/used-${i}/publish`, { method: "POST", body: "once" });
  await res.arrayBuffer();
});
report.push({ step: `${ROOMS} rooms with one message each`, ...disk(), rssMb: rssMb(server.pid), failedRequests: failures, fds: readdirSync(`/proc/${server.pid}/fd`).length });
if (server.child.exitCode !== null) {
  console.error(server.output().slice(-3000));
  process.exit(1);
}
// History ages out after AGE s; each room's alarm then reports and gives its storage back.
const deadline = Date.now() + (AGE + 60) * 1000;
let known = ROOMS;
while (known > 0 && Date.now() < deadline) {
  await sleep(2000);
  known = 0;
  for (let i = 0; i < ROOMS; i += Math.max(1, Math.floor(ROOMS / 50))) if ((await fetch(`${url}/rooms/used-${i}`)).status === 200) known += 1;
}
report.push({ step: `after their history aged out (${AGE} s) and they gave their storage back`, ...disk(), rssMb: rssMb(server.pid), sampledStillKnown: known });
await stop(server);
server = await start();
const removed = /removed (\d+) empty room database files/.exec(server.output())?.[1] ?? "0";
report.push({ step: "after a restart", ...disk(), rssMb: rssMb(server.pid), stubsRemoved: Number(removed) });
await stop(server);
rmSync(dataDir, { recursive: true, force: true });
console.log(JSON.stringify(report, null, 2));
