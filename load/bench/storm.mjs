#!/usr/bin/env node
// Measures the local server under descriptor pressure: starts it (optionally
// under a descriptor limit), holds a number of WebSockets, then throws a storm
// of idle TCP connections and a storm of upgrades at it, and checks that it is
// still running and serving the sockets it held. Also reports what each held
// socket costs (memory and descriptors of the launcher and of workerd), the
// handshake rate, with --publishes the CPU per delivery, and with --big-frames
// what oversized client frames cost before the room refuses them, and with
// --uploads whether oversize publish bodies get their 413 or a reset, and with
// --endless-uploads how much of a chunked body that never ends the server takes
// (written as fast as the connection takes it, whatever comes back) before its
// 413 or its close, and the launcher's and workerd's memory meanwhile.
//
// --upgrade-via chooses how the upgrade storm and the big-frame senders write
// their handshake: with the ws library (default), or by hand: `plain` (one
// write), `split` (the request head in two writes), `after-request` (on a
// keep-alive connection, after a GET /healthz answered on it).
// --half-open N opens N connections that send a request (`--half-open-send
// request`, with Connection: close) or one byte (`byte`) and then never close
// their side, and checks after --hold-ms that the server gave their slots back.
// --stop SIGINT,SIGINT stops the server at the end with these signals
// (--stop-gap-ms apart) and counts the close codes of the held sockets.
//
// Only 127.0.0.1; every phase is bounded in count and time. The clients run in
// this process, under its own descriptor limit (raise it, not the server's).
//
//   node load/bench/storm.mjs --ulimit 600 --sockets 200 --idle 1800 --upgrades 1800
//   node load/bench/storm.mjs --ulimit 1024 --sockets 200 --idle 3072 --upgrades 3072
//   node load/bench/storm.mjs --gate on --sockets 5000 --publishes 20
//   node load/bench/storm.mjs --sockets 10 --big-frames 10 --frame-bytes 31457280
//   node load/bench/storm.mjs --sockets 0 --uploads 20 --upload-bytes 4194304
//   node load/bench/storm.mjs --sockets 0 --endless-uploads 20
//   node load/bench/storm.mjs --ulimit 600 --sockets 0 --upgrades 600 --upgrade-via split
//   node load/bench/storm.mjs --sockets 10 --big-frames 4 --upgrade-via after-request
//   node load/bench/storm.mjs --ulimit 600 --sockets 20 --half-open 300
//   node load/bench/storm.mjs --sockets 200 --stop SIGINT,SIGINT
// --launcher PATH runs another server.mjs (an earlier version, to compare).
//
// Prints one JSON object. Build first (npm run build); the server starts with --no-build.

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import { endlessUpload } from "./endless-upload.mjs";

const { values } = parseArgs({
  options: {
    ulimit: { type: "string" },
    gate: { type: "string", default: "auto" },
    port: { type: "string", default: "18731" },
    sockets: { type: "string", default: "200" },
    idle: { type: "string", default: "0" },
    upgrades: { type: "string", default: "0" },
    "hold-ms": { type: "string", default: "6000" },
    publishes: { type: "string", default: "0" },
    "big-frames": { type: "string", default: "0" },
    uploads: { type: "string", default: "0" },
    "upload-bytes": { type: "string", default: "4194304" },
    "endless-uploads": { type: "string", default: "0" },
    launcher: { type: "string" },
    "frame-bytes": { type: "string", default: "31457280" },
    "upgrade-via": { type: "string", default: "ws" },
    "half-open": { type: "string", default: "0" },
    "half-open-send": { type: "string", default: "request" },
    stop: { type: "string" },
    "stop-gap-ms": { type: "string", default: "30" },
  },
});
const num = (name) => {
  const v = Number(values[name]);
  if (!Number.isInteger(v) || v < 0) throw new Error(`--${name} must be a whole number`);
  return v;
};
const port = num("port");
const base = `http://127.0.0.1:${port}`;
const wsBase = `ws://127.0.0.1:${port}`;
const holdMs = num("hold-ms");
const upgradeVia = values["upgrade-via"];
if (!["ws", "plain", "split", "after-request"].includes(upgradeVia)) throw new Error("--upgrade-via must be ws, plain, split or after-request");
if (!["request", "byte"].includes(values["half-open-send"])) throw new Error("--half-open-send must be request or byte");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// --- /proc ------------------------------------------------------------------

