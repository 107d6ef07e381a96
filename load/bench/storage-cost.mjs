#!/usr/bin/env node
// What a room's storage lifecycle costs in requests and rows written, counted
// inside the worker (load/bench/storage-cost/counting.ts wraps the room and
// coordinator classes of a checkout): this checkout against another one
// (--before DIR: the code before a change, built nowhere in particular; its
// worker/index.ts is bundled here), each on a local server of its own with
// the accept gate off and HISTORY_MAX_AGE_SECONDS=--age, one after the other.
//
//   flock /tmp/bench.lock node load/bench/storage-cost.mjs [--before DIR] [--rooms 200] [--age 5] [--port 18751]
//
// Two lifetimes, each of --rooms rooms:
//   published: one publish into a new room, nothing else;
//   socket:    a socket opens, one publish, the socket closes.
// Then nothing is asked of the server until each room's history has aged out
// and every room has given its storage back (--age + 40 s), the counts are
// read (GET /__counts), and only then is each room checked to be gone (404:
// those looks would count too). Printed per room: calls into the room object
// and the coordinator by method, rows their SQL wrote, alarms set.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import { launcherIn } from "./local-server.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const before = option("before", null);
const ROOMS = Number(option("rooms", "200"));
const AGE = Number(option("age", "5"));
const firstPort = Number(option("port", "18751"));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const children = [];
// No server outlives this script, whatever ends it.
process.on("exit", () => children.forEach((child) => child.exitCode === null && child.kill("SIGTERM")));
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(130));

/** A worker config whose entry is `dir`'s service with its room and coordinator classes counted. */
function countingConfig(dir) {
  const config = mkdtempSync(join(tmpdir(), "storage-cost-"));
  const service = JSON.stringify(join(resolve(dir), "worker/index.ts"));
  const counting = JSON.stringify(join(root, "load/bench/storage-cost/counting.ts"));
  writeFileSync(
    join(config, "entry.ts"),
    `import service, { Room, Coordinator } from ${service};
import { counting, counts, countsResponse } from ${counting};
const CountedRoom = counting(Room, counts.room);
const CountedCoordinator = counting(Coordinator, counts.coordinator);
export { CountedRoom as Room, CountedCoordinator as Coordinator };
export default {
  fetch(request: Request, env: never, ctx: ExecutionContext) {
    return new URL(request.url).pathname === "/__counts" ? countsResponse() : service.fetch(request, env, ctx);
  },
};
`,
  );
  writeFileSync(
    join(config, "wrangler.toml"),
    `name = "storage-cost"
main = "entry.ts"
compatibility_date = "2026-04-26"
compatibility_flags = ["no_web_socket_compression"]

[[durable_objects.bindings]]
name = "ROOMS"
class_name = "Room"

[[durable_objects.bindings]]
name = "COORDINATOR"
class_name = "Coordinator"

[[migrations]]
tag = "v1"
new_sqlite_classes = ["Room", "Coordinator"]
`,
  );
  return join(config, "wrangler.toml");
}

async function start(dir, port) {
  const env = { ...process.env, PORT: String(port), DATA_DIR: mkdtempSync(join(tmpdir(), "storage-cost-data-")) };
  for (const key of ["PUBLISH_KEY", "TOKEN_SECRET", "WEBHOOK_URL"]) delete env[key];
  const args = [launcherIn(root), "--no-dev-vars", "--gate", "off", "--config", countingConfig(dir), "--var", `HISTORY_MAX_AGE_SECONDS=${AGE}`];
  const child = spawn(process.execPath, args, { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const deadline = Date.now() + 60_000;
  while (!/listening on/.test(out) || !/workerd pid \d+/.test(out)) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`server for ${dir} did not start:\n${out}`);
    await sleep(100);
  }
  return { url: `http://127.0.0.1:${port}`, child, output: () => out };
}

async function inParallel(count, work) {
  let next = 0;
  await Promise.all(Array.from({ length: 10 }, async () => {
    while (next < count) await work(next++);
  }));
}

async function publish(url, room) {
  const res = await fetch(`${url}/rooms/${room}/publish`, { method: "POST", body: "once" });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`publish into ${room}: ${res.status}`);
}

function socketLifetime(url, room) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${url.replace("http", "ws")}/rooms/${room}/ws`);
    ws.once("error", reject);
    ws.once("message", async () => {
      await publish(url, room);
      ws.close(1000);
      ws.once("close", resolve);
    });
  });
}

const perRoom = (counts, rooms) => {
  const out = {};
  for (const [object, c] of Object.entries(counts)) {
    out[object] = {
      calls: Object.fromEntries(Object.entries(c.calls).map(([k, v]) => [k, Math.round((v / rooms) * 100) / 100])),
      rowsWritten: Math.round((c.rowsWritten / rooms) * 100) / 100,
      setAlarm: Math.round((c.setAlarm / rooms) * 100) / 100,
      deleteAll: Math.round((c.deleteAll / rooms) * 100) / 100,
    };
  }
  return out;
};

const targets = [...(before ? [{ name: "before", dir: before }] : []), { name: "this checkout", dir: root }];
const results = [];
for (const [t, target] of targets.entries()) {
  for (const [l, lifetime] of ["published", "socket"].entries()) {
    const server = await start(target.dir, firstPort + t * 2 + l);
    const tag = Math.random().toString(36).slice(2, 8);
    const rooms = Array.from({ length: ROOMS }, (_, i) => `cost-${tag}-${i}`);
    try {
      await inParallel(ROOMS, (i) => (lifetime === "published" ? publish(server.url, rooms[i]) : socketLifetime(server.url, rooms[i])));
    } catch (error) {
      console.error(server.output().slice(-3000));
      throw error;
    }
    await sleep((AGE + 40) * 1000);
    const counts = await (await fetch(`${server.url}/__counts`)).json();
    let left = 0;
    await inParallel(ROOMS, async (i) => {
      if ((await fetch(`${server.url}/rooms/${rooms[i]}`)).status !== 404) left += 1;
    });
    const errors = server.output().split("\n").filter((line) => /"event":"error"| error: /.test(line)).length;
    const result = { target: target.name, lifetime, rooms: ROOMS, age: AGE, stillStored: left, errorLines: errors, perRoom: perRoom(counts, ROOMS) };
    results.push(result);
    console.log(JSON.stringify(result));
    server.child.kill("SIGTERM");
    await new Promise((r) => server.child.once("exit", r));
  }
}
process.exit();
