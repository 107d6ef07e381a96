#!/usr/bin/env node
// A soak under faults against the local server (local-server/server.mjs --no-build; `node tools/build-worker.mjs`
// first), on one data directory for the whole run: many rooms, each with a few raw readers (some of them presence
// members) and a publisher, one room large enough to shard into a root and leaves, and broadcasts, while the
// harness injects, at seeded random moments:
//
//   crash      kill -9 of workerd; the launcher exits when its workerd dies, so the harness starts it again on
//              the same port and data directory
//   restart    SIGTERM to the launcher (every socket closed with 1012), then a start on the same data directory
//   cut        a few readers' TCP connections destroyed by the client (no close frame)
//   stall      a few readers stop reading (and so acknowledging) for 6-12 s: the room marks them behind and,
//              past SLOW_GRACE_MS, closes them with 4008
//   leaf       one leaf of the sharded room aborted (the local server's admin route POST /__local/leaf-abort,
//              which resets that one object and closes its sockets)
//
// With --hold-answer-ms (250 by default) every HTTP publish's answer is held that long after its commit, so most
// crashes land between some publish's commit and its answer.
//
// Publishers send every publish with an Idempotency-Key and retry it with the same key on any failure
// (connection refused or reset, a timeout, 5xx) until it is answered; broadcasts (POST /broadcast to every
// room) likewise, until no room failed. Readers follow docs/protocol.md's three rules (ping, ack, resume with
// since/epoch after every close that means reconnect) and record every message and every `lost` event.
// At the end, with the faults over and every reader level, the checker (fault-soak-check.mjs) holds the
// record to the invariants: every acknowledged publish in its room's history exactly once with its data;
// every reader saw every seq once, in order, with no gap and no `lost` (history keeps the whole run); every
// broadcast at most once per room (once where it was answered as delivered); nothing in history that nobody
// published; each room's presence is its member readers.
//
// Usage:
//   node tools/build-worker.mjs
//   flock /tmp/bench.lock node load/bench/fault-soak.mjs [--seconds 240] [--crashes 20] [--rooms 20] [--seed N]
//        [--readers 3] [--sharded-readers 14] [--rate 3] [--restarts 3] [--cuts 20] [--stalls 12] [--leaf-kills 6]
//        [--hold-answer-ms 250] [--port 18911] [--keep-data]
//   node load/bench/fault-soak.mjs --self-check     the checker on corrupted records only (no server)
//
// Prints a summary on stderr, one JSON object on stdout (also written to load/results/fault-soak-<time>.json),
// and exits 1 when an invariant failed. Bounded: faults end after --seconds (or once all are injected), the
// drain after 120 s, and the whole run is stopped at --seconds + 420 s.

import { mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import WebSocket from "ws";
import { adminClient } from "../../local-server/admin.mjs";
import { checkSoak, dataHash, selfCheck } from "./fault-soak-check.mjs";
import { ROOT, startLocalServer, stopAllLocalServers, stopLocalServer } from "./local-server.mjs";

const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const log = (...parts) => console.error(...parts);

if (argv.includes("--self-check")) {
  const cases = selfCheck();
  for (const c of cases) log(`${c.ok ? "ok  " : "FAIL"} ${c.name}: expected ${c.expect}, reported ${c.reported.join(", ") || "nothing"}`);
  const failed = cases.filter((c) => !c.ok).length;
  log(failed === 0 ? `the checker reported every corruption (${cases.length - 1}) and passed the clean record` : `${failed} case(s) not as expected`);
  process.exit(failed === 0 ? 0 : 1);
}

const SECONDS = Number(option("seconds", "240"));
const CRASHES = Number(option("crashes", "20"));
const ROOMS = Number(option("rooms", "20"));
const SEED = Number(option("seed", String(Date.now() % 1_000_000)));
const READERS = Number(option("readers", "3"));
const SHARDED_READERS = Number(option("sharded-readers", "14"));
const RATE = Number(option("rate", "3"));
const RESTARTS = Number(option("restarts", "3"));
const CUTS = Number(option("cuts", "20"));
const STALLS = Number(option("stalls", "12"));
const LEAF_KILLS = Number(option("leaf-kills", "6"));
const BROADCAST_EVERY_MS = Number(option("broadcast-every-ms", "8000"));
const PORT = Number(option("port", "18911"));
const HOLD_ANSWER_MS = Number(option("hold-answer-ms", "250"));
const KEEP_DATA = argv.includes("--keep-data");
const SHARD_SOCKETS = 4;
const DRAIN_MS = 120_000;

const VARS = {
  // One object takes 4 sockets: the big room becomes a root and leaves, the others stay one object.
  ROOM_SHARD_SOCKETS: String(SHARD_SOCKETS),
  ROOM_LEAF_RETIRE_MS: "10000",
  // A small window and a short grace, so that a stalled reader falls behind and is closed with 4008.
  WINDOW_BYTES: "4096",
  SLOW_GRACE_MS: "3000",
  // History and keys that outlive the run: every message can be checked, every retry recognised.
  HISTORY_MAX_MESSAGES: "20000",
  HISTORY_MAX_AGE_SECONDS: "86400",
  PUBLISH_DEDUPE_SECONDS: "86400",
  PRESENCE_LEAVE_DELAY_MS: "500",
  // Each HTTP publish's answer held this long after its row is on disk (durable-objects/room/fault-hold.ts; the
  // local server only): a kill -9 then often lands between a commit and its answer, and the retry must get the
  // first seq.
  ...(HOLD_ANSWER_MS > 0 ? { FAULT_HOLD_PUBLISH_ANSWER_MS: String(HOLD_ANSWER_MS) } : {}),
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const started = Date.now();
const elapsed = () => Date.now() - started;
const stamp = () => `${(elapsed() / 1000).toFixed(1).padStart(6)} s`;

// Seeded randomness for what is injected, when and where (mulberry32).
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = prng(SEED);
const pick = (list) => list[Math.floor(random() * list.length)];

// The whole run is bounded, whatever happens; servers go with the process (local-server.mjs).
const hardStop = setTimeout(() => {
  log(`fault-soak: time limit (${SECONDS + 420} s) reached; stopping`);
  process.exit(2);
}, (SECONDS + 420) * 1000);
hardStop.unref();
process.on("SIGINT", () => void stopAllLocalServers().then(() => process.exit(130)));

// ---------------------------------------------------------------------------
// The server, restarted on one data directory.

const BIG = "soak-big";
const roomNames = [...Array.from({ length: ROOMS }, (_, i) => `soak-r${String(i).padStart(2, "0")}`), BIG];
const httpUrl = `http://127.0.0.1:${PORT}`;
const wsUrl = `ws://127.0.0.1:${PORT}`;
let server = null;
let dataDir;
const faults = { crash: 0, restart: 0, cut: 0, stall: 0, leaf: 0, leafMissed: 0 };
const downtimes = [];

async function start() {
  for (let attempt = 1; ; attempt++) {
    try {
      server = await startLocalServer({ port: PORT, vars: VARS, label: "fault-soak", ...(dataDir ? { dataDir } : {}) });
      dataDir = server.dataDir;
      return;
    } catch (error) {
      if (attempt >= 5) throw error;
      log(`${stamp()} start failed (attempt ${attempt}): ${String(error).slice(0, 300)}`);
      await sleep(1000);
    }
  }
}

async function crash() {
  const down = Date.now();
  try {
    process.kill(server.pid, "SIGKILL");
  } catch {
    // Already gone.
  }
  // The launcher notices its workerd's death and exits; this waits for it.
  await stopLocalServer(server, { keepData: true });
  server = null;
  await sleep(200 + random() * 1300);
  await start();
  downtimes.push(Date.now() - down);
}

async function restart() {
  const down = Date.now();
  await stopLocalServer(server, { keepData: true });
  server = null;
  await sleep(200 + random() * 800);
  await start();
  downtimes.push(Date.now() - down);
}

/** The launcher's private directory (its admin socket's), from the sockets workerd holds (test/helpers/server.ts). */
function privateDirOf(workerdPid) {
  const owned = new Set();
  for (const fd of readdirSync(`/proc/${workerdPid}/fd`)) {
    try {
      const inode = /socket:\[(\d+)\]/.exec(readlinkSync(`/proc/${workerdPid}/fd/${fd}`))?.[1];
      if (inode) owned.add(inode);
    } catch {
      // Closed meanwhile.
    }
  }
  const path = readFileSync("/proc/net/unix", "utf8")
    .split("\n")
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .find((cols) => cols.length >= 8 && owned.has(cols[6]))?.[7];
  return path === undefined ? null : dirname(path);
}

const leafKills = [];
async function killLeaf() {
  const res = await fetch(`${httpUrl}/rooms/${BIG}`, { signal: AbortSignal.timeout(5000) });
  const stats = await res.json();
  const leaves = (stats.leaves ?? []).filter((leaf) => leaf.connections > 0);
  if (leaves.length === 0) {
    faults.leafMissed += 1;
    return;
  }
  const victim = pick(leaves);
  const dir = privateDirOf(server.pid);
  if (!dir) throw new Error("no admin socket");
  const admin = adminClient(join(dir, "admin.sock"));
  try {
    const answer = await admin.call("POST", "/leaf-abort", { room: BIG, index: victim.index });
    leafKills.push({ at: elapsed(), index: victim.index, connections: victim.connections, aborted: answer.json?.aborted === true });
    if (answer.json?.aborted === true) faults.leaf += 1;
    else faults.leafMissed += 1;
  } finally {
    admin.close();
  }
}

// ---------------------------------------------------------------------------
// Readers: docs/examples/raw-client.mjs, recording what they read.

const STOP = new Set([1000, 4000, 4001, 4003]);

class Reader {
  constructor(room, index, member) {
    this.room = room;
    this.name = `${room}#${index}`;
    this.member = member;
    this.events = [];
    this.since = null;
    this.epoch = null;
    this.lastSeq = null;
    this.connects = 0;
    this.closes = {};
    this.presence = 0;
    this.errors = [];
    this.stopped = false;
    this.stalled = false;
    this.ws = null;
  }

  connect() {
    if (this.stopped) return;
    const url = new URL(`${wsUrl}/rooms/${this.room}/ws`);
    if (this.member) url.searchParams.set("member", this.member);
    if (this.since !== null) {
      url.searchParams.set("since", String(this.since));
      url.searchParams.set("epoch", this.epoch);
    }
    const ws = new WebSocket(url, { handshakeTimeout: 10_000 });
    this.ws = ws;
    this.connects += 1;
    let welcome = null;
    let last = null;
    let unacked = 0;
    let ackTimer = null;
    let closingSince = null;
    const pinger = setInterval(() => ws.readyState === WebSocket.OPEN && ws.send("ping"), 25_000);
    // A close frame from the room leaves workerd's TCP connection open for a while (docs/protocol.md, "A
    // runtime behaviour to know"), and ws reports the close only when TCP ends: end it a second after.
    const watchdog = setInterval(() => {
      if (ws.readyState !== WebSocket.CLOSING) return;
      closingSince ??= Date.now();
      if (Date.now() - closingSince > 1000) ws.terminate();
    }, 250);
    const ack = () => {
      clearTimeout(ackTimer);
      ackTimer = null;
      unacked = 0;
      if (last && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "ack", seq: last.seq, tag: last.tag }));
      last = null;
    };
    ws.on("message", (raw) => {
      const text = raw.toString();
      if (text === "pong") return;
      let parsed;
      try {
        parsed = JSON.parse(text);
      } catch {
        this.errors.push(`frame not JSON: ${text.slice(0, 80)}`);
        return;
      }
      for (const event of [].concat(parsed)) {
        if (event.type === "welcome") {
          welcome = event;
          this.events.push({ t: "welcome", seq: event.seq, epoch: event.epoch });
          this.since ??= event.seq;
          this.epoch ??= event.epoch;
        } else if (event.type === "lost") {
          this.events.push({ t: "lost", from: event.from, to: event.to, reason: event.reason });
          this.since = event.to;
          if (event.reason === "epoch") this.epoch = welcome.epoch;
        } else if (event.type === "message") {
          this.events.push({ t: "m", seq: event.seq, id: event.data?.id, h: dataHash(event.data) });
          this.since = event.seq;
          this.lastSeq = event.seq;
          last = event;
        } else if (event.type === "presence") {
          this.presence += 1;
          last = { seq: this.since, tag: event.tag };
        } else if (event.type === "error") {
          this.errors.push(`error ${event.code}`);
        }
      }
      unacked += text.length;
      if (!welcome || unacked * 2 >= welcome.window) ack();
      else ackTimer ??= setTimeout(ack, 50);
    });
    ws.on("error", () => {});
    ws.on("close", (code) => {
      clearInterval(pinger);
      clearInterval(watchdog);
      clearTimeout(ackTimer);
      this.closes[code] = (this.closes[code] ?? 0) + 1;
      if (this.ws === ws) this.ws = null;
      if (this.stopped) return;
      if (STOP.has(code)) {
        this.errors.push(`closed with ${code}: not reconnecting`);
        return;
      }
      setTimeout(() => this.connect(), Math.random() * 1000);
    });
  }

  /** Cuts the TCP connection: no close frame, as a lost network. */
  cut() {
    this.ws?.terminate();
  }

  /** Stops reading (and so acknowledging) for `ms`. */
  async stall(ms) {
    const ws = this.ws;
    if (!ws || this.stalled) return false;
    this.stalled = true;
    ws.pause();
    await sleep(ms);
    ws.resume();
    this.stalled = false;
    return true;
  }

  close() {
    this.stopped = true;
    this.ws?.close(1000);
  }
}

