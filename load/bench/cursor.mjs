#!/usr/bin/env node
// Flow-control benchmark: what the per-socket cursor does for readers that keep up, fall
// behind, stall, lie or resume. Every scenario runs against servers this script starts
// (local-server/server.mjs --no-build from --dir, default this checkout; build first with
// `node tools/build-worker.mjs`), each on its own port and fresh data directory, stopped at
// the end; server figures come from workerd's /proc entries (Linux only).
//
// Usage:
//   node load/bench/cursor.mjs <scenario> [--dir PATH] [--label NAME] [--port 18401] [--url URL --pid PID] [options]
//
// --url and --pid (of its workerd) use a server started elsewhere instead of starting one.
//
// Scenarios (options in brackets, defaults shown):
//   burst    [--messages 600 --kib 48 --in-flight 10 --stalled 20 --stall-seconds 0]: 2 fast raw readers (one
//            acking each frame, one every quarter window) and N readers that stop reading; once the fast
//            ones have everything (and --stall-seconds more) the stalled read again
//   sdk      [--messages 2000 --kib 16 --rate 500 | --rate 0 for a burst --in-flight 10]: 2 SDK clients
//            (--sdk PATH to the bundle, default <dir>/client-sdk/dist/sdk.js); counts message events on the wire
//   resume   [--messages 1000 --kib 60 --resumers 1 --probe-ms 50 --ack frame|quarter|raw]: the room is filled
//            first, then N raw clients that only ack (each frame, or every quarter window) connect with
//            since=0 at once; publishers in their own process measure live publishes meanwhile
//   liars    [--seconds 10 --kib 60 --rate 50 --liars 20]: N sockets stop reading and send
//            {"type":"ack","seq":2^53-1} every 100 ms while 2 fast readers keep up
//   baseline-resume [--messages 1000 --kib 60]: the resume scenario against the Node `ws` baseline
//            (load/dist/baseline-server.js; `node load/build.mjs` first), which sends everything at once
//
// It prints one JSON object on stdout. Bounded: gives up after --max-seconds (300).

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import WebSocket from "ws";
import { cpuMs, rssMb, startLocalServer, stopLocalServer } from "./local-server.mjs";

const [scenario, ...rest] = process.argv.slice(2);
const args = Object.fromEntries(rest.reduce((pairs, arg, i, all) => (arg.startsWith("--") ? [...pairs, [arg.slice(2), all[i + 1]]] : pairs), []));
const here = fileURLToPath(new URL("../../", import.meta.url));
const DIR = resolve(args.dir ?? here);
const PORT = Number(args.port ?? 18401);
const MAX_SECONDS = Number(args["max-seconds"] ?? 300);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const started = [];
const hardStop = setTimeout(() => {
  console.error(`gave up after ${MAX_SECONDS} s`);
  void shutdown(2);
}, MAX_SECONDS * 1000);

// ---------------------------------------------------------------------------
// Servers and their resources
// ---------------------------------------------------------------------------

async function startServer(vars = {}) {
  if (args.url) {
    // A server started elsewhere (its vars are its own): --url and the --pid of its workerd.
    const server = { child: null, dataDir: null, pid: Number(args.pid), url: args.url, output: () => "" };
    started.push(server);
    return server;
  }
  // A developer's .dev.vars must not change what is measured; ACCEPT_GATE in the environment picks the gate.
  const server = await startLocalServer({ port: PORT, vars, dir: DIR, gate: "auto", label: "cursor-bench" });
  server.local = true;
  started.push(server);
  return server;
}

async function startBaseline() {
  const script = join(here, "load/dist/baseline-server.js");
  const child = spawn(process.execPath, [script, "--port", String(PORT)], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      if ((await fetch(`http://127.0.0.1:${PORT}/healthz`)).ok) break;
    } catch {
      // not up yet
    }
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`baseline did not start:\n${output}`);
    await sleep(100);
  }
  const server = { child, dataDir: null, pid: child.pid, url: `http://127.0.0.1:${PORT}`, output: () => output };
  started.push(server);
  return server;
}

async function stopServer(server) {
  started.splice(started.indexOf(server), 1);
  if (server.local) return stopLocalServer(server);
  if (server.child === null) return;
  if (server.child.exitCode === null) {
    const exited = new Promise((r) => server.child.once("exit", r));
    server.child.kill("SIGTERM");
    await Promise.race([exited, sleep(10_000)]);
    if (server.child.exitCode === null) server.child.kill("SIGKILL");
  }
}

