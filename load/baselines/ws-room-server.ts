/**
 * Baseline: the smallest honest Node `ws` room server that speaks our wire
 * format, the kind of server the published fan-out write-ups measured. It
 * exists so every load scenario can run against it and against the service in
 * the same invocation, on the same machine, and report ratios.
 *
 * What it does: welcome, one frame per message (no coalescing), bounded history
 * with `since` resume and `lost` events, socket `publish`, text ping/pong,
 * HTTP publish, POST /broadcast, room stats, 1012 on shutdown. Messages carry
 * a tag like ours, so clients ack it the same way.
 * What it deliberately does not do: enforce the ack window (no cap on what a
 * slow reader buffers; acks free nothing), authenticate, rate-limit. History
 * is in memory, or with --durable PATH also committed to SQLite before each
 * publish is answered (durable-history.ts), to compare like with like.
 *
 * Run: node load/dist/baseline-server.js --port 18210 [--durable /tmp/history.sqlite]   (or PORT=18210)
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { WebSocketServer, type WebSocket } from "ws";
import {
  CloseCode,
  PING,
  PONG,
  isValidRoomName,
  parseClientFrame,
  type LostEvent,
  type ServerMessage,
  type PublishedEvent,
  type ServerEvent,
  type WelcomeEvent,
} from "../../protocol";
import { DEFAULTS } from "../../common/settings";
import { parseValues } from "../src/kit/args";
import { DurableHistory } from "./durable-history";

interface HistoryEntry {
  seq: number;
  ts: number;
  frame: string;
}

interface Room {
  name: string;
  seq: number;
  epoch: string;
  sockets: Set<WebSocket>;
  history: HistoryEntry[];
  published: number;
  framesSent: number;
  bytesSent: number;
}

const lastHeard = new WeakMap<WebSocket, number>();
const rooms = new Map<string, Room>();

const { values: options } = parseValues(process.argv.slice(2), { port: {}, durable: {} });
const durablePath = options.durable;
const durable = durablePath === undefined ? null : new DurableHistory(durablePath, DEFAULTS.HISTORY_MAX_MESSAGES);

function roomNamed(name: string): Room {
  let room = rooms.get(name);
  if (!room) {
    room = {
      name,
      seq: 0,
      // A durable baseline's history outlives the process, so its identity does too.
      epoch: durable ? "durable" : randomBytes(8).toString("hex"),
      sockets: new Set(),
      history: [],
      published: 0,
      framesSent: 0,
      bytesSent: 0,
    };
    rooms.set(name, room);
  }
  return room;
}

function send(room: Room, socket: WebSocket, frame: string): void {
  socket.send(frame);
  room.framesSent++;
  room.bytesSent += Buffer.byteLength(frame);
}

function sendEvent(room: Room, socket: WebSocket, event: ServerEvent): void {
  send(room, socket, JSON.stringify(event));
}

function trimHistory(room: Room, now: number): void {
  const maxAge = DEFAULTS.HISTORY_MAX_AGE_SECONDS * 1000;
  let drop = Math.max(0, room.history.length - DEFAULTS.HISTORY_MAX_MESSAGES);
  while (drop < room.history.length && now - (room.history[drop] as HistoryEntry).ts > maxAge) drop++;
  if (drop > 0) room.history.splice(0, drop);
}

/** Publishes `data` into `room`: one frame per socket, no cap, no coalescing. */
function publish(room: Room, data: unknown): { seq: number; recipients: number } {
  const ts = Date.now();
  const seq = ++room.seq;
  const event: ServerMessage = { type: "message", seq, data, ts, tag: randomBytes(4).readUInt32BE(0) };
  const frame = JSON.stringify(event);
  // Durable: committed before anyone is told, as the service stores before it answers.
  durable?.append(room.name, seq, ts, frame);
  room.history.push({ seq, ts, frame });
  trimHistory(room, ts);
  room.published++;
  for (const socket of room.sockets) send(room, socket, frame);
  return { seq, recipients: room.sockets.size };
}