// ---------------------------------------------------------------------------
// Publishers and broadcasts, retried with their key until answered.

const publishes = [];
const unanswered = [];
const refusals = [];
const publishStats = { attempts: 0, retries: 0, failures: {} };
let publishing = true;

const countFailure = (what) => (publishStats.failures[what] = (publishStats.failures[what] ?? 0) + 1);
const failureName = (error) => String(error?.cause?.code ?? error?.name ?? error).slice(0, 40);

/** POSTs until answered 200 (or refused with a 4xx that a retry would not change). */
async function postUntilAnswered(path, key, body, deadline) {
  for (let attempt = 0; ; attempt++) {
    if (attempt > 0) {
      publishStats.retries += 1;
      await sleep(Math.min(2000, 100 * 2 ** Math.min(attempt, 5)) * (0.5 + Math.random() / 2));
    }
    if (Date.now() > deadline) return { status: 0, attempts: attempt };
    publishStats.attempts += 1;
    try {
      const res = await fetch(`${httpUrl}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": key },
        body,
        signal: AbortSignal.timeout(15_000),
      });
      const text = await res.text();
      if (res.status === 200) return { status: 200, json: JSON.parse(text), attempts: attempt + 1 };
      countFailure(`http ${res.status}`);
      if (res.status < 500 && res.status !== 408 && res.status !== 429) return { status: res.status, text, attempts: attempt + 1 };
    } catch (error) {
      countFailure(failureName(error));
    }
  }
}

async function publisher(room, lane) {
  for (let n = 1; publishing; n++) {
    const id = `p:${room}:${lane}:${n}`;
    const data = { id, room, lane, n, text: `message ${n} of ${room}/${lane}`.padEnd(500, ".") };
    const key = `soak-${SEED}-${room}-${lane}-${n}`;
    const answer = await postUntilAnswered(`/rooms/${room}/publish`, key, JSON.stringify(data), Date.now() + 180_000);
    if (answer.status === 200) publishes.push({ room, id, key, seq: answer.json.seq, data, attempts: answer.attempts, duplicate: answer.json.duplicate === true });
    else if (answer.status === 0) unanswered.push({ room, id, key });
    else refusals.push({ room, id, key, status: answer.status, text: answer.text?.slice(0, 200) });
    await sleep((1000 / RATE) * (0.5 + Math.random()));
  }
}

const broadcasts = [];
async function broadcaster() {
  for (let n = 1; publishing; n++) {
    await sleep(BROADCAST_EVERY_MS * (0.5 + Math.random()));
    if (!publishing) break;
    const key = `soak-b-${SEED}-${n}`;
    const id = `b:${key}`;
    const body = JSON.stringify({ data: { id, b: key }, rooms: roomNames });
    const deadline = Date.now() + 180_000;
    let answer;
    let requests = 0;
    // A 200 may name rooms that failed: the same key again delivers to them and to nobody twice.
    do {
      answer = await postUntilAnswered("/broadcast", key, body, deadline);
      requests += 1;
    } while (answer.status === 200 && (answer.json.failedCount > 0 || answer.json.failedShards.length > 0) && Date.now() < deadline);
    const complete = answer.status === 200 && answer.json.rooms === roomNames.length && answer.json.failedCount === 0;
    broadcasts.push({ key, id, rooms: roomNames, complete, requests, answer: answer.json ?? { status: answer.status } });
  }
}

// ---------------------------------------------------------------------------
// Faults at seeded moments.

function schedule() {
  const span = SECONDS * 1000;
  const plan = [];
  // Crashes: one in each of CRASHES equal slots, somewhere in its middle.
  for (let i = 0; i < CRASHES; i++) plan.push({ kind: "crash", at: ((i + 0.25 + random() * 0.5) * span) / CRASHES });
  const anywhere = () => 5000 + random() * (span - 10_000);
  for (let i = 0; i < RESTARTS; i++) plan.push({ kind: "restart", at: anywhere() });
  for (let i = 0; i < CUTS; i++) plan.push({ kind: "cut", at: anywhere() });
  for (let i = 0; i < STALLS; i++) plan.push({ kind: "stall", at: anywhere() });
  for (let i = 0; i < LEAF_KILLS; i++) plan.push({ kind: "leaf", at: anywhere() });
  return plan.sort((a, b) => a.at - b.at);
}

const stalls = [];
async function injectFaults(readers) {
  for (const fault of schedule()) {
    const wait = fault.at - elapsed();
    if (wait > 0) await sleep(wait);
    try {
      if (fault.kind === "crash") {
        await crash();
        faults.crash += 1;
      } else if (fault.kind === "restart") {
        await restart();
        faults.restart += 1;
      } else if (fault.kind === "cut") {
        const victims = Array.from({ length: 1 + Math.floor(random() * 4) }, () => pick(readers));
        for (const reader of victims) reader.cut();
        faults.cut += victims.length;
      } else if (fault.kind === "stall") {
        const victims = [...new Set(Array.from({ length: 1 + Math.floor(random() * 3) }, () => pick(readers)))];
        const ms = 6000 + random() * 6000;
        for (const reader of victims) {
          // Stalls run beside the next faults.
          void reader.stall(ms).then((did) => did && stalls.push({ reader: reader.name, ms: Math.round(ms) }));
        }
        faults.stall += victims.length;
      } else if (fault.kind === "leaf") {
        await killLeaf();
      }
      log(`${stamp()} ${fault.kind}`);
    } catch (error) {
      log(`${stamp()} ${fault.kind} failed: ${String(error).slice(0, 200)}`);
      if (!server) await start();
    }
  }
}

// ---------------------------------------------------------------------------

async function getJson(path) {
  const res = await fetch(`${httpUrl}${path}`, { signal: AbortSignal.timeout(10_000) });
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status}`);
  return res.json();
}

async function readHistory(room) {
  const messages = [];
  let epoch = null;
  let query = "?after=0&limit=1000";
  for (;;) {
    const page = await getJson(`/rooms/${room}/messages${query}`);
    epoch = page.epoch;
    if (page.lost) throw new Error(`${room}: history reports lost ${JSON.stringify(page.lost)}`);
    messages.push(...page.messages.map((m) => ({ seq: m.seq, data: m.data })));
    if (page.cursor === null) return { epoch, history: messages };
    query = `?cursor=${encodeURIComponent(page.cursor)}&limit=1000`;
  }
}

async function main() {
  log(`fault-soak: seed ${SEED}, ${SECONDS} s, ${ROOMS} rooms × ${READERS} readers + ${BIG} × ${SHARDED_READERS}, ${RATE} msg/s per room, faults: ${CRASHES} crashes, ${RESTARTS} restarts, ${CUTS} cuts, ${STALLS} stalls, ${LEAF_KILLS} leaf kills`);
  await start();
  const readers = [];
  for (const room of roomNames) {
    const count = room === BIG ? SHARDED_READERS : READERS;
    for (let i = 0; i < count; i++) {
      // Every reader but the last of each room is a member (open mode: ?member=).
      const reader = new Reader(room, i, i < count - 1 ? `${room}-m${i}` : null);
      readers.push(reader);
      reader.connect();
      if (room === BIG) await sleep(100);
    }
  }
  // Every reader welcomed before the first publish: each one's record starts at seq 0.
  const welcomeDeadline = Date.now() + 30_000;
  while (readers.some((r) => r.events.length === 0) && Date.now() < welcomeDeadline) await sleep(100);
  const bigStats = await getJson(`/rooms/${BIG}`);
  log(`${stamp()} ${readers.length} readers in; ${BIG}: root ${bigStats.rootConnections ?? bigStats.connections}, leaves ${(bigStats.leaves ?? []).map((l) => l.connections).join("/") || "none"}`);

  const workers = [...roomNames.map((room) => publisher(room, 0)), publisher(BIG, 1), broadcaster()];
  await injectFaults(readers);
  const left = SECONDS * 1000 - elapsed();
  if (left > 0) await sleep(left);
  const faultsEndedAt = elapsed();
  publishing = false;
  log(`${stamp()} faults over; waiting for publishers to be answered`);
  await Promise.all(workers);

  // Drain: every reader level with its room's newest seq.
  const newest = new Map();
  for (const room of roomNames) newest.set(room, (await getJson(`/rooms/${room}/messages?limit=1`)).messages[0]?.seq ?? 0);
  const drainDeadline = Date.now() + DRAIN_MS;
  const behind = () => readers.filter((r) => (r.lastSeq ?? r.events.find((e) => e.t === "welcome")?.seq ?? -1) < newest.get(r.room));
  while (behind().length > 0 && Date.now() < drainDeadline) await sleep(250);
  log(`${stamp()} drained (${behind().length} readers behind)`);

  // Presence: each room's members are its member readers (anyone gone left after the delay).
  const presenceMismatch = [];
  for (const room of roomNames) {
    const expected = readers.filter((r) => r.room === room && r.member).map((r) => r.member).sort();
    const until = Date.now() + 15_000;
    let ids;
    for (;;) {
      const page = await getJson(`/rooms/${room}/presence?limit=1000`);
      ids = page.members.map((m) => m.id).sort();
      if (JSON.stringify(ids) === JSON.stringify(expected) || Date.now() > until) break;
      await sleep(500);
    }
    if (JSON.stringify(ids) !== JSON.stringify(expected)) presenceMismatch.push({ room, expected, members: ids });
  }

  const rooms = {};
  for (const room of roomNames) rooms[room] = await readHistory(room);
  const finalBig = await getJson(`/rooms/${BIG}`);
  for (const reader of readers) reader.close();
  await sleep(300);
  const serverLog = server.output();
  await stopLocalServer(server, { keepData: KEEP_DATA });

  const result = checkSoak({ rooms, publishes, unanswered, broadcasts, readers: readers.map((r) => ({ name: r.name, room: r.room, events: r.events })) });
  const violations = { ...result.violations };
  const examples = { ...result.examples };
  if (refusals.length > 0) {
    violations["publish refused"] = refusals.length;
    examples["publish refused"] = refusals.slice(0, 20).map((r) => `${r.id}: ${r.status} ${r.text}`);
  }
  if (presenceMismatch.length > 0) {
    violations["presence is not the member readers"] = presenceMismatch.length;
    examples["presence is not the member readers"] = presenceMismatch.slice(0, 20).map((p) => `${p.room}: ${p.members.join(",")} (expected ${p.expected.join(",")})`);
  }
  const stopped = readers.filter((r) => r.errors.some((e) => e.startsWith("closed with")));
  if (stopped.length > 0) {
    violations["reader told not to reconnect"] = stopped.length;
    examples["reader told not to reconnect"] = stopped.slice(0, 20).map((r) => `${r.name}: ${r.errors.join("; ")}`);
  }
  if (faults.crash < CRASHES) violations["fewer crashes than asked"] = CRASHES - faults.crash;
  const ok = Object.keys(violations).length === 0;

  const closes = {};
  for (const r of readers) for (const [code, n] of Object.entries(r.closes)) closes[code] = (closes[code] ?? 0) + n;
  const report = {
    scenario: "fault-soak",
    startedAt: new Date(started).toISOString(),
    seed: SEED,
    seconds: SECONDS,
    faultsEndedAtMs: faultsEndedAt,
    totalMs: elapsed(),
    options: { rooms: ROOMS, readers: READERS, shardedReaders: SHARDED_READERS, rate: RATE, crashes: CRASHES, restarts: RESTARTS, cuts: CUTS, stalls: STALLS, leafKills: LEAF_KILLS, vars: VARS },
    faults,
    downtimeMs: { count: downtimes.length, total: downtimes.reduce((a, b) => a + b, 0), max: Math.max(0, ...downtimes) },
    leafKills,
    stalls: stalls.length,
    publishes: {
      acknowledged: publishes.length,
      duplicateAnswers: publishes.filter((p) => p.duplicate).length,
      attempts: publishStats.attempts,
      retries: publishStats.retries,
      failures: publishStats.failures,
      unanswered: unanswered.length,
      refused: refusals.length,
    },
    broadcasts: { sent: broadcasts.length, complete: broadcasts.filter((b) => b.complete).length, requests: broadcasts.reduce((a, b) => a + b.requests, 0) },
    readers: {
      count: readers.length,
      connects: readers.reduce((a, r) => a + r.connects, 0),
      closes,
      presenceEvents: readers.reduce((a, r) => a + r.presence, 0),
      errors: readers.flatMap((r) => r.errors.map((e) => `${r.name}: ${e}`)).slice(0, 50),
    },
    sharded: { leavesAtStart: (bigStats.leaves ?? []).length, leavesAtEnd: (finalBig.leaves ?? []).length, rootConnectionsAtEnd: finalBig.rootConnections ?? null },
    counts: result.counts,
    ok,
    violations,
    examples,
    presenceMismatch,
    serverLogTail: ok ? undefined : serverLog.slice(-4000),
  };

  const c = result.counts;
  const rows = [
    ["faults: kill -9 of workerd", faults.crash],
    ["faults: SIGTERM restarts", faults.restart],
    ["faults: connections cut", faults.cut],
    ["faults: readers stalled", faults.stall],
    ["faults: leaves aborted", `${faults.leaf}${faults.leafMissed ? ` (${faults.leafMissed} found no leaf with sockets)` : ""}`],
    ["server down, total / longest", `${(report.downtimeMs.total / 1000).toFixed(1)} s / ${(report.downtimeMs.max / 1000).toFixed(1)} s`],
    ["publishes acknowledged", c.publishesAcknowledged],
    ["  answered as duplicates", report.publishes.duplicateAnswers],
    ["  retries", publishStats.retries],
    ["  unanswered / refused", `${unanswered.length} / ${refusals.length}`],
    ["broadcasts (complete)", `${broadcasts.length} (${report.broadcasts.complete}), ${c.broadcastDeliveries} room deliveries`],
    ["messages in history", c.historyMessages],
    [`${BIG} leaves, start / end`, `${report.sharded.leavesAtStart} / ${report.sharded.leavesAtEnd}`],
    ["readers / connects / resumes", `${readers.length} / ${report.readers.connects} / ${c.resumes}`],
    ["close codes seen", Object.entries(closes).map(([k, v]) => `${k}:${v}`).join(" ")],
    ["presence events", report.readers.presenceEvents],
    ["deliveries checked", c.deliveriesChecked],
    ["lost", c.lost],
    ["duplicates", c.duplicates],
    ["out of order", c.outOfOrder],
    ["gaps", c.gaps],
    ["time", `${(report.totalMs / 1000).toFixed(0)} s (faults for ${(faultsEndedAt / 1000).toFixed(0)} s)`],
    ["result", ok ? "every invariant held" : `FAILED: ${Object.entries(violations).map(([k, v]) => `${k} ${v}`).join("; ")}`],
  ];
  const width = Math.max(...rows.map((r) => r[0].length));
  log("");
  for (const [k, v] of rows) log(`${k.padEnd(width)}  ${v}`);
  for (const [kind, list] of Object.entries(examples)) log(`  ${kind}: ${list.slice(0, 5).join(" | ")}`);

  const dir = join(ROOT, "load/results");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `fault-soak-${new Date(started).toISOString().replace(/[:.]/g, "-")}.json`);
  writeFileSync(file, JSON.stringify(report, null, 2));
  log(`wrote ${file}`);
  process.stdout.write(`${JSON.stringify(report)}\n`);
  process.exit(ok ? 0 : 1);
}

main().catch(async (error) => {
  log(`fault-soak: ${error?.stack ?? error}`);
  await stopAllLocalServers();
  process.exit(2);
});
