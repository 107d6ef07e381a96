import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { WebSocket } from "ws";
import type { Options } from "../src/kit/args";
import { defineBench } from "../src/kit/bench";
import { REPO_ROOT } from "../src/kit/paths";
import { cpuMs, loadAverage, rssMb } from "../src/kit/proc";
import { RawClient, type AckPolicy } from "../src/kit/raw-client";
import { Server } from "../src/kit/server";
import { paced, sleep, waitFor } from "../src/kit/time";
import { percentileOfSorted } from "../src/stats/percentile";

type Args = Options<string>;
const round = (x: number | null | undefined, digits = 0): number | null => (x === null || x === undefined || Number.isNaN(x) ? null : Number(x.toFixed(digits)));
const count = (codes: number[]): Record<string, number> => codes.reduce<Record<string, number>>((acc, c) => ((acc[c] = (acc[c] ?? 0) + 1), acc), {});

/** The server measured: one started here (from --dir, with `vars`), or one started elsewhere (--url and its workerd's --pid). */
interface Target {
  url: string;
  wsUrl: string;
  pid: number;
  stop(): Promise<void>;
}

async function startTarget(args: Args, vars: Record<string, string> = {}, baseline = false): Promise<Target> {
  const url = args.text("url");
  if (url !== undefined) return { url, wsUrl: url.replace(/^http/, "ws"), pid: args.int("pid"), stop: async () => undefined };
  // A developer's .dev.vars must not change what is measured; ACCEPT_GATE in the environment picks the gate.
  const server = await Server.start(baseline ? { kind: "baseline", port: args.int("port") } : { kind: "ours", port: args.int("port"), vars, checkout: resolve(args.text("dir") ?? REPO_ROOT) });
  return { url: server.url, wsUrl: server.wsUrl, pid: server.pid, stop: () => server.stop() };
}

/** A reader that counts its messages and notes when it had `target` of them. */
class Reader extends RawClient {
  doneAt: number | null = null;
  target = Infinity;

  constructor(url: string, ack: AckPolicy, options: { reconnect?: boolean; since?: number } = {}) {
    super(url, {
      ack,
      skim: true,
      ...(options.reconnect ? { reconnectWithinMs: 200 } : {}),
      ...(options.since === undefined ? {} : { since: options.since }),
      onEvent: () => {
        if (this.received >= this.target && this.doneAt === null) this.doneAt = performance.now();
      },
    });
  }
}

/** Samples RSS every 100 ms until stopped; the peak. */
function rssSampler(pid: number): { stop: () => number } {
  let peak = rssMb(pid);
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, rssMb(pid));
    } catch {
      // process gone
    }
  }, 100);
  return { stop: () => (clearInterval(timer), peak) };
}

const stats = async (target: Target, room: string): Promise<Record<string, number>> => (await (await fetch(`${target.url}/rooms/${room}`)).json()) as Record<string, number>;
const payload = (i: number, kib: number): string => JSON.stringify({ i, pad: "x".repeat(Math.max(0, kib * 1024 - 100)) });

/** Publishes `total` messages with `inFlight` HTTP publishers (at `rate` a second when given); when it started and how long it took. */
async function publishAll(target: Target, room: string, total: number, kib: number, inFlight: number, rate?: number, strict = true): Promise<{ ms: number; t0: number }> {
  const t0 = performance.now();
  await paced(total, { concurrency: inFlight, ...(rate ? { rate } : {}) }, async (i) => {
    const res = await fetch(`${target.url}/rooms/${room}/publish`, { method: "POST", headers: { "content-type": "application/json" }, body: payload(i, kib) });
    if (strict && !res.ok) throw new Error(`publish ${i}: HTTP ${res.status} ${await res.text()}`);
    await res.arrayBuffer();
  });
  return { ms: performance.now() - t0, t0 };
}

/** Publishes into `url` every `intervalMs` from a process of its own until stopped; resolves with [start, ms] of each. */
function probeProcess(url: string, intervalMs: number): { stop: () => Promise<Array<[number, number]>> } {
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
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  return {
    stop: () =>
      new Promise((done) => {
        child.once("exit", () => done(JSON.parse(out || "[]") as Array<[number, number]>));
        child.stdin.end("stop");
      }),
  };
}