/** Samples RSS every 100 ms until stopped; returns the peak. */
function rssSampler(pid) {
  let peak = rssMb(pid);
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, rssMb(pid));
    } catch {
      // process gone
    }
  }, 100);
  return { stop: () => (clearInterval(timer), peak), get peak() {
    return peak;
  } };
}

const stats = async (server, room) => (await fetch(`${server.url}/rooms/${room}`)).json();

// ---------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------

/**
 * A raw protocol client. `ack`: "frame" (after every frame), "quarter" (once a quarter of the
 * window is unacknowledged), "raw" (per half window or 50 ms after a frame, as docs/protocol.md's
 * raw client), "none". With `reconnect`, it resumes with since/epoch after a
 * close whose code says so, as docs/protocol.md asks.
 */
class Reader {
  constructor(url, { ack = "frame", reconnect = false } = {}) {
    this.url = url;
    this.ackPolicy = ack;
    this.reconnect = reconnect;
    this.count = 0;
    this.lastSeq = null;
    this.epoch = null;
    this.outOfOrder = 0;
    this.frames = 0;
    this.bytes = 0;
    this.closes = [];
    this.doneAt = null;
    this.target = Infinity;
    this.window = 1 << 20;
    this.stopped = false;
  }

  open() {
    return new Promise((resolveOpen, reject) => {
      const url = new URL(this.url);
      if (this.lastSeq !== null) {
        url.searchParams.set("since", String(this.lastSeq));
        if (this.epoch !== null) url.searchParams.set("epoch", this.epoch);
      }
      const ws = new WebSocket(url, { perMessageDeflate: false });
      this.ws = ws;
      let unacked = 0;
      ws.on("message", (data) => {
        const text = frameText(data);
        if (text === "pong") return;
        this.frames += 1;
        this.bytes += data.length;
        let last = null;
        for (const event of eventsOf(text)) {
          if (event.type === "welcome") {
            this.window = event.window || this.window;
            this.epoch ??= event.epoch;
            this.lastSeq ??= event.seq;
            resolveOpen(this);
          } else if (event.type === "message") {
            if (event.seq !== this.lastSeq + 1) this.outOfOrder += 1;
            this.lastSeq = event.seq;
            this.count += 1;
            last = event;
          } else if (event.type === "lost") {
            this.lastSeq = event.to;
          }
        }
        if (this.count >= this.target && this.doneAt === null) this.doneAt = performance.now();
        if (!last) return;
        unacked += data.length;
        if (this.ackPolicy === "frame" || (this.ackPolicy === "quarter" && unacked * 4 >= this.window)) {
          ws.send(JSON.stringify({ type: "ack", seq: last.seq, tag: last.tag }));
          unacked = 0;
        } else if (this.ackPolicy === "raw") {
          // As the raw client in docs/protocol.md: per half window, or 50 ms after a frame.
          this.toAck = last;
          const ack = () => {
            clearTimeout(this.ackTimer);
            this.ackTimer = null;
            unacked = 0;
            if (this.toAck && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "ack", seq: this.toAck.seq, tag: this.toAck.tag }));
            this.toAck = null;
          };
          if (unacked * 2 >= this.window) ack();
          else this.ackTimer ??= setTimeout(ack, 50);
        }
      });
      ws.on("error", (e) => reject(e));
      const conclude = (code) => {
        if (this.ws !== ws) return;
        this.ws = null;
        this.closes.push(code);
        if (this.reconnect && !this.stopped && ![1000, 4000, 4001, 4003].includes(code)) {
          setTimeout(() => this.open().catch(() => {}), Math.random() * 200);
        }
      };
      ws.on("close", (code) => conclude(code));
      // ws reports "close" only when TCP ends; the close frame is what the server said.
      ws.once("open", () => ws._receiver?.on("conclude", (code) => conclude(code)));
    });
  }

  pause() {
    this.ws?._socket.pause();
  }

  resume() {
    this.ws?._socket.resume();
  }

  close() {
    this.stopped = true;
    this.ws?.terminate();
  }
}