/** Sends everything after `since` that history still holds, announcing what it no longer holds. */
function replayAfter(room: Room, socket: WebSocket, since: number, to = room.seq): void {
  trimHistory(room, Date.now());
  const oldest = room.history[0]?.seq ?? room.seq + 1;
  if (since + 1 < oldest && since < to) {
    const lost: LostEvent = { type: "lost", reason: "history", from: since + 1, to: Math.min(oldest - 1, to) };
    sendEvent(room, socket, lost);
  }
  for (const entry of room.history) if (entry.seq > since && entry.seq <= to) send(room, socket, entry.frame);
}

function accept(room: Room, socket: WebSocket, since: number | undefined, epoch: string | undefined): void {
  room.sockets.add(socket);
  lastHeard.set(socket, Date.now());
  const welcome: WelcomeEvent = {
    type: "welcome",
    room: room.name,
    seq: room.seq,
    epoch: room.epoch,
    // Announced for wire compatibility; this baseline does not enforce it.
    window: DEFAULTS.WINDOW_BYTES,
    // No frame budget: the baseline never rate-limits clients.
    rate: { perSecond: 0, burst: 0 },
  };
  sendEvent(room, socket, welcome);
  if (since !== undefined) {
    if (epoch !== undefined && epoch !== room.epoch) {
      const lost: LostEvent = { type: "lost", reason: "epoch", from: since + 1, to: Math.max(since + 1, room.seq) };
      sendEvent(room, socket, lost);
    } else {
      replayAfter(room, socket, since);
    }
  }

  socket.on("message", (raw, isBinary) => {
    lastHeard.set(socket, Date.now());
    const text = isBinary ? "" : raw.toString();
    if (text === PING) {
      socket.send(PONG);
      return;
    }
    if (Buffer.byteLength(text) > DEFAULTS.MAX_FRAME_BYTES) {
      socket.close(CloseCode.MESSAGE_TOO_BIG, "frame too large");
      return;
    }
    const parsed = parseClientFrame(text);
    if (!parsed.ok) {
      socket.close(CloseCode.BAD_FRAME, parsed.error.slice(0, 120));
      return;
    }
    const frame = parsed.value;
    switch (frame.type) {
      case "ack":
        return; // no window here: acks free nothing
      case "publish": {
        const { seq } = publish(room, frame.data);
        const answer: PublishedEvent = { type: "published", seq };
        if (frame.id !== undefined) answer.id = frame.id;
        sendEvent(room, socket, answer);
        return;
      }
    }
  });
  socket.on("close", () => room.sockets.delete(socket));
  socket.on("error", () => room.sockets.delete(socket));
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function readBody(req: IncomingMessage, limit: number): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        resolve(undefined);
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/** Same rule as the service: a JSON body is delivered as that JSON value, other text as a string. */
function decodeBody(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const ROOM_ROUTE = /^\/rooms\/([^/]+)(\/ws|\/publish)?$/;

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://localhost");
  if (url.pathname === "/healthz") return json(res, 200, { ok: true, server: "baseline-ws" });
  if (url.pathname === "/broadcast" && req.method === "POST") {
    const text = await readBody(req, DEFAULTS.MAX_MESSAGE_BYTES + 64 * 1024);
    if (text === undefined) return json(res, 413, { error: "too_large", message: "body too large" });
    let body: { data?: unknown; rooms?: unknown; prefix?: unknown };
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      return json(res, 400, { error: "bad_json", message: "body must be JSON" });
    }
    const names = Array.isArray(body.rooms)
      ? body.rooms.filter((r): r is string => typeof r === "string")
      : typeof body.prefix === "string"
        ? [...rooms.keys()].filter((r) => r.startsWith(body.prefix as string))
        : [];
    let recipients = 0;
    const seqs: Record<string, number> = {};
    for (const name of names) {
      const result = publish(roomNamed(name), body.data);
      recipients += result.recipients;
      seqs[name] = result.seq;
    }
    return json(res, 200, { rooms: names.length, recipients, seqs });
  }
  const match = ROOM_ROUTE.exec(url.pathname);
  if (!match) return json(res, 404, { error: "not_found", message: `no route for ${req.method} ${url.pathname}` });
  const name = decodeURIComponent(match[1] as string);
  if (!isValidRoomName(name)) return json(res, 400, { error: "bad_room", message: "invalid room name" });
  if (match[2] === "/publish" && req.method === "POST") {
    const text = await readBody(req, DEFAULTS.MAX_MESSAGE_BYTES);
    if (text === undefined) return json(res, 413, { error: "too_large", message: "body too large" });
    return json(res, 200, publish(roomNamed(name), decodeBody(text)));
  }
  if (match[2] === undefined && req.method === "GET") {
    const room = rooms.get(name);
    let bufferedBytes = 0;
    for (const socket of room?.sockets ?? []) bufferedBytes += socket.bufferedAmount;
    return json(res, 200, {
      room: name,
      connections: room?.sockets.size ?? 0,
      seq: room?.seq ?? 0,
      epoch: room?.epoch ?? null,
      published: room?.published ?? 0,
      framesSent: room?.framesSent ?? 0,
      bytesSent: room?.bytesSent ?? 0,
      bufferedBytes,
      drops: 0,
      kicks: 0,
      windowBytes: null,
    });
  }
  if (match[2] === "/ws") return json(res, 426, { error: "upgrade_required", message: "this endpoint takes a WebSocket upgrade" });
  return json(res, 405, { error: "method_not_allowed", message: `${req.method} not allowed here` });
}

