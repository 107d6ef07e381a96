import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { defineBench } from "../src/kit/bench";
import { RawClient } from "../src/kit/raw-client";
import { Server } from "../src/kit/server";
import { paced, sleep, waitFor } from "../src/kit/time";

const round = (n: number, digits = 2): number => Math.round(n * 10 ** digits) / 10 ** digits;

interface Received {
  at: number;
  events: Array<{ id: string; type: string; room: string }>;
}

/** A receiver on 127.0.0.1 that acknowledges everything (204) and keeps what it got. */
async function startReceiver(): Promise<{ url: string; requests: Received[]; close: () => Promise<void> }> {
  const requests: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const { events } = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { events: Received["events"] };
      requests.push({ at: Date.now(), events: events.map((e) => ({ id: e.id, type: e.type, room: e.room })) });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`, requests, close: () => new Promise((r) => server.close(() => r())) };
}

const roomStats = async (server: Server, room: string): Promise<Record<string, number>> => (await (await fetch(`${server.url}/rooms/${room}`)).json()) as Record<string, number>;

/** Requests per second: the mean from the first request to the last, and the busiest whole second. */
function rates(requests: Received[]): { mean: number; peak: number } {
  const first = requests[0]?.at;
  if (first === undefined) return { mean: 0, peak: 0 };
  const span = Math.max(1, ((requests.at(-1)?.at ?? first) - first) / 1000);
  const perSecond = new Map<number, number>();
  for (const r of requests) perSecond.set(Math.floor((r.at - first) / 1000), (perSecond.get(Math.floor((r.at - first) / 1000)) ?? 0) + 1);
  return { mean: round(requests.length / span, 1), peak: Math.max(...perSecond.values()) };
}

async function churn(port: number, delay: number, o: { members: number; share: number; seconds: number }) {
  const receiver = await startReceiver();
  const server = await Server.start({ kind: "ours", port, gate: "off", vars: { WEBHOOK_URL: receiver.url, WEBHOOK_SECRET: "bench", PRESENCE_LEAVE_DELAY_MS: String(delay), ROOM_SHARD_SOCKETS: "0" } });
  const room = `churn-${delay}`;
  const url = (i: number): string => `${server.wsUrl}/rooms/${room}/ws?member=u${i}&info=${encodeURIComponent(JSON.stringify({ name: `User ${i}` }))}`;
  const sockets: RawClient[] = [];
  let reloads = 0;
  try {
    const t0 = Date.now();
    for (let i = 0; i < o.members; i++) sockets.push(await new RawClient(url(i)).open());
    const churnUntil = Date.now() + o.seconds * 1000;
    while (Date.now() < churnUntil) {
      const chosen = new Set<number>();
      while (chosen.size < Math.round(o.members * o.share)) chosen.add(Math.floor(Math.random() * o.members));
      await Promise.all(
        [...chosen].map(async (i) => {
          await sockets[i]?.close();
          await sleep(100);
          sockets[i] = await new RawClient(url(i)).open();
        }),
      );
      reloads += chosen.size;
      await sleep(1000);
    }
    await Promise.all(sockets.map((s) => s.close()));
    await waitFor(() => receiver.requests.some((r) => r.events.some((e) => e.type === "room.vacated")), 120_000, 200);
    await sleep(1000);
    const stats = await roomStats(server, room);
    const events = receiver.requests.reduce((n, r) => n + r.events.length, 0);
    const byType: Record<string, number> = {};
    for (const r of receiver.requests) for (const e of r.events) byType[e.type] = (byType[e.type] ?? 0) + 1;
    return {
      leaveDelayMs: delay,
      members: o.members,
      reloads,
      seconds: round((Date.now() - t0) / 1000, 1),
      events,
      byType,
      requests: receiver.requests.length,
      eventsPerRequest: round(events / Math.max(1, receiver.requests.length)),
      requestsPerSecond: rates(receiver.requests),
      webhookRowsWritten: stats.webhookRowsWritten,
      rowsWrittenPerEvent: round((stats.webhookRowsWritten ?? 0) / Math.max(1, stats.webhookEvents ?? 0), 3),
      recordedEvents: stats.webhookEvents,
      failedRequests: stats.webhookFailedRequests,
    };
  } finally {
    await Promise.all(sockets.map((s) => s.close()));
    await server.stop();
    await receiver.close();
  }
}

const EVENTS = "room.occupied,room.vacated,member.joined,member.left";

async function messages(port: number, mode: "off" | "on" | "on, message.published", rate: number, seconds: number) {
  const receiver = await startReceiver();
  const vars: Record<string, string> = mode === "off" ? {} : { WEBHOOK_URL: receiver.url, WEBHOOK_SECRET: "bench", WEBHOOK_EVENTS: mode === "on" ? EVENTS : `${EVENTS},message.published` };
  const server = await Server.start({ kind: "ours", port, gate: "off", vars });
  const room = "messages";
  const socket = await new RawClient(`${server.wsUrl}/rooms/${room}/ws`).open();
  try {
    await sleep(500);
    const before = await roomStats(server, room);
    const t0 = Date.now();
    await paced(rate * seconds, { concurrency: 1, rate }, async (i) => {
      const res = await fetch(`${server.url}/rooms/${room}/publish`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ i, text: "x".repeat(100) }) });
      await res.arrayBuffer();
    });
    await sleep(2000);
    const after = await roomStats(server, room);
    const delta = (key: string): number => (after[key] ?? 0) - (before[key] ?? 0);
    const published = delta("published");
    const requests = receiver.requests.filter((r) => r.at >= t0);
    const events = requests.reduce((n, r) => n + r.events.length, 0);
    return {
      webhooks: mode,
      rate,
      published,
      historyRowsPerMessage: round(delta("historyRowsWritten") / published, 3),
      webhookRowsPerMessage: round(delta("webhookRowsWritten") / published, 3),
      rowsWrittenPerMessage: round((delta("historyRowsWritten") + delta("webhookRowsWritten")) / published, 3),
      requests: requests.length,
      eventsPerRequest: requests.length === 0 ? 0 : round(events / requests.length),
    };
  } finally {
    await socket.close();
    await server.stop();
    await receiver.close();
  }
}

export default defineBench({
  name: "webhooks",
  title: "what webhooks cost a room in SQLite rows written and in requests to the receiver",
  positionals: "churn|messages",
  about: `Every run starts its own local server (build first: npm run build) on 127.0.0.1 with a fresh data directory, and
a receiver in this process on 127.0.0.1 that answers 204 to every request (docs/webhooks.md).
  churn [--members 1000 --share 0.1 --seconds 30 --delays 3000,0]
    N members join one room, then every second a share of them reload (close, and reconnect 100 ms later) for S
    seconds, then all leave; once per leave delay. Figures: events the receiver got, requests, events per
    request, requests per second (mean over the run and the busiest second), and rows written per event (the
    room's webhookRowsWritten ÷ events).
  messages [--rates 1,50 --seconds 20]
    One listening socket in a room and R HTTP publishes a second for S seconds, with webhooks off, on without
    message.published, and on with it. Figures: rows written per message (history rows + webhook rows, ÷
    messages), requests and events per request.
Prints one JSON object on stdout.`,
  options: {
    members: { default: "1000", help: "churn: members of the room" },
    share: { default: "0.1", help: "churn: share of the members reloading each second" },
    seconds: { help: "churn: seconds of reloads (default 30); messages: seconds of publishing (default 20)" },
    delays: { default: "3000,0", help: "churn: PRESENCE_LEAVE_DELAY_MS, a run each" },
    rates: { default: "1,50", help: "messages: publishes per second, a run each" },
    port: { default: "18461", help: "port of the server" },
    "max-seconds": { default: "900", help: "the run gives up after this long" },
  },
  limitSeconds: (args) => args.number("max-seconds", { min: 1 }),
  async run(args) {
    const [scenario] = args.positionals;
    const port = args.int("port");
    let result: Record<string, unknown>;
    if (scenario === "churn") {
      const options = { members: args.int("members", { min: 1 }), share: args.number("share", { min: 0, max: 1 }), seconds: args.has("seconds") ? args.number("seconds", { min: 0 }) : 30 };
      const runs = [];
      for (const delay of args.numbers("delays", { min: 0, integer: true })) runs.push(await churn(port, delay, options));
      result = { scenario, ...options, runs };
    } else if (scenario === "messages") {
      const seconds = args.has("seconds") ? args.number("seconds", { min: 1 }) : 20;
      const runs = [];
      for (const rate of args.numbers("rates", { min: 0.1 })) for (const mode of ["off", "on", "on, message.published"] as const) runs.push(await messages(port, mode, rate, seconds));
      result = { scenario, seconds, runs };
    } else throw new Error("webhooks takes churn or messages");
    console.log(JSON.stringify({ date: new Date().toISOString(), ...result }, null, 2));
  },
});