/**
 * The events of a frame. Message frames are read with a pattern rather than JSON.parse: the
 * readers of one process parse gigabytes in a resume run, and parsing the payloads would make
 * the client, not the server, the thing measured. Events we build put seq first and tag last.
 */
const MESSAGE = /\{"type":"message","seq":(\d+),.*?(?:,"tag":(\d+))?\}(?=,\{"type"|\]?$)/gs;
/** A frame's text; of a large single-message frame only its head and tail, which is all eventsOf needs. */
function frameText(data) {
  if (data.length < 8192 || data[0] !== 0x7b /* { */) return data.toString();
  return `${data.subarray(0, 64).toString("latin1").replace(/,"data":.*$/s, "")},"data":0${data.subarray(data.length - 64).toString("latin1").replace(/^.*?(,"ts":)/s, "$1")}`;
}

function eventsOf(text) {
  if (!text.startsWith('{"type":"message"') && !text.startsWith('[{"type":"message"')) return [].concat(JSON.parse(text));
  return [...text.matchAll(MESSAGE)].map((m) => ({ type: "message", seq: Number(m[1]), tag: m[2] === undefined ? undefined : Number(m[2]) }));
}

function payload(i, kib) {
  return JSON.stringify({ i, pad: "x".repeat(Math.max(0, kib * 1024 - 100)) });
}

/** Publishes `count` messages with `inFlight` concurrent HTTP publishers; returns {ms, answers}. */
async function publishAll(server, room, count, kib, inFlight, onAnswer = () => {}) {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) {
        const i = next++;
        const res = await fetch(`${server.url}/rooms/${room}/publish`, { method: "POST", headers: { "content-type": "application/json" }, body: payload(i, kib) });
        if (!res.ok) throw new Error(`publish ${i}: HTTP ${res.status} ${await res.text()}`);
        onAnswer(await res.json());
      }
    }),
  );
  return { ms: performance.now() - t0, t0 };
}