function parsePort(): number {
  const raw = options.port ?? process.env.PORT;
  const port = Number(raw ?? 18210);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) throw new Error(`bad port ${raw}`);
  return port;
}

const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: DEFAULTS.MAX_FRAME_BYTES });
const server = createServer((req, res) => {
  handle(req, res).catch((error: unknown) => json(res, 500, { error: "internal", message: String(error) }));
});

server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
  const url = new URL(req.url ?? "/", "http://localhost");
  const match = ROOM_ROUTE.exec(url.pathname);
  const name = match && match[2] === "/ws" ? decodeURIComponent(match[1] as string) : undefined;
  if (!name || !isValidRoomName(name)) {
    socket.end("HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
    return;
  }
  const sinceText = url.searchParams.get("since");
  const since = sinceText !== null && /^\d{1,15}$/.test(sinceText) ? Number(sinceText) : undefined;
  const epoch = url.searchParams.get("epoch") ?? undefined;
  wss.handleUpgrade(req, socket, head, (ws) => accept(roomNamed(name), ws, since, epoch));
});

// Sockets silent for the idle timeout are closed, as the service does.
const idleSweep = setInterval(() => {
  const cutoff = Date.now() - DEFAULTS.IDLE_TIMEOUT_SECONDS * 1000;
  for (const room of rooms.values()) {
    for (const socket of room.sockets) {
      if ((lastHeard.get(socket) ?? 0) < cutoff) socket.close(CloseCode.IDLE_TIMEOUT, "idle");
    }
  }
}, 5000);
idleSweep.unref();

function shutdown(): void {
  for (const room of rooms.values()) for (const socket of room.sockets) socket.close(CloseCode.SERVICE_RESTART, "restart");
  server.close();
  // Give close frames a moment to leave, then go.
  setTimeout(() => process.exit(0), 300).unref();
}
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);

// A durable baseline restarts with its rooms' history and positions.
for (const stored of durable?.load() ?? []) {
  const room = roomNamed(stored.room);
  room.history.push({ seq: stored.seq, ts: stored.ts, frame: stored.frame });
  room.seq = Math.max(room.seq, stored.seq);
}

const port = parsePort();
server.listen(port, "127.0.0.1", () => {
  process.stdout.write(`baseline ws room server listening on http://127.0.0.1:${port}\n`);
});