function proc(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return {
      rssKb: Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0),
      cpuMs: (Number(f[11]) + Number(f[12])) * 10,
      fds: readdirSync(`/proc/${pid}/fd`).length,
    };
  } catch {
    return null;
  }
}

// --- the server ---------------------------------------------------------------

async function startServer() {
  const script = values.launcher ?? fileURLToPath(new URL("../../local-server/server.mjs", import.meta.url));
  const dataDir = mkdtempSync(join(tmpdir(), "fanout-storm-"));
  // Sets soft and hard: Node raises its soft limit to the hard one anyway. Raising it takes root.
  const limits = values.ulimit ? `ulimit -n ${num("ulimit")}` : "true";
  const child = spawn("/bin/sh", ["-c", `${limits} && exec "$0" "$@"`, process.execPath, script, "--no-build", "--no-dev-vars", "--gate", values.gate], {
    env: { ...process.env, PORT: String(port), DATA_DIR: dataDir },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  const deadline = Date.now() + 60_000;
  while (!/workerd pid (\d+)/.test(output)) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`server did not start:\n${output}`);
    await sleep(50);
  }
  const workerdPid = Number(/workerd pid (\d+)/.exec(output)?.[1]);
  return {
    launcherPid: child.pid,
    workerdPid,
    output: () => output,
    alive: () => child.exitCode === null && proc(workerdPid) !== null,
    exited: () => new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once("exit", r))),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once("exit", r)));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

function sample(server) {
  return { launcher: proc(server.launcherPid), workerd: proc(server.workerdPid) };
}

// --- clients ------------------------------------------------------------------


/** Opens one WebSocket; resolves { ws } or { status } (refused) or { error }. Refused connections are left open. */
function openSocket(url, onMessage) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: 15_000 });
    ws.on("message", (data) => onMessage?.(data.toString()));
    ws.once("open", () => resolve({ ws }));
    ws.once("unexpected-response", (req, res) => {
      res.resume();
      resolve({ status: res.statusCode, socket: req.socket });
    });
    ws.once("error", (error) => resolve({ error: error.code ?? error.message }));
  });
}

/** A WebSocket message header from a client: masked with a zero key, so the payload goes as it is. */
function clientFrameHeader(length) {
  const extra = length < 126 ? 0 : length < 65_536 ? 2 : 8;
  const header = Buffer.alloc(2 + extra + 4);
  header[0] = 0x81;
  header[1] = 0x80 | (extra === 0 ? length : extra === 2 ? 126 : 127);
  if (extra === 2) header.writeUInt16BE(length, 2);
  if (extra === 8) header.writeBigUInt64BE(BigInt(length), 2);
  return header;
}

/**
 * Opens one WebSocket by hand, writing its handshake as `via` says (plain,
 * split, after-request); resolves like openSocket, with { ws: { send, closed,
 * terminate } } for an open one. `closed` settles with the code of the
 * server's close frame, or 1006 when the connection ends without one; text
 * messages go to `onMessage`.
 */
