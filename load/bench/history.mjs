#!/usr/bin/env node
// History over HTTP and keyed publishes, measured against local servers this script starts
// (local-server/server.mjs --no-build; `npm run build` first), each stopped at the end. Three parts,
// each run as interleaved rounds (every variant once per round, the order rotated from round to round)
// so that a busy shared machine weighs on every variant alike; each figure is the median over the rounds
// with the lowest and highest round beside it:
//
//   pages    a room of --messages messages (published one at a time: one row each, the most rows a page
//            can read) paged through whole, newest first and forward, with limit 100 and 1000: rows
//            read per page (the answer's rowsRead) and time per page (request to answer, client side).
//   publish  --rate HTTP publishes/s for --seconds into a room of that history with --sockets subscribers,
//            with nobody paging, with a reader asking for a page of 1000 once a second, and with one paging
//            through the history back to back (limit 1000): publish latency (request to answer) p50 / p99 / max,
//            and the pages read meanwhile.
//   rows     rows written per published message (historyRowsWritten ÷ published, GET /rooms/{room}), at 1 and
//            50 msg/s for --rows-seconds, with and without an Idempotency-Key on each publish; then the
//            keyed room's server restarts and one retry shows the rows read to rebuild its keys.
//            With --before DIR (another checkout, built) the same without keys on the code there.
//
// Usage:
//   npm run build
//   flock /tmp/bench.lock node load/bench/history.mjs [--parts pages,publish,rows] [--rounds 5] [--messages 10000]
//        [--rate 200] [--seconds 10] [--sockets 20] [--rows-seconds 20] [--before DIR] [--port 18801]
//
// Prints a table per part on stderr and one JSON object on stdout (also written to load/results/history-<time>.json).

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import WebSocket from "ws";
import { ROOT, startLocalServer, stopAllLocalServers, stopLocalServer } from "./local-server.mjs";

const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const PARTS = option("parts", "pages,publish,rows").split(",");
const ROUNDS = Number(option("rounds", "5"));
const MESSAGES = Number(option("messages", "10000"));
const RATE = Number(option("rate", "200"));
const SECONDS = Number(option("seconds", "10"));
const SOCKETS = Number(option("sockets", "20"));
const ROWS_SECONDS = Number(option("rows-seconds", "20"));
const BEFORE = option("before", null);
const PORT = Number(option("port", "18801"));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (...parts) => console.error(...parts);

process.on("SIGINT", () => void stopAllLocalServers().then(() => process.exit(130)));

// ---------------------------------------------------------------------------

function quantile(sorted, q) {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

/** Median over rounds, with the lowest and highest round. */
function summary(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return { median: sorted[Math.floor(sorted.length / 2)], low: sorted[0], high: sorted[sorted.length - 1], rounds: values.length };
}

const show = (s, digits = 1) => `${s.median.toFixed(digits)} (${s.low.toFixed(digits)}-${s.high.toFixed(digits)})`;

/** The order of `variants` in round `round`: rotated, so none always runs first. */
function rotated(variants, round) {
  return variants.map((_, i) => variants[(i + round) % variants.length]);
}

async function publishOne(url, room, body, key) {
  const headers = { "content-type": "application/json" };
  if (key !== undefined) headers["idempotency-key"] = key;
  const started = performance.now();
  const res = await fetch(`${url}/rooms/${room}/publish`, { method: "POST", headers, body: JSON.stringify(body) });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`publish answered ${res.status}`);
  return performance.now() - started;
}

async function stats(url, room) {
  return (await fetch(`${url}/rooms/${room}`)).json();
}

/** Publishes `count` messages one after the other: each its own flush and row. */
async function fill(url, room, count) {
  for (let i = 0; i < count; i++) await publishOne(url, room, { i, text: "x".repeat(80) });
}

/** Pages through a room's whole history; per page: ms and rows read. */
async function pageThrough(url, room, query) {
  const pages = [];
  let next = query;
  for (;;) {
    const started = performance.now();
    const res = await fetch(`${url}/rooms/${room}/messages${next}`);
    const page = await res.json();
    if (res.status !== 200) throw new Error(`page answered ${res.status}: ${JSON.stringify(page)}`);
    pages.push({ ms: performance.now() - started, rowsRead: page.rowsRead, messages: page.messages.length });
    if (page.cursor === null) return pages;
    const limit = /limit=(\d+)/.exec(query)?.[1];
    next = `?cursor=${encodeURIComponent(page.cursor)}${limit ? `&limit=${limit}` : ""}`;
  }
}