/** Publishes into `url` every `intervalMs` from a child process until stopped; resolves with the answer times (ms) seen while the resumes ran. */
function probeProcess(url, intervalMs) {
  const code = `
    const times = [];
    let on = true;
    process.stdin.on("data", () => { on = false; });
    (async () => {
      while (on) {
        const t = performance.now();
        const res = await fetch(${JSON.stringify(url)}, { method: "POST", body: "probe" });
        await res.arrayBuffer();
        times.push([Math.round(t), performance.now() - t]);
        await new Promise((r) => setTimeout(r, ${intervalMs}));
      }
      process.stdout.write(JSON.stringify(times));
    })();`;
  const child = spawn(process.execPath, ["-e", code], { stdio: ["pipe", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  return {
    stop: () =>
      new Promise((resolveStop) => {
        child.once("exit", () => resolveStop(JSON.parse(out || "[]")));
        child.stdin.end("stop");
      }),
  };
}

function summarize(samples) {
  const times = samples.map(([, ms]) => ms);
  const sorted = [...times].sort((a, b) => a - b);
  const at = (p) => round(sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]);
  const slowest = samples.reduce((a, b) => (b[1] > a[1] ? b : a), [0, 0]);
  return { count: sorted.length, p50: at(0.5), p99: at(0.99), max: round(sorted.at(-1)), slowestStartedAtMs: slowest[0] - (samples[0]?.[0] ?? 0) };
}

async function waitUntil(check, ms, what) {
  const deadline = performance.now() + ms;
  while (!check()) {
    if (performance.now() > deadline) return false;
    await sleep(20);
  }
  return true;
}

const round = (x, digits = 0) => (x === null || x === undefined || Number.isNaN(x) ? null : Number(x.toFixed(digits)));

// ---------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------

async function burst() {
  const messages = Number(args.messages ?? 600);
  const kib = Number(args.kib ?? 48);
  const inFlight = Number(args["in-flight"] ?? 10);
  const stalledCount = Number(args.stalled ?? 20);
  const server = await startServer();
  const room = "burst";
  const wsUrl = `${server.url.replace("http", "ws")}/rooms/${room}/ws`;
  const fast = [new Reader(wsUrl, { ack: "frame" }), new Reader(wsUrl, { ack: "quarter" })];
  const stalled = Array.from({ length: stalledCount }, () => new Reader(wsUrl, { ack: "frame", reconnect: true }));
  await Promise.all([...fast, ...stalled].map((r) => r.open()));
  for (const r of stalled) r.pause();
  for (const r of [...fast, ...stalled]) r.target = messages;
  await sleep(1000);
  const rss0 = rssMb(server.pid);
  const cpu0 = cpuMs(server.pid);
  const sampler = rssSampler(server.pid);
  const published = await publishAll(server, room, messages, kib, inFlight);
  await waitUntil(() => fast.every((r) => r.count >= messages || r.closes.length > 0), 60_000);
  const peak = sampler.stop();
  const cpu1 = cpuMs(server.pid);
  const during = await stats(server, room);
  // The stalled readers read again (after --stall-seconds more); they ack, and resume after a 4008, like the raw client.
  await sleep(Number(args["stall-seconds"] ?? 0) * 1000);
  const resumedAt = performance.now();
  for (const r of stalled) r.resume();
  const caughtUp = await waitUntil(() => stalled.every((r) => r.count >= messages), Number(args["catch-up-seconds"] ?? 60) * 1000);
  const after = await stats(server, room);
  const result = {
    scenario: "burst",
    label: args.label ?? null,
    messages,
    kib,
    inFlight,
    stalled: stalledCount,
    publishMs: round(published.ms),
    fast: fast.map((r) => ({
      ack: r.ackPolicy,
      received: r.count,
      outOfOrder: r.outOfOrder,
      closes: [...r.closes],
      doneMs: round(r.doneAt === null ? null : r.doneAt - published.t0),
      doneOverPublish: round(r.doneAt === null ? null : (r.doneAt - published.t0) / published.ms, 2),
    })),
    stalledEnd: stalledCount
      ? {
          allCaughtUp: caughtUp,
          received: [Math.min(...stalled.map((r) => r.count)), Math.max(...stalled.map((r) => r.count))],
          outOfOrder: stalled.reduce((n, r) => n + r.outOfOrder, 0),
          closedWith: stalled.flatMap((r) => r.closes).reduce((acc, c) => ((acc[c] = (acc[c] ?? 0) + 1), acc), {}),
          secondsToCatchUp: round((performance.now() - resumedAt) / 1000, 1),
        }
      : null,
    server: {
      rssBeforeMb: round(rss0, 1),
      rssPeakMb: round(peak, 1),
      rssGrowthMb: round(peak - rss0, 1),
      cpuMsPublishing: round(cpu1 - cpu0),
      behindDuring: during.behind,
      kicks: after.kicks,
      catchUpFrames: after.catchUpFrames,
      historyRowsRead: after.historyRowsRead,
      historyRowsWritten: after.historyRowsWritten,
      windowBytesMax: during.windowBytesMax,
    },
  };
  for (const r of [...fast, ...stalled]) r.close();
  await stopServer(server);
  return result;
}

async function sdk() {
  const messages = Number(args.messages ?? 2000);
  const kib = Number(args.kib ?? 16);
  const rate = Number(args.rate ?? 500);
  const inFlight = Number(args["in-flight"] ?? 10);
  const bundle = resolve(args.sdk ?? join(DIR, "client-sdk/dist/sdk.js"));
  const { RoomClient } = await import(pathToFileURL(bundle).href);
  const server = await startServer();
  const room = "sdk";
  // Counts message events as they arrive on the wire, before the client sees them.
  const wire = [];
  const Counting = class extends WebSocket {
    constructor(url) {
      super(url, { perMessageDeflate: false });
      const record = { seqs: new Map(), events: 0 };
      wire.push(record);
      this.on("message", (data) => {
        const text = data.toString();
        if (text === "pong") return;
        for (const e of [].concat(JSON.parse(text))) {
          if (e.type !== "message") continue;
          record.events += 1;
          record.seqs.set(e.seq, (record.seqs.get(e.seq) ?? 0) + 1);
        }
      });
    }
  };
  const clients = [0, 1].map(() => {
    const client = new RoomClient(`${server.url.replace("http", "ws")}/rooms/${room}/ws`, { WebSocket: Counting });
    const seen = { count: 0, doneAt: null };
    client.addEventListener("message", () => {
      seen.count += 1;
      if (seen.count >= messages && seen.doneAt === null) seen.doneAt = performance.now();
    });
    return { client, seen };
  });
  await waitUntil(() => clients.every((c) => c.client.state === "open"), 10_000);
  await sleep(500);
  const cpu0 = cpuMs(server.pid);
  let published;
  if (rate > 0) {
    // Paced: `rate` publishes a second from `inFlight` publishers.
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < messages) {
          const i = next++;
          const due = t0 + (i * 1000) / rate;
          const wait = due - performance.now();
          if (wait > 0) await sleep(wait);
          const res = await fetch(`${server.url}/rooms/${room}/publish`, { method: "POST", headers: { "content-type": "application/json" }, body: payload(i, kib) });
          if (!res.ok) throw new Error(`HTTP ${res.status}`);
          await res.arrayBuffer();
        }
      }),
    );
    published = { ms: performance.now() - t0, t0 };
  } else {
    published = await publishAll(server, room, messages, kib, inFlight);
  }
  await waitUntil(() => clients.every((c) => c.seen.count >= messages), 120_000);
  const cpu1 = cpuMs(server.pid);
  const roomStats = await stats(server, room);
  const result = {
    scenario: "sdk",
    label: args.label ?? null,
    messages,
    kib,
    rate: rate || "burst",
    publishMs: round(published.ms),
    achievedRate: round(messages / (published.ms / 1000)),
    clients: clients.map((c, i) => ({
      delivered: c.seen.count,
      doneOverPublish: round(c.seen.doneAt === null ? null : (c.seen.doneAt - published.t0) / published.ms, 2),
    })),
    wire: wire.map((w) => ({ messageEvents: w.events, distinct: w.seqs.size, sentTwice: w.events - w.seqs.size })),
    server: { cpuMs: round(cpu1 - cpu0), catchUpFrames: roomStats.catchUpFrames, drops: roomStats.drops, kicks: roomStats.kicks },
  };
  for (const c of clients) c.client.close();
  await stopServer(server);
  return result;
}

