#!/usr/bin/env node
// Presence benchmark: what joins, leaves and reconnects cost a room, and what the member cap and
// the leave delay buy. Every run starts its own local server (local-server/server.mjs --no-build,
// build first with `node tools/build-worker.mjs`) on 127.0.0.1 with a fresh data directory and
// stops it at the end; server CPU comes from workerd's /proc entry (Linux only).
//
// Usage:
//   node load/bench/presence.mjs storm [--members 1000 --seconds 5 --caps 100,1000]
//     N members join one room over S seconds, once per cap. Figures: presence events sent (the
//     room's counter), bytes of presence received, workerd CPU, and the time from the last join
//     until every socket's view is right (its count is N and, under the cap, it lists all N).
//   node load/bench/presence.mjs churn [--members 1000 --share 0.1 --seconds 30 --cap 1000 --delays 3000,0]
//     N members in one room; every second a share of them close and reconnect at once (a reload),
//     for S seconds, once per leave delay. Figures: leave and join events each socket saw for
//     members that were only reloading (spurious pairs), presence events sent, workerd CPU.
//
// Clients follow docs/protocol.md: they ping, and ack the last message or presence event read
// per half window or 50 ms. Prints one JSON object on stdout. Bounded by --max-seconds (600).
import { readFileSync } from "node:fs";
import WebSocket from "ws";
import { cpuMs, startLocalServer, stopAllLocalServers, stopLocalServer as stopServer } from "./local-server.mjs";

const [scenario, ...rest] = process.argv.slice(2);
const args = Object.fromEntries(rest.reduce((pairs, arg, i, all) => (arg.startsWith("--") ? [...pairs, [arg.slice(2), all[i + 1]]] : pairs), []));
const PORT = Number(args.port ?? 18451);
const MAX_SECONDS = Number(args["max-seconds"] ?? 600);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const round = (n, digits = 0) => Math.round(n * 10 ** digits) / 10 ** digits;

const hardStop = setTimeout(() => {
  console.error(`gave up after ${MAX_SECONDS} s`);
  void shutdown(2);
}, MAX_SECONDS * 1000);

async function shutdown(code) {
  await stopAllLocalServers();
  process.exit(code);
}
process.on("SIGINT", () => void shutdown(130));

async function startServer(vars) {
  return startLocalServer({ port: PORT, vars, label: "presence-bench" });
}

async function roomStats(server, room) {
  return (await fetch(`${server.url}/rooms/${room}`)).json();
}

// ---------------------------------------------------------------------------
// A client that keeps the room's presence, as an app would
// ---------------------------------------------------------------------------

class Member {
  /** @param {string} url */
  constructor(url, id) {
    this.id = id;
    this.url = url;
    this.count = -1;
    this.members = null;
    this.joins = [];
    this.leaves = [];
    this.syncs = 0;
    this.bytes = 0;
  }

  open() {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(this.url, { perMessageDeflate: false });
      this.ws = ws;
      let window = 0;
      let readSeq = 0;
      let last = null;
      let unacked = 0;
      let timer = null;
      const ack = () => {
        clearTimeout(timer);
        timer = null;
        unacked = 0;
        if (last && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "ack", seq: last.seq, tag: last.tag }));
        last = null;
      };
      const pinger = setInterval(() => ws.readyState === WebSocket.OPEN && ws.send("ping"), 25_000);
      ws.on("message", (data) => {
        const text = data.toString();
        if (text === "pong") return;
        for (const event of [].concat(JSON.parse(text))) {
          if (event.type === "welcome") ((window = event.window), (readSeq = event.seq));
          else if (event.type === "message") ((readSeq = event.seq), (last = event));
          else if (event.type === "presence") {
            this.bytes += text.length;
            last = { seq: readSeq, tag: event.tag };
            this.#apply(event);
          }
        }
        unacked += text.length;
        if (unacked * 2 >= window) ack();
        else timer ??= setTimeout(ack, 50);
      });
      ws.once("open", () => resolve(this));
      ws.once("error", reject);
      ws.once("close", () => {
        clearInterval(pinger);
        clearTimeout(timer);
      });
    });
  }

  #apply(event) {
    this.count = event.count;
    if (event.action === "sync") {
      this.syncs += 1;
      this.members = event.members ? new Set(event.members.map((m) => m.id)) : null;
    } else if (event.action === "join") {
      this.joins.push(event.member.id);
      this.members?.add(event.member.id);
    } else if (event.action === "leave") {
      this.leaves.push(event.member.id);
      this.members?.delete(event.member.id);
    }
  }

  close() {
    const ws = this.ws;
    return new Promise((resolve) => {
      if (ws.readyState === WebSocket.CLOSED) return resolve();
      ws.once("close", resolve);
      ws.close(1000);
      // A close handshake the server is slow to finish must not hold the run.
      setTimeout(() => (ws.terminate(), resolve()), 2000);
    });
  }
}

const memberUrl = (server, room, id) => `${server.wsUrl}/rooms/${room}/ws?member=${id}&info=${encodeURIComponent(JSON.stringify({ name: `User ${id}` }))}`;
const idOf = (i) => `u${String(i).padStart(5, "0")}`;

// ---------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------