function openSockets(wsUrl, room, count) {
  return Promise.all(
    Array.from({ length: count }, () => new Promise((resolve, reject) => {
      const ws = new WebSocket(`${wsUrl}/rooms/${room}/ws`, { perMessageDeflate: false });
      let last = null;
      ws.on("message", (data) => {
        const text = data.toString();
        if (text === "pong") return;
        const events = [].concat(JSON.parse(text));
        for (const e of events) if (e.type === "message") last = e;
        if (last) ws.send(JSON.stringify({ type: "ack", seq: last.seq, tag: last.tag }));
      });
      ws.once("open", () => resolve(ws));
      ws.once("error", reject);
    })),
  );
}

// ---------------------------------------------------------------------------
// pages
// ---------------------------------------------------------------------------

async function pagesPart() {
  const server = await startLocalServer({ port: PORT, vars: { HISTORY_MAX_MESSAGES: String(MESSAGES), HISTORY_MAX_AGE_SECONDS: "86400" }, label: "history-pages" });
  try {
    const room = "bench-pages";
    log(`pages: publishing ${MESSAGES} messages one at a time...`);
    await fill(server.url, room, MESSAGES);
    const variants = [
      { name: "newest first, limit 100", query: "?limit=100" },
      { name: "newest first, limit 1000", query: "?limit=1000" },
      { name: "forward, limit 100", query: "?after=0&limit=100" },
      { name: "forward, limit 1000", query: "?after=0&limit=1000" },
    ];
    const byVariant = new Map(variants.map((v) => [v.name, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const variant of rotated(variants, round)) {
        const pages = await pageThrough(server.url, room, variant.query);
        const total = pages.reduce((sum, p) => sum + p.messages, 0);
        if (total !== MESSAGES) throw new Error(`${variant.name}: paged ${total} messages of ${MESSAGES}`);
        const ms = pages.map((p) => p.ms).sort((a, b) => a - b);
        byVariant.get(variant.name).push({
          pages: pages.length,
          msPerPage: ms[Math.floor(ms.length / 2)],
          msPerPageP99: quantile(ms, 0.99),
          rowsPerPage: pages.reduce((sum, p) => sum + p.rowsRead, 0) / pages.length,
          rowsPerMessage: pages.reduce((sum, p) => sum + p.rowsRead, 0) / MESSAGES,
          totalMs: pages.reduce((sum, p) => sum + p.ms, 0),
        });
      }
    }
    const result = variants.map((v) => {
      const runs = byVariant.get(v.name);
      return {
        variant: v.name,
        pages: runs[0].pages,
        rowsPerPage: summary(runs.map((r) => r.rowsPerPage)),
        rowsPerMessage: summary(runs.map((r) => r.rowsPerMessage)),
        msPerPage: summary(runs.map((r) => r.msPerPage)),
        msPerPageP99: summary(runs.map((r) => r.msPerPageP99)),
        msWhole: summary(runs.map((r) => r.totalMs)),
      };
    });
    log(`\npages: ${MESSAGES} messages, one row each; median over ${ROUNDS} rounds (lowest-highest)`);
    log(["variant".padEnd(26), "pages".padStart(5), "rows/page".padStart(22), "ms/page p50".padStart(20), "ms/page p99".padStart(20), "ms for all".padStart(24)].join("  "));
    for (const r of result) {
      log([r.variant.padEnd(26), String(r.pages).padStart(5), show(r.rowsPerPage).padStart(22), show(r.msPerPage, 2).padStart(20), show(r.msPerPageP99, 2).padStart(20), show(r.msWhole, 0).padStart(24)].join("  "));
    }
    return result;
  } finally {
    await stopLocalServer(server);
  }
}

// ---------------------------------------------------------------------------
// publish latency with and without paging
// ---------------------------------------------------------------------------

async function paced(rate, seconds, send) {
  const latencies = [];
  const pending = [];
  const interval = 1000 / rate;
  const start = performance.now();
  for (let i = 0; i < rate * seconds; i++) {
    const due = start + i * interval;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    pending.push(send(i).then((ms) => latencies.push(ms)));
  }
  await Promise.all(pending);
  return latencies.sort((a, b) => a - b);
}

async function publishPart() {
  const server = await startLocalServer({ port: PORT + 1, vars: { HISTORY_MAX_MESSAGES: String(MESSAGES), HISTORY_MAX_AGE_SECONDS: "86400" }, label: "history-publish" });
  try {
    const room = "bench-busy";
    log(`publish: publishing ${MESSAGES} messages first...`);
    await fill(server.url, room, MESSAGES);
    const sockets = await openSockets(server.wsUrl, room, SOCKETS);
    // A reader asking for a page of 1,000 once a second, and one paging back to back (the most one reader can ask).
    const variants = ["no paging", "1 page/s", "pages back to back"];
    const byVariant = new Map(variants.map((v) => [v, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const variant of rotated(variants, round)) {
        let paging = variant !== "no paging";
        const pagesRead = [];
        const pager = (async () => {
          while (paging) {
            if (variant === "1 page/s") {
              const started = performance.now();
              const page = await (await fetch(`${server.url}/rooms/${room}/messages?limit=1000&after=${Math.floor(Math.random() * (MESSAGES - 1000))}`)).json();
              pagesRead.push({ ms: performance.now() - started, rowsRead: page.rowsRead, messages: page.messages.length });
              await sleep(1000);
            } else {
              pagesRead.push(...(await pageThrough(server.url, room, "?limit=1000")));
            }
          }
        })();
        const latencies = await paced(RATE, SECONDS, (i) => publishOne(server.url, room, { round, i, text: "x".repeat(80) }));
        paging = false;
        await pager;
        const pageMs = pagesRead.map((p) => p.ms).sort((a, b) => a - b);
        byVariant.get(variant).push({
          p50: quantile(latencies, 0.5),
          p99: quantile(latencies, 0.99),
          max: latencies[latencies.length - 1],
          pages: pagesRead.length,
          pageP50: quantile(pageMs, 0.5),
        });
      }
    }
    for (const ws of sockets) ws.terminate();
    const result = variants.map((v) => {
      const runs = byVariant.get(v);
      return {
        variant: v,
        p50: summary(runs.map((r) => r.p50)),
        p99: summary(runs.map((r) => r.p99)),
        max: summary(runs.map((r) => r.max)),
        pagesPerRound: summary(runs.map((r) => r.pages)),
        pageMsP50: runs[0].pages > 0 ? summary(runs.map((r) => r.pageP50)) : null,
      };
    });
    log(`\npublish: ${RATE} HTTP publishes/s for ${SECONDS} s into a room of ${MESSAGES}+ messages and ${SOCKETS} sockets; median over ${ROUNDS} rounds (lowest-highest)`);
    log(["variant".padEnd(18), "publish p50 ms".padStart(20), "p99 ms".padStart(20), "max ms".padStart(22), "pages of 1000 read".padStart(20), "page p50 ms".padStart(22)].join("  "));
    for (const r of result) {
      log([r.variant.padEnd(18), show(r.p50, 2).padStart(20), show(r.p99, 2).padStart(20), show(r.max, 1).padStart(22), show(r.pagesPerRound, 0).padStart(20), (r.pageMsP50 ? show(r.pageMsP50, 1) : "-").padStart(22)].join("  "));
    }
    return result;
  } finally {
    await stopLocalServer(server);
  }
}

// ---------------------------------------------------------------------------
// rows written per message
// ---------------------------------------------------------------------------

async function rowsRun(server, room, rate, keyed) {
  const before = await stats(server.url, room).catch(() => null);
  const latencies = await paced(rate, ROWS_SECONDS, (i) => publishOne(server.url, room, { i }, keyed ? `${room}-${i}` : undefined));
  const after = await stats(server.url, room);
  const published = after.published - (before?.published ?? 0);
  const rows = after.historyRowsWritten - (before?.historyRowsWritten ?? 0);
  return { published, rows, rowsPerMessage: rows / published, p99: quantile(latencies, 0.99) };
}

async function rowsPart() {
  const servers = [{ name: "this checkout", dir: ROOT }];
  if (BEFORE) servers.unshift({ name: "before", dir: BEFORE });
  const started = [];
  try {
    for (const [i, s] of servers.entries()) started.push({ ...s, server: await startLocalServer({ port: PORT + 2 + i, dir: s.dir, label: `history-rows-${i}` }) });
    const variants = [];
    for (const s of started) for (const rate of [1, 50]) for (const keyed of s.name === "before" ? [false] : [false, true]) variants.push({ s, rate, keyed, name: `${s.name}, ${rate} msg/s, ${keyed ? "keys" : "no keys"}` });
    const byVariant = new Map(variants.map((v) => [v.name, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const v of rotated(variants, round)) {
        // A room per run: each starts with an empty ring.
        byVariant.get(v.name).push(await rowsRun(v.s.server, `rows-${round}-${v.rate}-${v.keyed ? "k" : "n"}`, v.rate, v.keyed));
      }
    }
    const result = variants.map((v) => {
      const runs = byVariant.get(v.name);
      return { variant: v.name, published: runs.reduce((sum, r) => sum + r.published, 0), rowsPerMessage: summary(runs.map((r) => r.rowsPerMessage)), publishP99: summary(runs.map((r) => r.p99)) };
    });
    // Rows read to rebuild a room's keys after a restart: a room keyed at 50 msg/s, then one retry of its last key.
    const own = started.find((s) => s.name === "this checkout");
    const room = "rows-rebuild";
    const keyedRun = await rowsRun(own.server, room, 50, true);
    const lastKey = `${room}-${keyedRun.published - 1}`;
    await stopLocalServer(own.server, { keepData: true });
    own.server = await startLocalServer({ port: own.server.url.split(":").pop(), dir: own.dir, dataDir: own.server.dataDir });
    const readBefore = (await stats(own.server.url, room)).historyRowsRead;
    const retry = await fetch(`${own.server.url}/rooms/${room}/publish`, { method: "POST", headers: { "content-type": "application/json", "idempotency-key": lastKey }, body: JSON.stringify({ i: keyedRun.published - 1 }) });
    const answer = await retry.json();
    const after = await stats(own.server.url, room);
    const rebuild = { keyedMessages: keyedRun.published, rowsInRing: Math.min(keyedRun.rows, 1000), duplicate: answer.duplicate === true, rowsRead: after.historyRowsRead - readBefore, published: after.published };
    log(`
rows read to rebuild the keys of a room keyed at 50 msg/s for ${ROWS_SECONDS} s, after a restart: ${rebuild.rowsRead} (the retry: ${answer.duplicate ? "duplicate" : "NOT a duplicate"}, seq ${answer.seq})`);
    log(`\nrows: rows written per message over ${ROWS_SECONDS} s runs; median over ${ROUNDS} rounds (lowest-highest)`);
    log(["variant".padEnd(36), "messages".padStart(9), "rows/message".padStart(22), "publish p99 ms".padStart(22)].join("  "));
    for (const r of result) log([r.variant.padEnd(36), String(r.published).padStart(9), show(r.rowsPerMessage, 3).padStart(22), show(r.publishP99, 1).padStart(22)].join("  "));
    return { runs: result, rebuild, room };
  } finally {
    for (const s of started) await stopLocalServer(s.server);
  }
}

// ---------------------------------------------------------------------------

const results = {};
try {
  if (PARTS.includes("pages")) results.pages = await pagesPart();
  if (PARTS.includes("publish")) results.publish = await publishPart();
  if (PARTS.includes("rows")) results.rows = await rowsPart();
} finally {
  await stopAllLocalServers();
}
const out = JSON.stringify({ at: new Date().toISOString(), options: { ROUNDS, MESSAGES, RATE, SECONDS, SOCKETS, ROWS_SECONDS, BEFORE }, ...results }, null, 2);
mkdirSync(join(ROOT, "load/results"), { recursive: true });
writeFileSync(join(ROOT, `load/results/history-${Date.now()}.json`), out);
process.stdout.write(`${out}\n`);