function rawSocket(path, via, onMessage) {
  return new Promise((resolve) => {
    const socket = connect({ port, host: "127.0.0.1", noDelay: true });
    const key = randomBytes(16).toString("base64");
    const head = `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`;
    let buffered = Buffer.alloc(0);
    let phase = via === "after-request" ? "first-response" : "handshake";
    let settled = false;
    const settle = (value) => {
      if (!settled) {
        settled = true;
        resolve(value);
      }
    };
    let closedWith;
    const closed = new Promise((r) => (closedWith = r));
    const sendHandshake = () => {
      if (via !== "split") return socket.write(head);
      // The request line first, the headers 50 ms later: two reads on the server's side.
      const cut = head.indexOf("\r\n") + 2;
      socket.write(head.slice(0, cut));
      setTimeout(() => socket.writable && socket.write(head.slice(cut)), 50);
    };
    /** The complete response at the start of `buffered` (status and bytes), or null while it is incomplete. */
    const response = () => {
      const end = buffered.indexOf("\r\n\r\n");
      if (end === -1) return null;
      const text = buffered.subarray(0, end).toString("latin1");
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0);
      const body = status === 101 ? 0 : Number(/\r\ncontent-length:[ \t]*(\d+)/i.exec(text)?.[1] ?? 0);
      return buffered.length < end + 4 + body ? null : { status, bytes: end + 4 + body };
    };
    socket.on("connect", () => {
      if (via === "after-request") socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      else sendHandshake();
    });
    socket.on("data", (chunk) => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      for (;;) {
        if (phase === "first-response" || phase === "handshake") {
          const answer = response();
          if (!answer) return;
          buffered = buffered.subarray(answer.bytes);
          if (phase === "first-response") {
            if (answer.status !== 200) {
              // Refused before the upgrade was even sent (the gate at its connection cap).
              phase = "refused";
              settle({ status: answer.status, socket });
              return;
            }
            phase = "handshake";
            sendHandshake();
            continue;
          }
          if (answer.status !== 101) {
            phase = "refused";
            settle({ status: answer.status, socket });
            return;
          }
          phase = "open";
          settle({
            ws: {
              send: (payload) => {
                socket.write(clientFrameHeader(payload.length));
                socket.write(payload);
              },
              closed,
              terminate: () => socket.destroy(),
            },
          });
        } else if (phase === "open") {
          // Server frames are not masked.
          if (buffered.length < 2) return;
          const short = buffered[1] & 0x7f;
          const headerBytes = 2 + (short === 126 ? 2 : short === 127 ? 8 : 0);
          if (buffered.length < headerBytes) return;
          const length = short === 126 ? buffered.readUInt16BE(2) : short === 127 ? Number(buffered.readBigUInt64BE(2)) : short;
          if (buffered.length < headerBytes + length) return;
          const opcode = buffered[0] & 0x0f;
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
    socket.on("error", (error) => settle({ error: error.code ?? error.message }));
    socket.on("close", () => {
      settle({ error: "closed before an answer" });
      closedWith(1006);
    });
  });
}

/** A socket that sends big messages: through the ws library, or by hand as --upgrade-via says. */
async function openSender(path) {
  if (upgradeVia !== "ws") return rawSocket(path, upgradeVia);
  const opened = await openSocket(`${wsBase}${path}`);
  if (!opened.ws) return opened;
  const { ws } = opened;
  const closed = new Promise((resolve) => {
    // The close frame is the answer; the TCP connection may linger after it.
    ws.once("close", (code) => resolve(code));
    ws.on("open", () => undefined);
    ws._receiver?.on("conclude", (code) => resolve(code));
  });
  return { ws: { send: (payload) => ws.send(textOf(payload)), closed, terminate: () => ws.terminate() } };
}
/** One string per payload, however many sockets send it. */
let lastText = { payload: Buffer.alloc(0), text: "" };
function textOf(payload) {
  if (lastText.payload !== payload) lastText = { payload, text: payload.toString("latin1") };
  return lastText.text;
}

async function holdSockets(count, room) {
  const held = [];
  const received = new Map();
  const started = Date.now();
  const refused = {};
  for (let i = 0; i < count; i += 100) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(100, count - i) }, () => {
        const onMessage = (text) => {
          if (text.includes('"type":"message"')) received.set(text, (received.get(text) ?? 0) + 1);
        };
        return upgradeVia === "ws" ? openSocket(`${wsBase}/rooms/${room}/ws`, onMessage) : rawSocket(`/rooms/${room}/ws`, upgradeVia, onMessage);
      }),
    );
    for (const r of batch) {
      if (r.ws) held.push(r.ws);
      else refused[r.status ?? r.error] = (refused[r.status ?? r.error] ?? 0) + 1;
    }
  }
  return { held, refused, ms: Date.now() - started, received };
}

async function publish(room, data) {
  const res = await fetch(`${base}/rooms/${room}/publish`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(data) });
  return { status: res.status, body: await res.json() };
}

