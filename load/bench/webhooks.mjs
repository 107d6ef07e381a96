#!/usr/bin/env node
// Webhook benchmark (docs/webhooks.md): what webhooks cost a room in SQLite rows written and in
// requests to the receiver. Every run starts its own local server (local-server/server.mjs
// --no-build; build first with `node tools/build-worker.mjs`) on 127.0.0.1 with a fresh data
// directory, and a receiver in this process on 127.0.0.1 that answers 204 to every request.
//
// Usage:
//   node load/bench/webhooks.mjs churn [--members 1000 --share 0.1 --seconds 30 --delays 3000,0]
//     N members join one room, then every second a share of them reload (close, and reconnect
//     100 ms later) for S seconds, then all leave; once per leave delay. Figures: events the
//     receiver got, requests, events per request, requests per second (mean over the run and
//     the busiest second), and rows written per event (the room's webhookRowsWritten ÷ events).
//   node load/bench/webhooks.mjs messages [--rates 1,50 --seconds 20]
//     One listening socket in a room and R HTTP publishes a second for S seconds, with webhooks
//     off, on without message.published, and on with it. Figures: rows written per message
//     (history rows + webhook rows, ÷ messages), requests and events per request.
//
// Prints one JSON object on stdout. Bounded by --max-seconds (900).
import { createServer } from "node:http";
import WebSocket from "ws";
import { startLocalServer, stopAllLocalServers, stopLocalServer } from "./local-server.mjs";

