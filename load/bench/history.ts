import { defineBench, log } from "../src/kit/bench";
import { REPO_ROOT } from "../src/kit/paths";
import { RawClient } from "../src/kit/raw-client";
import { resultHeader, writeResult } from "../src/kit/results";
import { interleaved } from "../src/kit/rounds";
import { Server } from "../src/kit/server";
import { paced, sleep } from "../src/kit/time";
import { percentileOfSorted, spreadOf, type Spread } from "../src/stats/percentile";

interface Sizes {
  rounds: number;
  messages: number;
  rate: number;
  seconds: number;
  sockets: number;
  rowsSeconds: number;
  port: number;
}

const show = (s: Spread, digits = 1): string => `${s.median.toFixed(digits)} (${s.low.toFixed(digits)}-${s.high.toFixed(digits)})`;
const row = (cells: Array<[string, number]>): string => cells.map(([text, width], i) => (i === 0 ? text.padEnd(width) : text.padStart(width))).join("  ");
/** Each run's figure `pick`, as median, lowest and highest over the rounds. */
const over = <R>(runs: R[], pick: (r: R) => number): Spread => spreadOf(runs.map(pick));

async function publishOne(url: string, room: string, body: unknown, key?: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${url}/rooms/${room}/publish`, { method: "POST", headers: { "content-type": "application/json", ...(key === undefined ? {} : { "idempotency-key": key }) }, body: JSON.stringify(body) });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`publish answered ${res.status}`);
  return performance.now() - started;
}

const stats = async (url: string, room: string): Promise<Record<string, number>> => (await (await fetch(`${url}/rooms/${room}`)).json()) as Record<string, number>;

/** Publishes `count` messages one after the other: each its own flush and row. */
async function fill(url: string, room: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await publishOne(url, room, { i, text: "x".repeat(80) });
}

interface Page {
  ms: number;
  rowsRead: number;
  messages: number;
}

async function readPage(url: string, room: string, query: string): Promise<Page & { cursor: string | null }> {
  const started = performance.now();
  const res = await fetch(`${url}/rooms/${room}/messages${query}`);
  const page = (await res.json()) as { rowsRead: number; messages: unknown[]; cursor: string | null };
  if (res.status !== 200) throw new Error(`page answered ${res.status}: ${JSON.stringify(page)}`);
  return { ms: performance.now() - started, rowsRead: page.rowsRead, messages: page.messages.length, cursor: page.cursor };
}

/** Pages through a room's whole history. */
async function pageThrough(url: string, room: string, query: string): Promise<Page[]> {
  const pages: Page[] = [];
  const limit = /limit=(\d+)/.exec(query)?.[1];
  for (let next = query; ; ) {
    const page = await readPage(url, room, next);
    pages.push(page);
    if (page.cursor === null) return pages;
    next = `?cursor=${encodeURIComponent(page.cursor)}${limit ? `&limit=${limit}` : ""}`;
  }
}

/** `rate` publishes a second for `seconds`, each sent on schedule whatever the others do; their latencies, sorted. */
async function pacedPublishes(rate: number, seconds: number, send: (i: number) => Promise<number>): Promise<number[]> {
  const latencies: number[] = [];
  await paced(rate * seconds, { rate }, async (i) => void latencies.push(await send(i)));
  return latencies.sort((a, b) => a - b);
}

const historyVars = (o: Sizes) => ({ HISTORY_MAX_MESSAGES: String(o.messages), HISTORY_MAX_AGE_SECONDS: "86400" });

async function pagesPart(o: Sizes) {
  const server = await Server.start({ kind: "ours", port: o.port, gate: "off", vars: historyVars(o) });
  const room = "bench-pages";
  log(`pages: publishing ${o.messages} messages one at a time...`);
  await fill(server.url, room, o.messages);
  const variants = [
    { name: "newest first, limit 100", query: "?limit=100" },
    { name: "newest first, limit 1000", query: "?limit=1000" },
    { name: "forward, limit 100", query: "?after=0&limit=100" },
    { name: "forward, limit 1000", query: "?after=0&limit=1000" },
  ];
  const byVariant = await interleaved(variants, o.rounds, async (variant) => {
    const pages = await pageThrough(server.url, room, variant.query);
    const total = pages.reduce((sum, p) => sum + p.messages, 0);
    if (total !== o.messages) throw new Error(`${variant.name}: paged ${total} messages of ${o.messages}`);
    const ms = pages.map((p) => p.ms).sort((a, b) => a - b);
    const rows = pages.reduce((sum, p) => sum + p.rowsRead, 0);
    return { pages: pages.length, msPerPage: ms[Math.floor(ms.length / 2)] as number, msPerPageP99: percentileOfSorted(ms, 99), rowsPerPage: rows / pages.length, rowsPerMessage: rows / o.messages, totalMs: ms.reduce((a, b) => a + b, 0) };
  });
  await server.stop();
  const result = variants.map((v) => {
    const runs = byVariant.get(v) ?? [];
    return { variant: v.name, pages: runs[0]?.pages ?? 0, rowsPerPage: over(runs, (r) => r.rowsPerPage), rowsPerMessage: over(runs, (r) => r.rowsPerMessage), msPerPage: over(runs, (r) => r.msPerPage), msPerPageP99: over(runs, (r) => r.msPerPageP99), msWhole: over(runs, (r) => r.totalMs) };
  });
  log(`\npages: ${o.messages} messages, one row each; median over ${o.rounds} rounds (lowest-highest)`);
  log(row([["variant", 26], ["pages", 5], ["rows/page", 22], ["ms/page p50", 20], ["ms/page p99", 20], ["ms for all", 24]]));
  for (const r of result) log(row([[r.variant, 26], [String(r.pages), 5], [show(r.rowsPerPage), 22], [show(r.msPerPage, 2), 20], [show(r.msPerPageP99, 2), 20], [show(r.msWhole, 0), 24]]));
  return result;
}

async function publishPart(o: Sizes) {
  const server = await Server.start({ kind: "ours", port: o.port + 1, gate: "off", vars: historyVars(o) });
  const room = "bench-busy";
  log(`publish: publishing ${o.messages} messages first...`);
  await fill(server.url, room, o.messages);
  const sockets = await Promise.all(Array.from({ length: o.sockets }, () => new RawClient(`${server.wsUrl}/rooms/${room}/ws`, { ack: "frame" }).open()));
  // A reader asking for a page of 1,000 once a second, and one paging back to back (the most one reader can ask).
  const variants = ["no paging", "1 page/s", "pages back to back"];
  const byVariant = await interleaved(variants, o.rounds, async (variant, round) => {
    let paging = variant !== "no paging";
    const pagesRead: Page[] = [];
    const pager = (async () => {
      while (paging) {
        if (variant === "1 page/s") {
          pagesRead.push(await readPage(server.url, room, `?limit=1000&after=${Math.floor(Math.random() * Math.max(0, o.messages - 1000))}`));
          await sleep(1000);
        } else pagesRead.push(...(await pageThrough(server.url, room, "?limit=1000")));
      }
    })();
    const latencies = await pacedPublishes(o.rate, o.seconds, (i) => publishOne(server.url, room, { round, i, text: "x".repeat(80) }));
    paging = false;
    await pager;
    const pageMs = pagesRead.map((p) => p.ms).sort((a, b) => a - b);
    return { p50: percentileOfSorted(latencies, 50), p99: percentileOfSorted(latencies, 99), max: latencies.at(-1) ?? Number.NaN, pages: pagesRead.length, pageP50: percentileOfSorted(pageMs, 50) };
  });
  for (const ws of sockets) ws.cut();
  await server.stop();
  const result = variants.map((v) => {
    const runs = byVariant.get(v) ?? [];
    return { variant: v, p50: over(runs, (r) => r.p50), p99: over(runs, (r) => r.p99), max: over(runs, (r) => r.max), pagesPerRound: over(runs, (r) => r.pages), pageMsP50: (runs[0]?.pages ?? 0) > 0 ? over(runs, (r) => r.pageP50) : null };
  });
  log(`\npublish: ${o.rate} HTTP publishes/s for ${o.seconds} s into a room of ${o.messages}+ messages and ${o.sockets} sockets; median over ${o.rounds} rounds (lowest-highest)`);
  log(row([["variant", 18], ["publish p50 ms", 20], ["p99 ms", 20], ["max ms", 22], ["pages of 1000 read", 20], ["page p50 ms", 22]]));
  for (const r of result) log(row([[r.variant, 18], [show(r.p50, 2), 20], [show(r.p99, 2), 20], [show(r.max, 1), 22], [show(r.pagesPerRound, 0), 20], [r.pageMsP50 ? show(r.pageMsP50, 1) : "-", 22]]));
  return result;
}

async function rowsRun(server: Server, room: string, rate: number, seconds: number, keyed: boolean) {
  const before = await stats(server.url, room).catch(() => undefined);
  const latencies = await pacedPublishes(rate, seconds, (i) => publishOne(server.url, room, { i }, keyed ? `${room}-${i}` : undefined));
  const after = await stats(server.url, room);
  const published = (after.published ?? 0) - (before?.published ?? 0);
  const rows = (after.historyRowsWritten ?? 0) - (before?.historyRowsWritten ?? 0);
  return { published, rows, rowsPerMessage: rows / published, p99: percentileOfSorted(latencies, 99) };
}

async function rowsPart(o: Sizes, before: string | undefined) {
  const checkouts = [...(before ? [{ name: "before", dir: before }] : []), { name: "this checkout", dir: REPO_ROOT }];
  const servers = new Map<string, Server>();
  for (const [i, c] of checkouts.entries()) servers.set(c.name, await Server.start({ kind: "ours", port: o.port + 2 + i, gate: "off", checkout: c.dir }));
  const variants = checkouts.flatMap((c) => [1, 50].flatMap((rate) => (c.name === "before" ? [false] : [false, true]).map((keyed) => ({ checkout: c.name, rate, keyed, name: `${c.name}, ${rate} msg/s, ${keyed ? "keys" : "no keys"}` }))));
  // A room per run: each starts with an empty ring.
  const byVariant = await interleaved(variants, o.rounds, (v, round) => rowsRun(servers.get(v.checkout) as Server, `rows-${round}-${v.rate}-${v.keyed ? "k" : "n"}`, v.rate, o.rowsSeconds, v.keyed));
  const result = variants.map((v) => {
    const runs = byVariant.get(v) ?? [];
    return { variant: v.name, published: runs.reduce((sum, r) => sum + r.published, 0), rowsPerMessage: over(runs, (r) => r.rowsPerMessage), publishP99: over(runs, (r) => r.p99) };
  });
  // Rows read to rebuild a room's keys after a restart: a room keyed at 50 msg/s, then one retry of its last key.
  const own = servers.get("this checkout") as Server;
  const room = "rows-rebuild";
  const keyedRun = await rowsRun(own, room, 50, o.rowsSeconds, true);
  await own.restart();
  const readBefore = (await stats(own.url, room)).historyRowsRead ?? 0;
  const retry = await fetch(`${own.url}/rooms/${room}/publish`, { method: "POST", headers: { "content-type": "application/json", "idempotency-key": `${room}-${keyedRun.published - 1}` }, body: JSON.stringify({ i: keyedRun.published - 1 }) });
  const answer = (await retry.json()) as { duplicate?: boolean; seq: number };
  const after = await stats(own.url, room);
  const rebuild = { keyedMessages: keyedRun.published, rowsInRing: Math.min(keyedRun.rows, 1000), duplicate: answer.duplicate === true, rowsRead: (after.historyRowsRead ?? 0) - readBefore, published: after.published };
  for (const server of servers.values()) await server.stop();
  log(`\nrows read to rebuild the keys of a room keyed at 50 msg/s for ${o.rowsSeconds} s, after a restart: ${rebuild.rowsRead} (the retry: ${answer.duplicate ? "duplicate" : "NOT a duplicate"}, seq ${answer.seq})`);
  log(`\nrows: rows written per message over ${o.rowsSeconds} s runs; median over ${o.rounds} rounds (lowest-highest)`);
  log(row([["variant", 36], ["messages", 9], ["rows/message", 22], ["publish p99 ms", 22]]));
  for (const r of result) log(row([[r.variant, 36], [String(r.published), 9], [show(r.rowsPerMessage, 3), 22], [show(r.publishP99, 1), 22]]));
  return { runs: result, rebuild, room };
}

export default defineBench({
  name: "history",
  title: "history pages, publish latency while a reader pages, rows written per message with and without keys",
  about: `History over HTTP and keyed publishes, against local servers this benchmark starts (build first: npm run build),
each stopped at the end. Three parts, each run as interleaved rounds (every variant once per round, the order
rotated from round to round), each figure the median over the rounds with the lowest and highest beside it:
  pages    a room of --messages messages (published one at a time: one row each, the most rows a page can read)
           paged through whole, newest first and forward, with limit 100 and 1000: rows read per page (the
           answer's rowsRead) and time per page (request to answer, client side).
  publish  --rate HTTP publishes/s for --seconds into a room of that history with --sockets subscribers, with
           nobody paging, with a reader asking for a page of 1000 once a second, and with one paging through the
           history back to back (limit 1000): publish latency p50 / p99 / max, and the pages read meanwhile.
  rows     rows written per published message (historyRowsWritten ÷ published), at 1 and 50 msg/s for
           --rows-seconds, with and without an Idempotency-Key on each publish; then the keyed room's server
           restarts and one retry shows the rows read to rebuild its keys. With --before DIR (another checkout,
           built) the same without keys on the code there.
Prints a table per part on stderr and one JSON object on stdout (also written to load/results/history-<time>.json).`,
  options: {
    parts: { default: "pages,publish,rows", help: "of pages, publish, rows" },
    rounds: { default: "5", help: "interleaved rounds" },
    messages: { default: "10000", help: "messages in the paged room's history" },
    rate: { default: "200", help: "publish: HTTP publishes per second" },
    seconds: { default: "10", help: "publish: seconds per run" },
    sockets: { default: "20", help: "publish: subscribers of the room" },
    "rows-seconds": { default: "20", help: "rows: seconds per run" },
    before: { help: "rows: another checkout, measured without keys beside this one" },
    port: { default: "18801", help: "first port (the parts use it and the next three)" },
  },
  async run(args) {
    const header = resultHeader("history", args.argv);
    const o: Sizes = {
      rounds: args.int("rounds", { min: 1 }),
      messages: args.int("messages", { min: 1 }),
      rate: args.number("rate", { min: 0.1 }),
      seconds: args.number("seconds", { min: 1 }),
      sockets: args.int("sockets"),
      rowsSeconds: args.number("rows-seconds", { min: 1 }),
      port: args.int("port", { min: 1, max: 65530 }),
    };
    const parts = args.list("parts");
    const result = {
      ...header,
      options: { ...o, before: args.text("before") ?? null },
      ...(parts.includes("pages") ? { pages: await pagesPart(o) } : {}),
      ...(parts.includes("publish") ? { publish: await publishPart(o) } : {}),
      ...(parts.includes("rows") ? { rows: await rowsPart(o, args.text("before")) } : {}),
    };
    writeResult(result);
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  },
});