/** Publishes and waits until every held socket has the message. */
async function servedCheck(room, heldCount, received, tag) {
  let answer;
  try {
    answer = await publish(room, { check: tag });
  } catch (error) {
    return { error: String(error.cause?.code ?? error) };
  }
  const deadline = Date.now() + 10_000;
  const delivered = () => [...received].filter(([text]) => text.includes(`"check":"${tag}"`)).reduce((a, [, n]) => a + n, 0);
  while (delivered() < heldCount && Date.now() < deadline) await sleep(50);
  return { status: answer.status, recipients: answer.body.recipients, delivered: delivered() };
}

async function idleStorm(count) {
  const sockets = [];
  const result = { connected: 0, errors: 0, closedByServer: 0 };
  for (let i = 0; i < count; i++) {
    const s = connect(port, "127.0.0.1");
    s.on("connect", () => (result.connected += 1));
    s.on("error", () => (result.errors += 1));
    s.on("close", () => {
      if (!s.destroyedByUs) result.closedByServer += 1;
    });
    sockets.push(s);
  }
  return {
    result,
    end: () => {
      for (const s of sockets) {
        s.destroyedByUs = true;
        s.destroy();
      }
    },
  };
}

async function upgradeStorm(count, room) {
  const open = () => (upgradeVia === "ws" ? openSocket(`${wsBase}/rooms/${room}/ws`) : rawSocket(`/rooms/${room}/ws`, upgradeVia));
  const outcomes = await Promise.all(Array.from({ length: count }, open));
  const result = { opened: 0, refused: {}, errors: {} };
  for (const o of outcomes) {
    if (o.ws) result.opened += 1;
    else if (o.status) result.refused[o.status] = (result.refused[o.status] ?? 0) + 1;
    else result.errors[o.error] = (result.errors[o.error] ?? 0) + 1;
  }
  return {
    result,
    end: () => {
      for (const o of outcomes) (o.ws ? o.ws.terminate() : o.socket?.destroy());
    },
  };
}

/**
 * Connections that send a request (or one byte) and never close their side,
 * ignoring the server's FIN: whatever the server gives back by closing them
 * counts as `closedByServer`.
 */
function halfOpenStorm(count, send) {
  const sockets = [];
  const result = { connected: 0, finReceived: 0, closedByServer: 0, errors: 0 };
  const request = `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`;
  for (let i = 0; i < count; i++) {
    const s = connect({ port, host: "127.0.0.1", allowHalfOpen: true });
    s.on("connect", () => {
      result.connected += 1;
      s.write(send === "byte" ? "G" : request);
    });
    s.on("data", () => undefined);
    s.on("end", () => (result.finReceived += 1));
    s.on("error", () => (result.errors += 1));
    s.on("close", () => {
      if (!s.destroyedByUs) result.closedByServer += 1;
    });
    sockets.push(s);
  }
  return {
    result,
    end: () => {
      for (const s of sockets) {
        s.destroyedByUs = true;
        s.destroy();
      }
    },
  };
}

/** The gate's last report line (counts since the one before, and its relayed and pending connections). */
function lastGateReport(server) {
  const lines = server.output().split("\n").filter((l) => l.startsWith('{"event":"gate"'));
  return lines.length ? JSON.parse(lines[lines.length - 1]) : null;
}

/** Highest descriptor counts seen while `during` runs. */
async function peaks(server, during) {
  const peak = { launcher: 0, workerd: 0 };
  let running = true;
  const loop = (async () => {
    while (running) {
      const s = sample(server);
      peak.launcher = Math.max(peak.launcher, s.launcher?.fds ?? 0);
      peak.workerd = Math.max(peak.workerd, s.workerd?.fds ?? 0);
      await sleep(20);
    }
  })();
  const value = await during();
  running = false;
  await loop;
  return { value, peakFds: peak };
}

// --- run ----------------------------------------------------------------------