async function storm(cap, members, seconds) {
  const server = await startServer({ PRESENCE_MAX_MEMBERS: String(cap) });
  const room = `storm-${cap}`;
  const clients = [];
  try {
    const cpu0 = cpuMs(server.pid);
    const t0 = Date.now();
    const spacing = (seconds * 1000) / members;
    // Opens on a schedule (not one after another), so a slow handshake does not stretch the storm.
    const opening = [];
    for (let i = 0; i < members; i++) {
      const due = t0 + i * spacing;
      if (due > Date.now()) await sleep(due - Date.now());
      const client = new Member(memberUrl(server, room, idOf(i)), idOf(i));
      clients.push(client);
      opening.push(client.open());
    }
    await Promise.all(opening);
    const joinedAt = Date.now();
    const right = (c) => c.count === members && (cap < members ? c.members === null : c.members?.size === members);
    const deadline = Date.now() + 120_000;
    while (!clients.every(right)) {
      if (Date.now() > deadline) throw new Error(`views not right after 120 s: ${clients.filter((c) => !right(c)).length} wrong`);
      await sleep(20);
    }
    const rightAt = Date.now();
    const cpu1 = cpuMs(server.pid);
    const stats = await roomStats(server, room);
    return {
      cap,
      members,
      joinSeconds: round((joinedAt - t0) / 1000, 1),
      presenceEvents: stats.presenceEvents,
      eventsPerMember: round(stats.presenceEvents / members, 1),
      presenceMB: round(clients.reduce((s, c) => s + c.bytes, 0) / 1048576, 1),
      serverCpuMs: round(cpu1 - cpu0),
      allRightMsAfterLastJoin: rightAt - joinedAt,
      resyncs: clients.reduce((s, c) => s + c.syncs, 0) - members,
    };
  } finally {
    await Promise.all(clients.map((c) => c.close()));
    await stopServer(server);
  }
}

async function churn(delay, { members, share, seconds, cap }) {
  const server = await startServer({ PRESENCE_LEAVE_DELAY_MS: String(delay), PRESENCE_MAX_MEMBERS: String(cap) });
  const room = `churn-${delay}`;
  const clients = [];
  const reloaded = [];
  try {
    for (let i = 0; i < members; i++) {
      const client = new Member(memberUrl(server, room, idOf(i)), idOf(i));
      await client.open();
      clients.push(client);
    }
    // Everyone's view settled; from here on only reloads happen.
    const settle = Date.now() + 30_000;
    while (!clients.every((c) => c.count === members) && Date.now() < settle) await sleep(50);
    const baseline = new Map(clients.map((c) => [c, { joins: c.joins.length, leaves: c.leaves.length }]));
    const events0 = (await roomStats(server, room)).presenceEvents;
    const cpu0 = cpuMs(server.pid);
    const t0 = Date.now();
    let reloads = 0;
    let reloadMs = 0;
    const perTick = Math.round(members * share);
    for (let tick = 0; tick < seconds; tick++) {
      const due = t0 + tick * 1000;
      if (due > Date.now()) await sleep(due - Date.now());
      // A reload: the tab's socket closes and the new page's socket opens right away.
      const chosen = new Set();
      while (chosen.size < perTick) chosen.add(Math.floor(Math.random() * members));
      await Promise.all(
        [...chosen].map(async (i) => {
          const old = clients[i];
          const begin = Date.now();
          await old.close();
          const fresh = new Member(old.url, old.id);
          await fresh.open();
          reloadMs += Date.now() - begin;
          reloaded.push(old);
          clients[i] = fresh;
          baseline.set(fresh, { joins: 0, leaves: 0, fresh: true });
          reloads += 1;
        }),
      );
    }
    const churnSeconds = (Date.now() - t0) / 1000;
    // Leaves announced after the delay, and the last joins, arrive after the churn stops.
    await sleep(delay + 2000);
    const cpu1 = cpuMs(server.pid);
    const events1 = (await roomStats(server, room)).presenceEvents;
    // What sockets that stayed through the whole run saw (every member only reloaded: any leave or join is spurious).
    const stayed = clients.filter((c) => !baseline.get(c)?.fresh);
    const seen = stayed.map((c) => ({ leaves: c.leaves.length - baseline.get(c).leaves, joins: c.joins.length - baseline.get(c).joins }));
    const avg = (f) => round(seen.reduce((s, x) => s + f(x), 0) / Math.max(1, seen.length), 1);
    return {
      leaveDelayMs: delay,
      cap,
      members,
      reloads,
      churnSeconds: round(churnSeconds, 1),
      meanReloadMs: round(reloadMs / Math.max(1, reloads)),
      socketsThatStayed: stayed.length,
      spuriousLeavesPerSocket: avg((x) => x.leaves),
      spuriousJoinsPerSocket: avg((x) => x.joins),
      presenceEvents: events1 - events0,
      serverCpuMs: round(cpu1 - cpu0),
      finalCountsRight: clients.filter((c) => c.count === members).length,
    };
  } finally {
    await Promise.all(clients.map((c) => c.close()));
    await stopServer(server);
  }
}

// ---------------------------------------------------------------------------

const result = { scenario, at: new Date().toISOString(), node: process.version, runs: [] };
try {
  if (scenario === "storm") {
    const members = Number(args.members ?? 1000);
    const seconds = Number(args.seconds ?? 5);
    for (const cap of String(args.caps ?? "100,1000").split(",").map(Number)) result.runs.push(await storm(cap, members, seconds));
  } else if (scenario === "churn") {
    const options = {
      members: Number(args.members ?? 1000),
      share: Number(args.share ?? 0.1),
      seconds: Number(args.seconds ?? 30),
      cap: Number(args.cap ?? 1000),
    };
    for (const delay of String(args.delays ?? "3000,0").split(",").map(Number)) result.runs.push(await churn(delay, options));
  } else {
    console.error("usage: node load/bench/presence.mjs storm|churn [options] (see the header of this file)");
    await shutdown(2);
  }
  result.loadavg = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  console.log(JSON.stringify(result, null, 2));
  clearTimeout(hardStop);
  await shutdown(0);
} catch (error) {
  console.error(error);
  await shutdown(1);
}
