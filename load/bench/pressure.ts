import { randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";
import { WebSocket } from "ws";
import { readChoice } from "../src/kit/args";
import { defineBench } from "../src/kit/bench";
import { sampleProcess } from "../src/kit/proc";
import { Server } from "../src/kit/server";
import { sleep } from "../src/kit/time";

type Via = "ws" | "plain" | "split" | "after-request";

/** A socket as the storms hold it: it sends, tells the close code the server sent (1006 without one), and is cut. */
interface Held {
  send(payload: Buffer): void;
  closed: Promise<number | string>;
  terminate(): void;
}

/** An opened socket, or a refusal (its status; the connection left open), or an error. */
type Opened = { ws: Held } | { status: number; socket: Socket | null } | { error: string };

interface ProcessFigures {
  rssKb: number;
  cpuMs: number;
  fds: number;
}

function figures(pid: number | undefined): ProcessFigures | null {
  const s = pid === undefined ? undefined : sampleProcess(pid);
  return s ? { rssKb: s.rssBytes / 1024, cpuMs: s.cpuUs / 1000, fds: s.fds } : null;
}

/** A WebSocket message header from a client: masked with a zero key, so the payload goes as it is. */
function clientFrameHeader(length: number): Buffer {
  const extra = length < 126 ? 0 : length < 65_536 ? 2 : 8;
  const header = Buffer.alloc(2 + extra + 4);
  header[0] = 0x81;
  header[1] = 0x80 | (extra === 0 ? length : extra === 2 ? 126 : 127);
  if (extra === 2) header.writeUInt16BE(length, 2);
  if (extra === 8) header.writeBigUInt64BE(BigInt(length), 2);
  return header;
}

/** One string per payload, however many sockets send it. */
let lastText: { payload: Buffer; text: string } = { payload: Buffer.alloc(0), text: "" };
function textOf(payload: Buffer): string {
  if (lastText.payload !== payload) lastText = { payload, text: payload.toString("latin1") };
  return lastText.text;
}

class Storms {
  readonly base: string;
  readonly wsBase: string;

  constructor(
    readonly port: number,
    readonly via: Via,
  ) {
    this.base = `http://127.0.0.1:${port}`;
    this.wsBase = `ws://127.0.0.1:${port}`;
  }

  /** Opens one WebSocket with the ws library. */
  openWs(url: string, onMessage?: (text: string) => void): Promise<Opened> {
    return new Promise((resolve) => {
      const ws = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: 15_000 });
      ws.on("message", (data: Buffer) => onMessage?.(data.toString()));
      ws.once("open", () => {
        const closed = new Promise<number>((done) => {
          // The close frame is the answer; the TCP connection may linger after it.
          ws.once("close", (code: number) => done(code));
          (ws as unknown as { _receiver?: NodeJS.EventEmitter })._receiver?.on("conclude", (code: number) => done(code));
        });
        resolve({ ws: { send: (payload) => ws.send(textOf(payload)), closed, terminate: () => ws.terminate() } });
      });
      ws.once("unexpected-response", (req, res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0, socket: req.socket });
      });
      ws.once("error", (error: NodeJS.ErrnoException) => resolve({ error: error.code ?? error.message }));
    });
  }

  /**
   * Opens one WebSocket by hand, writing its handshake as --upgrade-via says: plain (one write), split (the
   * request line first, the headers 50 ms later), after-request (on a keep-alive connection, after a GET /healthz
   * answered on it). Text messages go to `onMessage`.
   */
  rawSocket(path: string, onMessage?: (text: string) => void): Promise<Opened> {
    const { port, via } = this;
    return new Promise((resolve) => {
      const socket = connect({ port, host: "127.0.0.1", noDelay: true });
      const head = `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString("base64")}\r\nSec-WebSocket-Version: 13\r\n\r\n`;
      let buffered: Buffer = Buffer.alloc(0);
      let phase: "first-response" | "handshake" | "open" | "refused" | "closed" = via === "after-request" ? "first-response" : "handshake";
      let settled = false;
      const settle = (value: Opened): void => {
        if (!settled) {
          settled = true;
          resolve(value);
        }
      };
      let closedWith: (code: number) => void = () => undefined;
      const closed = new Promise<number>((r) => (closedWith = r));
      const sendHandshake = (): void => {
        if (via !== "split") return void socket.write(head);
        const cut = head.indexOf("\r\n") + 2;
        socket.write(head.slice(0, cut));
        setTimeout(() => socket.writable && socket.write(head.slice(cut)), 50);
      };
      /** The complete response at the start of `buffered` (status and bytes), or null while it is incomplete. */
      const response = (): { status: number; bytes: number } | null => {
        const end = buffered.indexOf("\r\n\r\n");
        if (end === -1) return null;
        const text = buffered.subarray(0, end).toString("latin1");
        const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0);
        const body = status === 101 ? 0 : Number(/\r\ncontent-length:[ \t]*(\d+)/i.exec(text)?.[1] ?? 0);
        return buffered.length < end + 4 + body ? null : { status, bytes: end + 4 + body };
      };
      socket.on("connect", () => (via === "after-request" ? socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`) : sendHandshake()));
      socket.on("data", (chunk: Buffer) => {
        buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
        for (;;) {
          if (phase === "first-response" || phase === "handshake") {
            const answer = response();
            if (!answer) return;
            buffered = buffered.subarray(answer.bytes);
            // Refused before the upgrade was even sent (the gate at its connection cap), or the upgrade refused.
            if ((phase === "first-response" && answer.status !== 200) || (phase === "handshake" && answer.status !== 101)) {
              phase = "refused";
              return settle({ status: answer.status, socket });
            }
            if (phase === "first-response") {
              phase = "handshake";
              sendHandshake();
              continue;
            }
            phase = "open";
            settle({ ws: { send: (payload) => (socket.write(clientFrameHeader(payload.length)), socket.write(payload)), closed, terminate: () => socket.destroy() } });
          } else if (phase === "open") {
            // Server frames are not masked.
            if (buffered.length < 2) return;
            const short = (buffered[1] as number) & 0x7f;
            const headerBytes = 2 + (short === 126 ? 2 : short === 127 ? 8 : 0);
            if (buffered.length < headerBytes) return;
            const length = short === 126 ? buffered.readUInt16BE(2) : short === 127 ? Number(buffered.readBigUInt64BE(2)) : short;
            if (buffered.length < headerBytes + length) return;
            const opcode = (buffered[0] as number) & 0x0f;
            if (opcode === 8) {
              closedWith(length >= 2 ? buffered.readUInt16BE(headerBytes) : 1005);
              phase = "closed";
              return;
            }
            if (opcode === 1) onMessage?.(buffered.subarray(headerBytes, headerBytes + length).toString());
            buffered = buffered.subarray(headerBytes + length);
          } else return;
        }
      });
      socket.on("error", (error: NodeJS.ErrnoException) => settle({ error: error.code ?? error.message }));
      socket.on("close", () => {
        settle({ error: "closed before an answer" });
        closedWith(1006);
      });
    });
  }

  /** A socket to a room, through the ws library or by hand as --upgrade-via says. */
  open(room: string, onMessage?: (text: string) => void): Promise<Opened> {
    return this.via === "ws" ? this.openWs(`${this.wsBase}/rooms/${room}/ws`, onMessage) : this.rawSocket(`/rooms/${room}/ws`, onMessage);
  }

  async hold(count: number, room: string) {
    const held: Held[] = [];
    const received = new Map<string, number>();
    const refused: Record<string, number> = {};
    const started = Date.now();
    const onMessage = (text: string): void => void (text.includes('"type":"message"') && received.set(text, (received.get(text) ?? 0) + 1));
    for (let i = 0; i < count; i += 100) {
      for (const r of await Promise.all(Array.from({ length: Math.min(100, count - i) }, () => this.open(room, onMessage)))) {
        if ("ws" in r) held.push(r.ws);
        else {
          const why = "status" in r ? r.status : r.error;
          refused[why] = (refused[why] ?? 0) + 1;
        }
      }
    }
    return { held, refused, ms: Date.now() - started, received };
  }

  /** Publishes and waits until every held socket has the message. */
  async servedCheck(room: string, heldCount: number, received: Map<string, number>, tag: string) {
    let answer: { status: number; body: { recipients?: number } };
    try {
      const res = await fetch(`${this.base}/rooms/${room}/publish`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ check: tag }) });
      answer = { status: res.status, body: (await res.json()) as { recipients?: number } };
    } catch (error) {
      return { error: String((error as { cause?: { code?: string } }).cause?.code ?? error) };
    }
    const delivered = (): number => [...received].filter(([text]) => text.includes(`"check":"${tag}"`)).reduce((a, [, n]) => a + n, 0);
    const deadline = Date.now() + 10_000;
    while (delivered() < heldCount && Date.now() < deadline) await sleep(50);
    return { status: answer.status, recipients: answer.body.recipients, delivered: delivered() };
  }

  /**
   * Plain TCP connections (`send`: none), or connections that send a request (with Connection: close) or one byte
   * and then never close their side, ignoring the server's FIN: whatever the server gives back by closing them
   * counts as `closedByServer`.
   */
  connections(count: number, send?: "request" | "byte") {
    const ours = new WeakSet<Socket>();
    const result = { connected: 0, errors: 0, closedByServer: 0, ...(send ? { finReceived: 0 } : {}) };
    const request = `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${this.port}\r\nConnection: close\r\n\r\n`;
    const sockets = Array.from({ length: count }, () => {
      const s = connect({ port: this.port, host: "127.0.0.1", allowHalfOpen: send !== undefined });
      s.on("connect", () => {
        result.connected += 1;
        if (send) s.write(send === "byte" ? "G" : request);
      });
      s.on("data", () => undefined);
      if (send) s.on("end", () => (result.finReceived = (result.finReceived ?? 0) + 1));
      s.on("error", () => (result.errors += 1));
      s.on("close", () => void (ours.has(s) || (result.closedByServer += 1)));
      return s;
    });
    return {
      result,
      end: () => {
        for (const s of sockets) {
          ours.add(s);
          s.destroy();
        }
      },
    };
  }

  async upgrades(count: number, room: string) {
    const outcomes = await Promise.all(Array.from({ length: count }, () => this.open(room)));
    const result = { opened: 0, refused: {} as Record<string, number>, errors: {} as Record<string, number> };
    for (const o of outcomes) {
      if ("ws" in o) result.opened += 1;
      else if ("status" in o) result.refused[o.status] = (result.refused[o.status] ?? 0) + 1;
      else result.errors[o.error] = (result.errors[o.error] ?? 0) + 1;
    }
    return { result, end: () => outcomes.forEach((o) => ("ws" in o ? o.ws.terminate() : "socket" in o ? o.socket?.destroy() : undefined)) };
  }
}

const OPTIONS = {
  ulimit: { help: "the server's descriptor limit (soft and hard)" },
  gate: { default: "auto", help: "the accept gate: auto, on, off" },
  port: { default: "18731", help: "port of the server" },
  sockets: { default: "200", help: "WebSockets held" },
  idle: { default: "0", help: "idle TCP connections of the idle storm" },
  upgrades: { default: "0", help: "upgrades of the upgrade storm" },
  "hold-ms": { default: "6000", help: "how long each storm is held" },
  publishes: { default: "0", help: "publishes to the held sockets, for the CPU per delivery" },
  "big-frames": { default: "0", help: "sockets that each send one frame of --frame-bytes" },
  "frame-bytes": { default: "31457280", help: "bytes of a big frame" },
  uploads: { default: "0", help: "publishes with a body of --upload-bytes" },
  "upload-bytes": { default: "4194304", help: "bytes of an upload" },
  launcher: { help: "another server.mjs to run" },
  "upgrade-via": { default: "ws", help: "ws, plain, split or after-request" },
  "half-open": { default: "0", help: "half-open connections" },
  "half-open-send": { default: "request", help: "request or byte" },
  stop: { help: "signals to stop the server with at the end, e.g. SIGINT,SIGINT" },
  "stop-gap-ms": { default: "30", help: "ms between the stop signals" },
} as const;

export default defineBench({
  name: "pressure",
  title: "the local server under descriptor pressure and hostile connections (storms, big frames, uploads, half-open)",
  about: `Starts the local server (optionally under a descriptor limit), holds a number of WebSockets, then throws a storm of
idle TCP connections and a storm of upgrades at it, and checks that it is still running and serving the sockets
it held. Also reports what each held socket costs (memory and descriptors of the launcher and of workerd), the
handshake rate, with --publishes the CPU per delivery, with --big-frames what oversized client frames cost before
the room refuses them, and with --uploads whether oversize publish bodies get their 413 or a reset.
--upgrade-via chooses how the upgrade storm and the big-frame senders write their handshake: with the ws library
(ws), or by hand: plain (one write), split (the request head in two writes), after-request (on a keep-alive
connection, after a GET /healthz answered on it). --half-open N opens N connections that send a request
(--half-open-send request, with Connection: close) or one byte (byte) and then never close their side, and checks
after --hold-ms that the server gave their slots back. --stop SIGINT,SIGINT stops the server at the end with these
signals (--stop-gap-ms apart) and counts the close codes of the held sockets. --launcher PATH runs another
server.mjs (an earlier version, to compare).
Only 127.0.0.1; every phase is bounded in count and time. The clients run in this process, under its own
descriptor limit (raise it, not the server's). Prints one JSON object. Build first (npm run build).
  npm run bench -- pressure --ulimit 600 --sockets 200 --idle 1800 --upgrades 1800
  npm run bench -- pressure --gate on --sockets 5000 --publishes 20
  npm run bench -- pressure --sockets 10 --big-frames 10 --frame-bytes 31457280
  npm run bench -- pressure --ulimit 600 --sockets 20 --half-open 300`,
  options: OPTIONS,
  async run(args) {
    const num = (name: Parameters<typeof args.int>[0]): number => args.int(name, { min: 0 });
    const via = readChoice(args.text("upgrade-via"), "upgrade-via", ["ws", "plain", "split", "after-request"], "ws");
    const halfOpenSend = readChoice(args.text("half-open-send"), "half-open-send", ["request", "byte"], "request");
    const gate = readChoice(args.text("gate"), "gate", ["auto", "on", "off"], "auto");
    const holdMs = num("hold-ms");
    const port = num("port");
    const storms = new Storms(port, via);
    const launcher = args.text("launcher");
    const server = await Server.start({ kind: "ours", port, gate, ...(launcher ? { launcher } : {}), ...(args.has("ulimit") ? { fdLimit: num("ulimit") } : {}) });
    const sample = () => ({ launcher: figures(server.launcherPid), workerd: figures(server.pid) });
    /** Highest descriptor counts seen while `during` runs. */
    const peaks = async <T>(during: () => Promise<T>): Promise<{ value: T; peakFds: { launcher: number; workerd: number } }> => {
      const peak = { launcher: 0, workerd: 0 };
      let running = true;
      const loop = (async () => {
        while (running) {
          const s = sample();
          peak.launcher = Math.max(peak.launcher, s.launcher?.fds ?? 0);
          peak.workerd = Math.max(peak.workerd, s.workerd?.fds ?? 0);
          await sleep(20);
        }
      })();
      const value = await during();
      running = false;
      await loop;
      return { value, peakFds: peak };
    };
    const report: Record<string, unknown> = { args: Object.fromEntries((Object.keys(OPTIONS) as Array<keyof typeof OPTIONS>).map((k) => [k, args.text(k)])), banner: server.output().split("\n").filter((l) => l.startsWith("  ")).map((l) => l.trim()) };
    const room = "storm";
    await sleep(1000);
    const before = sample();
    const hold = await storms.hold(num("sockets"), room);
    await sleep(2000);
    const after = sample();
    const n = hold.held.length;
    const per = (k: "launcher" | "workerd") => {
      const [a, b] = [after[k], before[k]];
      return { rssKb: n && a && b ? +((a.rssKb - b.rssKb) / n).toFixed(1) : null, fds: n && a && b ? +((a.fds - b.fds) / n).toFixed(2) : null, cpuMsPerHandshake: n && a && b ? +((a.cpuMs - b.cpuMs) / n).toFixed(3) : null };
    };
    const held: Record<string, unknown> = { sockets: n, upgradeVia: via, refused: hold.refused, handshakesPerSecond: Math.round((n * 1000) / hold.ms), perSocket: { launcher: per("launcher"), workerd: per("workerd") } };
    report.held = held;
    // Publishing must still work with every socket the server allows held.
    if (n > 0) held.served = await storms.servedCheck(room, n, hold.received, "held");

    if (num("publishes") > 0) {
      const s0 = sample();
      for (let i = 0; i < num("publishes"); i++) await storms.servedCheck(room, n, hold.received, `p${i}`);
      const s1 = sample();
      const deliveries = num("publishes") * n;
      const us = (k: "launcher" | "workerd"): number => +((((s1[k]?.cpuMs ?? 0) - (s0[k]?.cpuMs ?? 0)) * 1000) / deliveries).toFixed(2);
      report.fanOut = { deliveries, cpuUsPerDelivery: { launcher: us("launcher"), workerd: us("workerd") } };
    }
    if (num("idle") > 0) {
      const { value: storm, peakFds } = await peaks(async () => {
        const s = storms.connections(num("idle"));
        await sleep(holdMs);
        return s;
      });
      const served = await storms.servedCheck(room, n, hold.received, "after-idle");
      storm.end();
      report.idleStorm = { connections: num("idle"), ...storm.result, peakFds, alive: server.alive(), served };
    }
    if (num("upgrades") > 0) {
      const { value: storm, peakFds } = await peaks(async () => {
        const s = await storms.upgrades(num("upgrades"), room);
        await sleep(holdMs);
        return s;
      });
      const served = await storms.servedCheck(room, n, hold.received, "after-upgrades");
      storm.end();
      report.upgradeStorm = { upgrades: num("upgrades"), upgradeVia: via, ...storm.result, peakFds, alive: server.alive(), served };
    }
    if (num("half-open") > 0) {
      const { value: storm, peakFds } = await peaks(async () => {
        const s = storms.connections(num("half-open"), halfOpenSend);
        await sleep(holdMs);
        return s;
      });
      const during = sample();
      const late = await storms.openWs(`${storms.wsBase}/rooms/${room}/ws`);
      const served = await storms.servedCheck(room, n, hold.received, "after-half-open");
      // The gate's last report line (counts since the one before, and its relayed and pending connections).
      const gateLines = server.output().split("\n").filter((l) => l.startsWith('{"event":"gate"'));
      report.halfOpen = {
        connections: num("half-open"),
        send: halfOpenSend,
        afterMs: holdMs,
        ...storm.result,
        peakFds,
        fdsAfter: { launcher: during.launcher?.fds, workerd: during.workerd?.fds },
        newSocket: "ws" in late ? "opened" : "status" in late ? late.status : late.error,
        served,
        gate: gateLines.length ? (JSON.parse(gateLines.at(-1) as string) as unknown) : null,
        alive: server.alive(),
      };
      if ("ws" in late) late.ws.terminate();
      if ("socket" in late) late.socket?.destroy();
      storm.end();
    }
    if (num("uploads") > 0) {
      const body = Buffer.alloc(num("upload-bytes"), 0x61);
      const outcomes: Record<string, number> = {};
      for (let i = 0; i < num("uploads"); i++) {
        let outcome: string;
        try {
          const res = await fetch(`${storms.base}/rooms/upload/publish`, { method: "POST", headers: { "content-type": "text/plain" }, body });
          outcome = `${res.status} ${((await res.json()) as { error?: string }).error}`;
        } catch (error) {
          const cause = (error as { cause?: { code?: string } }).cause;
          outcome = String(cause?.code ?? cause ?? error);
        }
        outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      }
      report.uploads = { bytes: num("upload-bytes"), outcomes };
    }
    if (num("big-frames") > 0) {
      const frame = Buffer.alloc(num("frame-bytes"), 0x78);
      const senders = (await Promise.all(Array.from({ length: num("big-frames") }, () => storms.open("big")))).flatMap((r) => ("ws" in r ? [r.ws] : []));
      const rssBefore = sample();
      const peak = { launcher: 0, workerd: 0 };
      const done = Promise.all(senders.map((ws) => Promise.race([ws.closed, sleep(60_000).then(() => "timeout")])));
      for (const ws of senders) ws.send(frame);
      let settled = false;
      void done.then(() => (settled = true));
      while (!settled) {
        const s = sample();
        peak.launcher = Math.max(peak.launcher, s.launcher?.rssKb ?? 0);
        peak.workerd = Math.max(peak.workerd, s.workerd?.rssKb ?? 0);
        await sleep(20);
      }
      const closes: Record<string, number> = {};
      for (const code of await done) closes[code] = (closes[code] ?? 0) + 1;
      await sleep(2000);
      const rssAfter = sample();
      const mb = (kb: number): number => +(kb / 1024).toFixed(1);
      const growth = (from: ReturnType<typeof sample>, k: "launcher" | "workerd", to: number): number => mb(to - (from[k]?.rssKb ?? 0));
      report.bigFrames = {
        sockets: senders.length,
        upgradeVia: via,
        frameBytes: num("frame-bytes"),
        closes,
        peakRssGrowthMb: { launcher: growth(rssBefore, "launcher", peak.launcher), workerd: growth(rssBefore, "workerd", peak.workerd) },
        rssGrowthAfter2sMb: { launcher: growth(rssBefore, "launcher", rssAfter.launcher?.rssKb ?? 0), workerd: growth(rssBefore, "workerd", rssAfter.workerd?.rssKb ?? 0) },
        alive: server.alive(),
      };
      for (const ws of senders) ws.terminate();
    }
    await sleep(500);
    if (!server.alive()) {
      report.afterStorms = { alive: false };
      report.serverErrors = server.output().split("\n").filter((l) => /Fatal|Too many open files|exited/.test(l)).slice(0, 5);
      console.log(JSON.stringify(report, null, 2));
      return;
    }
    const late = await storms.openWs(`${storms.wsBase}/rooms/${room}/ws`);
    report.afterStorms = { alive: server.alive(), newSocket: "ws" in late ? "opened" : "status" in late ? late.status : late.error };
    if ("ws" in late) late.ws.terminate();
    const stop = args.text("stop");
    if (stop) {
      // Stopped as a terminal and npm stop it: the same signal twice, a moment apart.
      const signals = stop.split(",") as NodeJS.Signals[];
      const codes = Promise.all(hold.held.map((ws) => ws.closed));
      const started = Date.now();
      for (const [i, signal] of signals.entries()) {
        if (i > 0) await sleep(num("stop-gap-ms"));
        if (server.launcherPid !== undefined) process.kill(server.launcherPid, signal);
      }
      const closes: Record<string, number> = {};
      for (const code of await Promise.race([codes, sleep(20_000).then(() => ["timeout"])])) closes[code] = (closes[code] ?? 0) + 1;
      await server.exited();
      report.stop = { signals, gapMs: num("stop-gap-ms"), closes, exitedAfterMs: Date.now() - started, log: server.output().split("\n").filter((l) => /closing every socket|closed \d+ sockets|graceful close failed|stop waiting/.test(l)) };
    }
    for (const ws of hold.held) ws.terminate();
    report.serverErrors = server.output().split("\n").filter((l) => /Fatal|Too many open files|"event":"error"/.test(l)).slice(0, 5);
    console.log(JSON.stringify(report, null, 2));
  },
});