const server = await startServer();
const report = { args: values, banner: server.output().split("\n").filter((l) => l.startsWith("  ")).map((l) => l.trim()) };
try {
  await sleep(1000);
  const room = "storm";
  const before = sample(server);
  const hold = await holdSockets(num("sockets"), room);
  await sleep(2000);
  const after = sample(server);
  const n = hold.held.length;
  const per = (k) => ({
    rssKb: n ? +((after[k].rssKb - before[k].rssKb) / n).toFixed(1) : null,
    fds: n ? +((after[k].fds - before[k].fds) / n).toFixed(2) : null,
    cpuMsPerHandshake: n ? +((after[k].cpuMs - before[k].cpuMs) / n).toFixed(3) : null,
  });
  report.held = { sockets: n, upgradeVia, refused: hold.refused, handshakesPerSecond: Math.round((n * 1000) / hold.ms), perSocket: { launcher: per("launcher"), workerd: per("workerd") } };
  // Publishing must still work with every socket the server allows held.
  if (n > 0) report.held.served = await servedCheck(room, n, hold.received, "held");

  if (num("publishes") > 0) {
    const s0 = sample(server);
    for (let i = 0; i < num("publishes"); i++) await servedCheck(room, n, hold.received, `p${i}`);
    const s1 = sample(server);
    const deliveries = num("publishes") * n;
    const us = (k) => +(((s1[k].cpuMs - s0[k].cpuMs) * 1000) / deliveries).toFixed(2);
    report.fanOut = { deliveries, cpuUsPerDelivery: { launcher: us("launcher"), workerd: us("workerd") } };
  }

  if (num("idle") > 0) {
    const { value: storm, peakFds } = await peaks(server, async () => {
      const s = await idleStorm(num("idle"));
      await sleep(holdMs);
      return s;
    });
    const served = await servedCheck(room, n, hold.received, "after-idle");
    storm.end();
    report.idleStorm = { connections: num("idle"), ...storm.result, peakFds, alive: server.alive(), served };
  }

  if (num("upgrades") > 0) {
    const { value: storm, peakFds } = await peaks(server, async () => {
      const s = await upgradeStorm(num("upgrades"), room);
      await sleep(holdMs);
      return s;
    });
    const served = await servedCheck(room, n, hold.received, "after-upgrades");
    storm.end();
    report.upgradeStorm = { upgrades: num("upgrades"), upgradeVia, ...storm.result, peakFds, alive: server.alive(), served };
  }

  if (num("half-open") > 0) {
    const { value: storm, peakFds } = await peaks(server, async () => {
      const s = halfOpenStorm(num("half-open"), values["half-open-send"]);
      await sleep(holdMs);
      return s;
    });
    const during = sample(server);
    const late = await openSocket(`${wsBase}/rooms/${room}/ws`);
    const served = await servedCheck(room, n, hold.received, "after-half-open");
    report.halfOpen = {
      connections: num("half-open"),
      send: values["half-open-send"],
      afterMs: holdMs,
      ...storm.result,
      peakFds,
      fdsAfter: { launcher: during.launcher?.fds, workerd: during.workerd?.fds },
      newSocket: late.ws ? "opened" : (late.status ?? late.error),
      served,
      gate: lastGateReport(server),
      alive: server.alive(),
    };
    late.ws?.terminate();
    late.socket?.destroy();
    storm.end();
  }

  if (num("uploads") > 0) {
    const body = Buffer.alloc(num("upload-bytes"), 0x61);
    const outcomes = {};
    for (let i = 0; i < num("uploads"); i++) {
      let outcome;
      try {
        const res = await fetch(`${base}/rooms/upload/publish`, { method: "POST", headers: { "content-type": "text/plain" }, body });
        const answer = await res.json();
        outcome = `${res.status} ${answer.error}`;
      } catch (error) {
        outcome = String(error.cause?.code ?? error.cause ?? error);
      }
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    }
    report.uploads = { bytes: num("upload-bytes"), outcomes };
  }

  if (num("endless-uploads") > 0) {
    const before = sample(server);
    let peak = { launcher: 0, workerd: 0 };
    const watch = setInterval(() => {
      const now = sample(server);
      peak = { launcher: Math.max(peak.launcher, now.launcher?.rssKb ?? 0), workerd: Math.max(peak.workerd, now.workerd?.rssKb ?? 0) };
    }, 50);
    const runs = [];
    for (let i = 0; i < num("endless-uploads"); i++) runs.push(await endlessUpload({ port }));
    clearInterval(watch);
    const mb = (bytes) => Math.round(bytes / 1e5) / 10;
    const taken = runs.map((r) => r.taken).sort((a, b) => a - b);
    report.endlessUploads = {
      runs: runs.length,
      endings: runs.reduce((all, r) => ({ ...all, [`${r.status ?? "no answer"}, ${r.how}`]: (all[`${r.status ?? "no answer"}, ${r.how}`] ?? 0) + 1 }), {}),
      takenMb: { min: mb(taken[0]), median: mb(taken[taken.length >> 1]), max: mb(taken[taken.length - 1]) },
      peakRssMbAbove: { launcher: Math.round((peak.launcher - (before.launcher?.rssKb ?? 0)) / 1024), workerd: Math.round((peak.workerd - (before.workerd?.rssKb ?? 0)) / 1024) },
    };
  }

  if (num("big-frames") > 0) {
    const frame = Buffer.alloc(num("frame-bytes"), 0x78);
    const senders = (await Promise.all(Array.from({ length: num("big-frames") }, () => openSender("/rooms/big/ws")))).filter((r) => r.ws);
    const rssBefore = sample(server);
    let peak = { launcher: 0, workerd: 0 };
    const closes = {};
    const done = Promise.all(senders.map(({ ws }) => Promise.race([ws.closed, sleep(60_000).then(() => "timeout")])));
    for (const { ws } of senders) ws.send(frame);
    let settled = false;
    void done.then(() => (settled = true));
    while (!settled) {
      const s = sample(server);
      peak = { launcher: Math.max(peak.launcher, s.launcher?.rssKb ?? 0), workerd: Math.max(peak.workerd, s.workerd?.rssKb ?? 0) };
      await sleep(20);
    }
    for (const code of await done) closes[code] = (closes[code] ?? 0) + 1;
    await sleep(2000);
    const rssAfter = sample(server);
    const mb = (kb) => +(kb / 1024).toFixed(1);
    report.bigFrames = {
      sockets: senders.length,
      upgradeVia,
      frameBytes: num("frame-bytes"),
      closes,
      peakRssGrowthMb: { launcher: mb(peak.launcher - rssBefore.launcher.rssKb), workerd: mb(peak.workerd - rssBefore.workerd.rssKb) },
      rssGrowthAfter2sMb: { launcher: mb(rssAfter.launcher.rssKb - rssBefore.launcher.rssKb), workerd: mb(rssAfter.workerd.rssKb - rssBefore.workerd.rssKb) },
      alive: server.alive(),
    };
    for (const { ws } of senders) ws.terminate();
  }

  await sleep(500);
  if (!server.alive()) {
    report.afterStorms = { alive: false };
    report.serverErrors = server.output().split("\n").filter((l) => /Fatal|Too many open files|exited/.test(l)).slice(0, 5);
    throw new Error("stopped");
  }
  const late = await openSocket(`${wsBase}/rooms/${room}/ws`);
  report.afterStorms = { alive: server.alive(), newSocket: late.ws ? "opened" : (late.status ?? late.error) };
  late.ws?.terminate();
  if (values.stop) {
    // Stopped as a terminal and npm stop it: the same signal twice, a moment apart.
    const signals = values.stop.split(",");
    const codeOf = (ws) => ws.closed ?? new Promise((resolve) => (ws.readyState === WebSocket.CLOSED ? resolve("closed before") : ws.once("close", resolve)));
    const codes = Promise.all(hold.held.map(codeOf));
    const started = Date.now();
    for (const [i, signal] of signals.entries()) {
      if (i > 0) await sleep(num("stop-gap-ms"));
      process.kill(server.launcherPid, signal);
    }
    const closes = {};
    for (const code of await Promise.race([codes, sleep(20_000).then(() => ["timeout"])])) closes[code] = (closes[code] ?? 0) + 1;
    await server.exited();
    report.stop = {
      signals,
      gapMs: num("stop-gap-ms"),
      closes,
      exitedAfterMs: Date.now() - started,
      log: server.output().split("\n").filter((l) => /closing every socket|closed \d+ sockets|graceful close failed|stop waiting/.test(l)),
    };
  }
  for (const ws of hold.held) ws.terminate();
  const errors = server.output().split("\n").filter((l) => /Fatal|Too many open files|"event":"error"/.test(l));
  report.serverErrors = errors.slice(0, 5);
} catch (error) {
  if (String(error) !== "Error: stopped") throw error;
} finally {
  await server.stop();
}
console.log(JSON.stringify(report, null, 2));
process.exit(0);