const [scenario, ...rest] = process.argv.slice(2);
const args = Object.fromEntries(rest.reduce((pairs, arg, i, all) => (arg.startsWith("--") ? [...pairs, [arg.slice(2), all[i + 1]]] : pairs), []));
const PORT = Number(args.port ?? 18461);
const MAX_SECONDS = Number(args["max-seconds"] ?? 900);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const round = (n, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;

const hardStop = setTimeout(() => {
  console.error(`gave up after ${MAX_SECONDS} s`);
  void shutdown(2);
}, MAX_SECONDS * 1000);

async function shutdown(code) {
  await stopAllLocalServers();
  process.exit(code);
}
process.on("SIGINT", () => void shutdown(130));

/** A receiver that acknowledges everything and keeps what it got. */
async function startReceiver() {
  const requests = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const events = JSON.parse(Buffer.concat(chunks).toString("utf8")).events;
      requests.push({ at: Date.now(), events: events.map((e) => ({ id: e.id, type: e.type, room: e.room })) });
      res.writeHead(204).end();
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${server.address().port}/hooks`, requests, close: () => new Promise((r) => server.close(r)) };
}

/** A socket that pings and acknowledges what it reads, as docs/protocol.md's raw client does. */
function openSocket(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    let readSeq = 0;
    let last = null;
    let timer = null;
    const ack = () => {
      timer = null;
      if (last && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "ack", seq: last.seq, tag: last.tag }));
      last = null;
    };
    const pinger = setInterval(() => ws.readyState === WebSocket.OPEN && ws.send("ping"), 25_000);
    ws.on("message", (data) => {
      const text = data.toString();
      if (text === "pong") return;
      for (const event of [].concat(JSON.parse(text))) {
        if (event.type === "welcome") readSeq = event.seq;
        else if (event.type === "message") ((readSeq = event.seq), (last = event));
        else if (event.type === "presence") last = { seq: readSeq, tag: event.tag };
      }
      timer ??= setTimeout(ack, 50);
    });
    ws.once("open", () => resolve(ws));
    ws.once("error", reject);
    ws.once("close", () => (clearInterval(pinger), clearTimeout(timer)));
  });
}

function closeSocket(ws) {
  return new Promise((resolve) => {
    if (ws.readyState === WebSocket.CLOSED) return resolve();
    ws.once("close", resolve);
    ws.close(1000);
    setTimeout(() => (ws.terminate(), resolve()), 2000);
  });
}

async function roomStats(server, room) {
  return (await fetch(`${server.url}/rooms/${room}`)).json();
}

/** Requests per second: the mean from the first request to the last, and the busiest whole second. */
function rates(requests) {
  if (requests.length === 0) return { mean: 0, peak: 0 };
  const first = requests[0].at;
  const span = Math.max(1, (requests.at(-1).at - first) / 1000);
  const perSecond = new Map();
  for (const r of requests) perSecond.set(Math.floor((r.at - first) / 1000), (perSecond.get(Math.floor((r.at - first) / 1000)) ?? 0) + 1);
  return { mean: round(requests.length / span, 1), peak: Math.max(...perSecond.values()) };
}

async function churn(delay, { members, share, seconds }) {
  const receiver = await startReceiver();
  const server = await startLocalServer({
    port: PORT,
    label: "webhooks-bench",
    vars: { WEBHOOK_URL: receiver.url, WEBHOOK_SECRET: "bench", PRESENCE_LEAVE_DELAY_MS: String(delay), ROOM_SHARD_SOCKETS: "0" },
  });
  const room = `churn-${delay}`;
  const url = (i) => `${server.wsUrl}/rooms/${room}/ws?member=u${i}&info=${encodeURIComponent(JSON.stringify({ name: `User ${i}` }))}`;
  const sockets = [];
  let reloads = 0;
  try {
    const t0 = Date.now();
    for (let i = 0; i < members; i++) sockets.push(await openSocket(url(i)));
    const churnUntil = Date.now() + seconds * 1000;
    while (Date.now() < churnUntil) {
      const chosen = new Set();
      while (chosen.size < Math.round(members * share)) chosen.add(Math.floor(Math.random() * members));
      await Promise.all(
        [...chosen].map(async (i) => {
          await closeSocket(sockets[i]);
          await sleep(100);
          sockets[i] = await openSocket(url(i));
        }),
      );
      reloads += chosen.size;
      await sleep(1000);
    }
    await Promise.all(sockets.map(closeSocket));
    const deadline = Date.now() + 120_000;
    while (!receiver.requests.some((r) => r.events.some((e) => e.type === "room.vacated")) && Date.now() < deadline) await sleep(200);
    await sleep(1000);
    const stats = await roomStats(server, room);
    const events = receiver.requests.reduce((n, r) => n + r.events.length, 0);
    const byType = {};
    for (const r of receiver.requests) for (const e of r.events) byType[e.type] = (byType[e.type] ?? 0) + 1;
    return {
      leaveDelayMs: delay,
      members,
      reloads,
      seconds: round((Date.now() - t0) / 1000, 1),
      events,
      byType,
      requests: receiver.requests.length,
      eventsPerRequest: round(events / Math.max(1, receiver.requests.length)),
      requestsPerSecond: rates(receiver.requests),
      webhookRowsWritten: stats.webhookRowsWritten,
      rowsWrittenPerEvent: round(stats.webhookRowsWritten / Math.max(1, stats.webhookEvents), 3),
      recordedEvents: stats.webhookEvents,
      failedRequests: stats.webhookFailedRequests,
    };
  } finally {
    await Promise.all(sockets.map(closeSocket));
    await stopLocalServer(server);
    await receiver.close();
  }
}

async function messages(mode, rate, seconds) {
  const receiver = await startReceiver();
  const vars =
    mode === "off"
      ? {}
      : {
          WEBHOOK_URL: receiver.url,
          WEBHOOK_SECRET: "bench",
          WEBHOOK_EVENTS: mode === "on, message.published" ? "room.occupied,room.vacated,member.joined,member.left,message.published" : "room.occupied,room.vacated,member.joined,member.left",
        };
  const server = await startLocalServer({ port: PORT, label: "webhooks-bench", vars });
  const room = "messages";
  const socket = await openSocket(`${server.wsUrl}/rooms/${room}/ws`);
  try {
    await sleep(500);
    const before = await roomStats(server, room);
    const t0 = Date.now();
    const total = rate * seconds;
    for (let i = 0; i < total; i++) {
      const due = t0 + (i * 1000) / rate;
      if (due > Date.now()) await sleep(due - Date.now());
      const res = await fetch(`${server.url}/rooms/${room}/publish`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ i, text: "x".repeat(100) }) });
      await res.arrayBuffer();
    }
    await sleep(2000);
    const after = await roomStats(server, room);
    const published = after.published - before.published;
    const history = after.historyRowsWritten - before.historyRowsWritten;
    const webhook = (after.webhookRowsWritten ?? 0) - (before.webhookRowsWritten ?? 0);
    const requests = receiver.requests.filter((r) => r.at >= t0);
    const events = requests.reduce((n, r) => n + r.events.length, 0);
    return {
      webhooks: mode,
      rate,
      published,
      historyRowsPerMessage: round(history / published, 3),
      webhookRowsPerMessage: round(webhook / published, 3),
      rowsWrittenPerMessage: round((history + webhook) / published, 3),
      requests: requests.length,
      eventsPerRequest: requests.length === 0 ? 0 : round(events / requests.length),
    };
  } finally {
    await closeSocket(socket);
    await stopLocalServer(server);
    await receiver.close();
  }
}

try {
  let result;
  if (scenario === "churn") {
    const options = { members: Number(args.members ?? 1000), share: Number(args.share ?? 0.1), seconds: Number(args.seconds ?? 30) };
    const runs = [];
    for (const delay of String(args.delays ?? "3000,0").split(",").map(Number)) runs.push(await churn(delay, options));
    result = { scenario, ...options, runs };
  } else if (scenario === "messages") {
    const seconds = Number(args.seconds ?? 20);
    const runs = [];
    for (const rate of String(args.rates ?? "1,50").split(",").map(Number)) {
      for (const mode of ["off", "on", "on, message.published"]) runs.push(await messages(mode, rate, seconds));
    }
    result = { scenario, seconds, runs };
  } else {
    console.error("usage: node load/bench/webhooks.mjs churn|messages [options] (see the top of this file)");
    await shutdown(2);
  }
  console.log(JSON.stringify({ date: new Date().toISOString(), ...result }, null, 2));
  clearTimeout(hardStop);
  await shutdown(0);
} catch (error) {
  console.error(error);
  await shutdown(1);
}