async function resumeScenario(baseline = false) {
  const messages = Number(args.messages ?? 1000);
  const kib = Number(args.kib ?? 60);
  const resumers = Number(args.resumers ?? 1);
  const probeMs = Number(args["probe-ms"] ?? 50);
  // History room for the probes' messages too, so the resumes find all of the fill.
  const server = baseline ? await startBaseline() : await startServer({ HISTORY_MAX_MESSAGES: String(messages + 10_000) });
  const room = "resume";
  await publishAll(server, room, messages, kib, 4);
  // One more write into each probed room first: SQLite checkpoints the write-ahead log the fill
  // left behind on the next commit, a one-off stall that belongs to the fill, not to the resumes.
  for (const target of [room, "probe"]) await (await fetch(`${server.url}/rooms/${target}/publish`, { method: "POST", body: "warm-up" })).arrayBuffer();
  const before = baseline ? null : await stats(server, room);
  await sleep(1000);
  const rssIdle = rssMb(server.pid);
  const sampler = rssSampler(server.pid);
  const cpu0 = cpuMs(server.pid);
  const wsUrl = `${server.url.replace("http", "ws")}/rooms/${room}/ws`;
  const readers = Array.from({ length: resumers }, () => Object.assign(new Reader(wsUrl, { ack: args.ack ?? "frame" }), { lastSeq: 0 }));
  for (const r of readers) r.target = messages;
  // Live publishers (in a process of their own, so the readers' work does not delay them) measure
  // how long a publish waits while the resumes run: into the resuming room, and into another.
  const probes = [probeProcess(`${server.url}/rooms/${room}/publish`, probeMs), probeProcess(`${server.url}/rooms/probe/publish`, probeMs)];
  await sleep(200);
  const t0 = performance.now();
  await Promise.all(readers.map((r) => r.open()));
  const done = await waitUntil(() => readers.every((r) => r.count >= messages), Number(args["resume-seconds"] ?? 120) * 1000);
  const elapsed = performance.now() - t0;
  const [sameRoom, otherRoom] = await Promise.all(probes.map((p) => p.stop()));
  const cpu1 = cpuMs(server.pid);
  const peak = sampler.stop();
  const after = baseline ? null : await stats(server, room);
  const result = {
    scenario: baseline ? "baseline-resume" : "resume",
    label: args.label ?? (baseline ? "Node ws baseline" : null),
    messages,
    kib,
    resumers,
    allDelivered: done,
    seconds: round(elapsed / 1000, 2),
    perReader: readers.map((r) => ({ received: r.count, frames: r.frames, outOfOrder: r.outOfOrder, closes: [...r.closes], mb: round(r.bytes / 1048576, 1) })),
    server: {
      rssIdleMb: round(rssIdle, 1),
      rssPeakMb: round(peak, 1),
      rssOverIdleMb: round(peak - rssIdle, 1),
      cpuMs: round(cpu1 - cpu0),
      historyRowsRead: after ? after.historyRowsRead - before.historyRowsRead : null,
      // Per message delivered (the probes' messages included): what catch-up read for what it sent.
      rowsReadPerMessage: after ? round((after.historyRowsRead - before.historyRowsRead) / readers.reduce((n, r) => n + r.count, 0), 3) : null,
      catchUpFrames: after ? after.catchUpFrames - before.catchUpFrames : null,
    },
    livePublishMs: { sameRoom: summarize(sameRoom), otherRoom: summarize(otherRoom) },
  };
  for (const r of readers) r.close();
  await stopServer(server);
  return result;
}