function summarize(samples: Array<[number, number]>) {
  const sorted = samples.map(([, ms]) => ms).sort((a, b) => a - b);
  const slowest = samples.reduce((a, b) => (b[1] > a[1] ? b : a), [0, 0]);
  return { count: sorted.length, p50: round(percentileOfSorted(sorted, 50)), p99: round(percentileOfSorted(sorted, 99)), max: round(sorted.at(-1)), slowestStartedAtMs: slowest[0] - (samples[0]?.[0] ?? 0) };
}

async function burst(args: Args) {
  const [messages, kib, inFlight, stalledCount] = [args.int("messages", { min: 1 }), args.number("kib", { min: 0 }), args.int("in-flight", { min: 1 }), args.int("stalled")];
  const target = await startTarget(args);
  const room = "burst";
  const wsUrl = `${target.wsUrl}/rooms/${room}/ws`;
  const fast = [new Reader(wsUrl, "frame"), new Reader(wsUrl, "quarter")];
  const stalled = Array.from({ length: stalledCount }, () => new Reader(wsUrl, "frame", { reconnect: true }));
  await Promise.all([...fast, ...stalled].map((r) => r.open()));
  for (const r of stalled) r.pause();
  for (const r of [...fast, ...stalled]) r.target = messages;
  await sleep(1000);
  const rss0 = rssMb(target.pid);
  const cpu0 = cpuMs(target.pid);
  const sampler = rssSampler(target.pid);
  const published = await publishAll(target, room, messages, kib, inFlight);
  await waitFor(() => fast.every((r) => r.received >= messages || r.closes.length > 0), 60_000, 20);
  const peak = sampler.stop();
  const cpu1 = cpuMs(target.pid);
  const during = await stats(target, room);
  // The stalled readers read again (after --stall-seconds more); they ack, and resume after a 4008, like the raw client.
  await sleep(args.number("stall-seconds", { min: 0 }) * 1000);
  const resumedAt = performance.now();
  for (const r of stalled) r.resume();
  const caughtUp = await waitFor(() => stalled.every((r) => r.received >= messages), args.number("catch-up-seconds", { min: 1 }) * 1000, 20);
  const after = await stats(target, room);
  const result = {
    scenario: "burst",
    label: args.text("label") ?? null,
    messages,
    kib,
    inFlight,
    stalled: stalledCount,
    publishMs: round(published.ms),
    fast: fast.map((r, i) => ({
      ack: i === 0 ? "frame" : "quarter",
      received: r.received,
      outOfOrder: r.outOfOrder,
      closes: [...r.closes],
      doneMs: round(r.doneAt === null ? null : r.doneAt - published.t0),
      doneOverPublish: round(r.doneAt === null ? null : (r.doneAt - published.t0) / published.ms, 2),
    })),
    stalledEnd: stalledCount
      ? {
          allCaughtUp: caughtUp,
          received: [Math.min(...stalled.map((r) => r.received)), Math.max(...stalled.map((r) => r.received))],
          outOfOrder: stalled.reduce((n, r) => n + r.outOfOrder, 0),
          closedWith: count(stalled.flatMap((r) => r.closes)),
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
  for (const r of [...fast, ...stalled]) void r.close();
  await target.stop();
  return result;
}

async function sdk(args: Args) {
  const [messages, kib, rate, inFlight] = [args.int("messages", { min: 1 }), args.number("kib", { min: 0 }), args.number("rate", { min: 0 }), args.int("in-flight", { min: 1 })];
  const bundle = resolve(args.text("sdk") ?? resolve(args.text("dir") ?? REPO_ROOT, "client-sdk/dist/sdk.js"));
  const { RoomClient } = (await import(pathToFileURL(bundle).href)) as { RoomClient: new (url: string, options: { WebSocket: unknown }) => { state: string; addEventListener(type: "message", listener: () => void): void; close(): void } };
  const target = await startTarget(args);
  const room = "sdk";
  // Counts message events as they arrive on the wire, before the client sees them.
  const wire: Array<{ seqs: Map<number, number>; events: number }> = [];
  const Counting = class extends WebSocket {
    constructor(url: string) {
      super(url, { perMessageDeflate: false });
      const record = { seqs: new Map<number, number>(), events: 0 };
      wire.push(record);
      this.on("message", (data: Buffer) => {
        const text = data.toString();
        if (text === "pong") return;
        for (const e of ([] as Array<{ type: string; seq: number }>).concat(JSON.parse(text) as { type: string; seq: number })) {
          if (e.type !== "message") continue;
          record.events += 1;
          record.seqs.set(e.seq, (record.seqs.get(e.seq) ?? 0) + 1);
        }
      });
    }
  };
  const clients = [0, 1].map(() => {
    const client = new RoomClient(`${target.wsUrl}/rooms/${room}/ws`, { WebSocket: Counting });
    const seen = { count: 0, doneAt: null as number | null };
    client.addEventListener("message", () => {
      seen.count += 1;
      if (seen.count >= messages && seen.doneAt === null) seen.doneAt = performance.now();
    });
    return { client, seen };
  });
  await waitFor(() => clients.every((c) => c.client.state === "open"), 10_000, 20);
  await sleep(500);
  const cpu0 = cpuMs(target.pid);
  // Paced: `rate` publishes a second from `inFlight` publishers; --rate 0 is one burst.
  const published = await publishAll(target, room, messages, kib, inFlight, rate > 0 ? rate : undefined);
  await waitFor(() => clients.every((c) => c.seen.count >= messages), 120_000, 20);
  const cpu1 = cpuMs(target.pid);
  const roomStats = await stats(target, room);
  const result = {
    scenario: "sdk",
    label: args.text("label") ?? null,
    messages,
    kib,
    rate: rate || "burst",
    publishMs: round(published.ms),
    achievedRate: round(messages / (published.ms / 1000)),
    clients: clients.map((c) => ({ delivered: c.seen.count, doneOverPublish: round(c.seen.doneAt === null ? null : (c.seen.doneAt - published.t0) / published.ms, 2) })),
    wire: wire.map((w) => ({ messageEvents: w.events, distinct: w.seqs.size, sentTwice: w.events - w.seqs.size })),
    server: { cpuMs: round(cpu1 - cpu0), catchUpFrames: roomStats.catchUpFrames, drops: roomStats.drops, kicks: roomStats.kicks },
  };
  for (const c of clients) c.client.close();
  await target.stop();
  return result;
}

async function resumeScenario(args: Args, baseline: boolean) {
  const [messages, kib, resumers, probeMs] = [args.int("messages", { min: 1 }), args.number("kib", { min: 0 }), args.int("resumers", { min: 1 }), args.int("probe-ms", { min: 1 })];
  // History room for the probes' messages too, so the resumes find all of the fill.
  const target = await startTarget(args, { HISTORY_MAX_MESSAGES: String(messages + 10_000) }, baseline);
  const room = "resume";
  await publishAll(target, room, messages, kib, 4);
  // One more write into each probed room first: SQLite checkpoints the write-ahead log the fill left behind on
  // the next commit, a one-off stall that belongs to the fill, not to the resumes.
  for (const into of [room, "probe"]) await (await fetch(`${target.url}/rooms/${into}/publish`, { method: "POST", body: "warm-up" })).arrayBuffer();
  const before = baseline ? null : await stats(target, room);
  await sleep(1000);
  const rssIdle = rssMb(target.pid);
  const sampler = rssSampler(target.pid);
  const cpu0 = cpuMs(target.pid);
  const readers = Array.from({ length: resumers }, () => new Reader(`${target.wsUrl}/rooms/${room}/ws`, (args.text("ack") ?? "frame") as AckPolicy, { since: 0 }));
  for (const r of readers) r.target = messages;
  // Live publishers (in a process of their own, so the readers' work does not delay them) measure how long a
  // publish waits while the resumes run: into the resuming room, and into another.
  const probes = [probeProcess(`${target.url}/rooms/${room}/publish`, probeMs), probeProcess(`${target.url}/rooms/probe/publish`, probeMs)];
  await sleep(200);
  const t0 = performance.now();
  await Promise.all(readers.map((r) => r.open()));
  const done = await waitFor(() => readers.every((r) => r.received >= messages), args.number("resume-seconds", { min: 1 }) * 1000, 20);
  const elapsed = performance.now() - t0;
  const [sameRoom = [], otherRoom = []] = await Promise.all(probes.map((p) => p.stop()));
  const cpu1 = cpuMs(target.pid);
  const peak = sampler.stop();
  const after = baseline ? null : await stats(target, room);
  const delta = (key: string): number | null => (after && before ? (after[key] ?? 0) - (before[key] ?? 0) : null);
  const result = {
    scenario: baseline ? "baseline-resume" : "resume",
    label: args.text("label") ?? (baseline ? "Node ws baseline" : null),
    messages,
    kib,
    resumers,
    allDelivered: done,
    seconds: round(elapsed / 1000, 2),
    perReader: readers.map((r) => ({ received: r.received, frames: r.frames, outOfOrder: r.outOfOrder, closes: [...r.closes], mb: round(r.bytes / 1048576, 1) })),
    server: {
      rssIdleMb: round(rssIdle, 1),
      rssPeakMb: round(peak, 1),
      rssOverIdleMb: round(peak - rssIdle, 1),
      cpuMs: round(cpu1 - cpu0),
      historyRowsRead: delta("historyRowsRead"),
      // Per message delivered (the probes' messages included): what catch-up read for what it sent.
      rowsReadPerMessage: after ? round((delta("historyRowsRead") ?? 0) / readers.reduce((n, r) => n + r.received, 0), 3) : null,
      catchUpFrames: delta("catchUpFrames"),
    },
    livePublishMs: { sameRoom: summarize(sameRoom), otherRoom: summarize(otherRoom) },
  };
  for (const r of readers) void r.close();
  await target.stop();
  return result;
}

async function liars(args: Args) {
  const [seconds, kib, rate, liarCount] = [args.number("seconds", { min: 0.1 }), args.number("kib", { min: 0 }), args.number("rate", { min: 0.1 }), args.int("liars")];
  const target = await startTarget(args);
  const room = "liars";
  const wsUrl = `${target.wsUrl}/rooms/${room}/ws`;
  const fast = [new Reader(wsUrl, "frame"), new Reader(wsUrl, "frame")];
  const lying = Array.from({ length: liarCount }, () => new Reader(wsUrl, "none"));
  await Promise.all([...fast, ...lying].map((r) => r.open()));
  for (const r of lying) r.pause();
  const lies = setInterval(() => {
    for (const r of lying) r.send({ type: "ack", seq: Number.MAX_SAFE_INTEGER, tag: 0 });
  }, 100);
  await sleep(500);
  const rss0 = rssMb(target.pid);
  const sampler = rssSampler(target.pid);
  const total = Math.round(seconds * rate);
  await publishAll(target, room, total, kib, 1, rate, false);
  await sleep(1000);
  clearInterval(lies);
  const peak = sampler.stop();
  const s = await stats(target, room);
  // Liars closed by the room see their close frame only once they read again.
  for (const r of lying) r.resume();
  await sleep(1500);
  const result = {
    scenario: "liars",
    label: args.text("label") ?? null,
    liars: liarCount,
    published: total,
    kib,
    fastReceived: fast.map((r) => r.received),
    fastOutOfOrder: fast.reduce((n, r) => n + r.outOfOrder, 0),
    liarsClosedWith: count(lying.flatMap((r) => r.closes)),
    server: { rssBeforeMb: round(rss0, 1), rssPeakMb: round(peak, 1), rssGrowthMb: round(peak - rss0, 1), connectionsAtEnd: s.connections, kicks: s.kicks, refusals: s.refusals },
  };
  for (const r of [...fast, ...lying]) void r.close();
  await target.stop();
  return result;
}

const SCENARIOS: Record<string, (args: Args) => Promise<object>> = { burst, sdk, resume: (args) => resumeScenario(args, false), "baseline-resume": (args) => resumeScenario(args, true), liars };

export default defineBench({
  name: "cursor",
  title: "what the per-socket cursor does for readers that keep up, fall behind, stall, lie or resume",
  positionals: Object.keys(SCENARIOS).join("|"),
  about: `Every scenario runs against a server started here (the local server from --dir, default this checkout; build
first: npm run build), on --port with a fresh data directory, stopped at the end; server figures come from
workerd's /proc entries. --url and --pid (of its workerd) use a server started elsewhere instead.
  burst    2 fast raw readers (one acking each frame, one every quarter window) and --stalled readers that stop
           reading; once the fast ones have everything (and --stall-seconds more) the stalled read again
  sdk      2 SDK clients (--sdk PATH to the bundle, default <dir>/client-sdk/dist/sdk.js), --rate publishes/s
           (--rate 0: one burst); counts message events on the wire
  resume   the room is filled first, then --resumers raw clients that only ack (--ack frame|quarter|raw) connect
           with since=0 at once; publishers in their own process measure live publishes meanwhile
  liars    --liars sockets stop reading and send {"type":"ack","seq":2^53-1} every 100 ms while 2 fast readers
           keep up
  baseline-resume  the resume scenario against the Node ws baseline, which sends everything at once
Defaults per scenario: burst --messages 600 --kib 48; sdk --messages 2000 --kib 16; resume and baseline-resume
--messages 1000 --kib 60; liars --kib 60. Prints one JSON object on stdout.`,
  options: {
    dir: { help: "the checkout whose local server runs (default this one)" },
    label: { help: "a label for the result" },
    port: { default: "18401", help: "port of the server" },
    url: { help: "a server started elsewhere" },
    pid: { help: "with --url: its workerd's pid" },
    messages: { help: "messages published (burst 600, sdk 2000, resume 1000)" },
    kib: { help: "KiB per message (burst 48, sdk 16, resume 60, liars 60)" },
    "in-flight": { default: "10", help: "burst, sdk: publishes in flight" },
    stalled: { default: "20", help: "burst: readers that stop reading" },
    "stall-seconds": { default: "0", help: "burst: how much longer they stay stalled once the fast ones have everything" },
    "catch-up-seconds": { default: "60", help: "burst: how long the stalled ones get to catch up" },
    rate: { help: "sdk: publishes per second (default 500; 0: a burst); liars: publishes per second (default 50)" },
    sdk: { help: "sdk: the SDK bundle" },
    resumers: { default: "1", help: "resume: clients resuming at once" },
    "probe-ms": { default: "50", help: "resume: interval of the live publishes" },
    ack: { default: "frame", help: "resume: frame, quarter or raw" },
    "resume-seconds": { default: "120", help: "resume: how long the resumes get" },
    seconds: { default: "10", help: "liars: seconds of publishing" },
    liars: { default: "20", help: "liars: sockets that lie" },
    "max-seconds": { default: "300", help: "the run gives up after this long" },
  },
  limitSeconds: (args) => args.number("max-seconds", { min: 1 }),
  async run(args) {
    const [scenario = ""] = args.positionals;
    const run = SCENARIOS[scenario];
    if (!run) throw new Error(`unknown scenario ${JSON.stringify(scenario)}; one of ${Object.keys(SCENARIOS).join(", ")}`);
    const defaults: Record<string, Record<string, string>> = {
      burst: { messages: "600", kib: "48" },
      sdk: { messages: "2000", kib: "16", rate: "500" },
      resume: { messages: "1000", kib: "60" },
      "baseline-resume": { messages: "1000", kib: "60" },
      liars: { kib: "60", rate: "50" },
    };
    const result = await run(args.withDefaults(defaults[scenario] ?? {}));
    console.log(JSON.stringify({ ...result, loadavg: loadAverage() }, null, 2));
  },
});