async function liars() {
  const seconds = Number(args.seconds ?? 10);
  const kib = Number(args.kib ?? 60);
  const rate = Number(args.rate ?? 50);
  const count = Number(args.liars ?? 20);
  const server = await startServer();
  const room = "liars";
  const wsUrl = `${server.url.replace("http", "ws")}/rooms/${room}/ws`;
  const fast = [new Reader(wsUrl, { ack: "frame" }), new Reader(wsUrl, { ack: "frame" })];
  const lying = Array.from({ length: count }, () => new Reader(wsUrl, { ack: "none" }));
  await Promise.all([...fast, ...lying].map((r) => r.open()));
  for (const r of lying) r.pause();
  const lies = setInterval(() => {
    for (const r of lying) if (r.ws?.readyState === WebSocket.OPEN) r.ws.send(JSON.stringify({ type: "ack", seq: Number.MAX_SAFE_INTEGER, tag: 0 }));
  }, 100);
  await sleep(500);
  const rss0 = rssMb(server.pid);
  const sampler = rssSampler(server.pid);
  const total = Math.round(seconds * rate);
  const t0 = performance.now();
  for (let i = 0; i < total; i++) {
    const due = t0 + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    await (await fetch(`${server.url}/rooms/${room}/publish`, { method: "POST", headers: { "content-type": "application/json" }, body: payload(i, kib) })).arrayBuffer();
  }
  await sleep(1000);
  clearInterval(lies);
  const peak = sampler.stop();
  const s = await stats(server, room);
  // Liars closed by the room see their close frame only once they read again.
  for (const r of lying) r.resume();
  await sleep(1500);
  const result = {
    scenario: "liars",
    label: args.label ?? null,
    liars: count,
    published: total,
    kib,
    fastReceived: fast.map((r) => r.count),
    fastOutOfOrder: fast.reduce((n, r) => n + r.outOfOrder, 0),
    liarsClosedWith: lying.flatMap((r) => r.closes).reduce((acc, c) => ((acc[c] = (acc[c] ?? 0) + 1), acc), {}),
    server: { rssBeforeMb: round(rss0, 1), rssPeakMb: round(peak, 1), rssGrowthMb: round(peak - rss0, 1), connectionsAtEnd: s.connections, kicks: s.kicks, refusals: s.refusals },
  };
  for (const r of [...fast, ...lying]) r.close();
  await stopServer(server);
  return result;
}

async function shutdown(code) {
  clearTimeout(hardStop);
  for (const server of [...started]) await stopServer(server).catch(() => {});
  process.exit(code);
}

const scenarios = { burst, sdk, resume: () => resumeScenario(false), "baseline-resume": () => resumeScenario(true), liars };

async function main() {
  const run = scenarios[scenario];
  if (!run) {
    console.error(`unknown scenario ${JSON.stringify(scenario)}; one of ${Object.keys(scenarios).join(", ")}`);
    return shutdown(2);
  }
  const result = await run();
  result.loadavg = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  console.log(JSON.stringify(result, null, 2));
  await shutdown(0);
}

process.on("uncaughtException", (error) => {
  console.error(error);
  void shutdown(1);
});
main().catch((error) => {
  console.error(error);
  void shutdown(1);
});
