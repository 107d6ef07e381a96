import { readdirSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { CloseCode } from "../../protocol";
import { startServer, type LocalServer } from "../helpers/server";
import { TestSocket } from "../helpers/socket";
import { sleep, until } from "../helpers/wait";

// The accept gate judges every request on a connection by its complete head:
// an upgrade is guarded and counted as a socket however its head arrives and
// whichever request of the connection it is; a head it cannot read as workerd
// would is refused, never forwarded; and a connection is given back when
// either side is done, even if the other never closes its half. Raw sockets on
// 127.0.0.1, bounded in count and time.

let gated: LocalServer;
const servers: LocalServer[] = [];

beforeAll(async () => {
  gated = await startServer({ gate: "on" });
});

afterAll(async () => {
  await gated?.stop();
});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop("SIGKILL")));
});

async function serve(...args: Parameters<typeof startServer>): Promise<LocalServer> {
  const server = await startServer(...args);
  servers.push(server);
  return server;
}

const descriptors = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;
const MAX_FRAME = 65_536;

/** A TCP connection that records what the server sends and whether it ended or closed the connection. */
interface Raw {
  socket: Socket;
  text(): string;
  bytes(): Buffer;
  ended: boolean;
  closed: boolean;
}

function rawConnect(port: number): Promise<Raw> {
  return new Promise((resolve, reject) => {
    // allowHalfOpen: this side never closes unless the test says so.
    const socket = connect({ port, host: "127.0.0.1", allowHalfOpen: true, noDelay: true });
    const chunks: Buffer[] = [];
    const raw: Raw = {
      socket,
      text: () => Buffer.concat(chunks).toString("latin1"),
      bytes: () => Buffer.concat(chunks),
      ended: false,
      closed: false,
    };
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("end", () => (raw.ended = true));
    socket.on("close", () => (raw.closed = true));
    socket.on("error", () => undefined);
    socket.once("connect", () => resolve(raw));
    socket.once("error", reject);
  });
}

const upgradeHead = (room: string) =>
  `GET /rooms/${room}/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
const healthz = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
const SWITCHED = "HTTP/1.1 101 Switching Protocols";

/** The header of a masked client text frame (zero key: the payload goes as it is) announcing `length` bytes. */
function frameHeader(length: number): Buffer {
  const header = Buffer.alloc(14);
  header[0] = 0x81;
  header[1] = 0x80 | 127;
  header.writeBigUInt64BE(BigInt(length), 2);
  return header;
}

/** The code of the close frame among the server's frames after the 101, or null. */
function closeCode(raw: Raw): number | null {
  const bytes = raw.bytes();
  const switched = bytes.indexOf(SWITCHED, 0, "latin1");
  if (switched === -1) return null;
  let i = bytes.indexOf("\r\n\r\n", switched, "latin1") + 4;
  while (i + 2 <= bytes.length) {
    const short = (bytes[i + 1] ?? 0) & 0x7f;
    const headerBytes = 2 + (short === 126 ? 2 : short === 127 ? 8 : 0);
    if (i + headerBytes > bytes.length) return null;
    const length = short === 126 ? bytes.readUInt16BE(i + 2) : short === 127 ? Number(bytes.readBigUInt64BE(i + 2)) : short;
    if (((bytes[i] ?? 0) & 0x0f) === 8) return i + headerBytes + 2 <= bytes.length ? bytes.readUInt16BE(i + headerBytes) : null;
    i += headerBytes + length;
  }
  return null;
}

/**
 * Announces an 8 MiB message and sends a little over the limit of it: only a
 * guard that reads frame headers can refuse it now (workerd would wait for the
 * rest before the room could).
 */
async function expectRefusedAtHeader(raw: Raw): Promise<void> {
  await until(() => raw.text().includes(SWITCHED), { timeoutMs: 10_000, what: "the 101" });
  raw.socket.write(frameHeader(8 * 1024 * 1024));
  raw.socket.write(Buffer.alloc(MAX_FRAME + 1, 0x78));
  await until(() => closeCode(raw) !== null, { timeoutMs: 5000, what: "a close frame" });
  expect(closeCode(raw)).toBe(CloseCode.MESSAGE_TOO_BIG);
  raw.socket.destroy();
}

describe("an upgrade is judged by its own complete head", () => {
  it("whose head arrives in two writes: an oversized message is refused with 1009 at its header", async () => {
    const raw = await rawConnect(gated.port);
    const head = upgradeHead("split");
    raw.socket.write(head.slice(0, 20));
    await sleep(100);
    raw.socket.write(head.slice(20));
    await expectRefusedAtHeader(raw);
  });

  it("sent after a keep-alive request on the same connection", async () => {
    const raw = await rawConnect(gated.port);
    raw.socket.write(healthz);
    await until(() => raw.text().includes('{"ok":true}'), { timeoutMs: 5000, what: "the health answer" });
    raw.socket.write(upgradeHead("after-request"));
    await expectRefusedAtHeader(raw);
  });

  it("pipelined behind other requests in one write", async () => {
    const raw = await rawConnect(gated.port);
    raw.socket.write(healthz + healthz + upgradeHead("pipelined"));
    await expectRefusedAtHeader(raw);
    expect(raw.text().split('{"ok":true}').length - 1).toBe(2);
  });

  it("after an upgrade that was refused, on a connection that stayed HTTP", async () => {
    const raw = await rawConnect(gated.port);
    // Not a room name: answered 400, and the connection carries on as HTTP.
    raw.socket.write(upgradeHead("-bad"));
    await until(() => raw.text().includes('"error":"bad_room"'), { timeoutMs: 5000, what: "the bad_room refusal" });
    raw.socket.write(healthz);
    await until(() => raw.text().includes('{"ok":true}'), { timeoutMs: 5000, what: "the health answer" });
    raw.socket.write(upgradeHead("after-refusal"));
    await expectRefusedAtHeader(raw);
  });
});

describe("heads the gate cannot read as workerd would", () => {
  const cases: [string, string, number][] = [
    ["lines ended by a bare LF", "GET /healthz HTTP/1.1\nHost: x\n\n\r\n\r\n", 400],
    ["a folded header line", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", 400],
    ["a space before a header's colon", "GET /healthz HTTP/1.1\r\nHost: x\r\nUpgrade : websocket\r\n\r\n", 400],
    ["Content-Length beside Transfer-Encoding", "POST /rooms/a/publish HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400],
    ["two Content-Lengths", "POST /rooms/a/publish HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400],
    ["a transfer coding other than chunked", "POST /rooms/a/publish HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501],
    ["a head over 32 KiB", `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"b".repeat(33 * 1024)}\r\n\r\n`, 431],
  ];
  for (const [what, request, status] of cases) {
    it(`${what}: answered ${status} with a JSON error, never forwarded`, async () => {
      const raw = await rawConnect(gated.port);
      raw.socket.write(request);
      await until(() => raw.ended, { timeoutMs: 5000, what: "the server's end of the connection" });
      const text = raw.text();
      expect(text.startsWith(`HTTP/1.1 ${status} `)).toBe(true);
      expect(JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4))).toMatchObject({ error: expect.any(String), message: expect.any(String) });
      expect(text).not.toContain('{"ok":true}');
      raw.socket.destroy();
    });
  }

  it("a request hidden where a chunked body's end should be never reaches workerd", async () => {
    const raw = await rawConnect(gated.port);
    // workerd reads whatever follows a last chunk as the next request; the gate forwards the body up to there and no further.
    raw.socket.write("POST /rooms/chunked/publish HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n" + upgradeHead("hidden"));
    await until(() => raw.ended, { timeoutMs: 5000, what: "the server's end of the connection" });
    expect(raw.text()).toMatch(/^HTTP\/1\.1 200 /);
    expect(raw.text()).not.toContain(SWITCHED);
    raw.socket.destroy();
  });

  it("a head that has not arrived in 5 s is answered 408", async () => {
    const raw = await rawConnect(gated.port);
    raw.socket.write("GET /healthz HTTP/1.1\r\nHost: x\r\n");
    await until(() => raw.ended, { timeoutMs: 8000, what: "the server's end of the connection" });
    expect(raw.text()).toMatch(/^HTTP\/1\.1 408 /);
    raw.socket.destroy();
  });
});

/** Opens a WebSocket through a handshake written by hand in one of three ways; resolves with the raw connection or the refusal's status. */
async function handshake(port: number, room: string, style: number): Promise<{ raw: Raw; status: number }> {
  const raw = await rawConnect(port);
  if (style === 0) {
    const head = upgradeHead(room);
    raw.socket.write(head.slice(0, 20));
    await sleep(30);
    raw.socket.write(head.slice(20));
  } else if (style === 1) {
    raw.socket.write(healthz);
    await until(() => raw.text().includes('{"ok":true}') || raw.ended, { timeoutMs: 5000, what: "the health answer" });
    raw.socket.write(upgradeHead(room));
  } else {
    raw.socket.write(healthz + upgradeHead(room));
  }
  await until(() => /HTTP\/1\.1 (?!200)\d{3}/.test(raw.text()) || raw.closed, { timeoutMs: 10_000, what: "the upgrade's answer" });
  const status = Number(/HTTP\/1\.1 ((?!200)\d{3})/.exec(raw.text())?.[1] ?? 0);
  return { raw, status };
}

async function publish(server: LocalServer, room: string): Promise<number> {
  const res = await fetch(`${server.url}/rooms/${room}/publish`, { method: "POST", body: "full house" });
  await res.arrayBuffer();
  return res.status;
}

describe("the socket cap under a 600-descriptor limit", () => {
  it("counts every upgrade, however its head arrives, and publishing still works with a full house", async () => {
    const server = await serve({ fdLimit: 600 });
    // 261 connections, 245 of them sockets (local-server/limits.mjs).
    expect(server.output()).toContain("at most 261 connections (245 of them sockets)");
    const outcomes: { raw: Raw; status: number }[] = [];
    for (let i = 0; i < 280; i += 20) {
      outcomes.push(...(await Promise.all(Array.from({ length: 20 }, (_, j) => handshake(server.port, "cap", (i + j) % 3)))));
    }
    const opened = outcomes.filter((o) => o.status === 101).length;
    const refused = outcomes.filter((o) => o.status === 503);
    expect(opened).toBe(245);
    expect(refused.length).toBe(280 - 245);
    for (const o of refused) expect(o.raw.text()).toContain('"error":"over_capacity"');
    expect(await publish(server, "cap")).toBe(200);
    for (const o of outcomes) o.raw.socket.destroy();
  }, 90_000);
});

describe("peers that never close their half", () => {
  it("are let go once workerd is done with them, so new sockets and publishes get in", async () => {
    const server = await serve({ fdLimit: 600 });
    const baseline = descriptors(server.pid);
    const peers: Raw[] = [];
    for (let i = 0; i < 300; i += 50) {
      peers.push(...(await Promise.all(Array.from({ length: 50 }, () => rawConnect(server.port)))));
    }
    // Half send a request that workerd answers and closes; half send one byte and nothing more.
    peers.forEach((p, i) => p.socket.write(i % 2 === 0 ? "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" : "G"));
    // Each gets its answer (the byte senders a 408 after 5 s) and the server's end, and none closes its side.
    await until(() => peers.every((p) => p.ended), { timeoutMs: 10_000, what: "every peer's end" });
    peers.forEach((p, i) => expect(p.text()).toMatch(i % 2 === 0 ? /^HTTP\/1\.1 200 / : /^HTTP\/1\.1 408 /));
    // The server has let go of all of them all the same.
    await until(() => descriptors(server.pid) <= baseline + 5, { timeoutMs: 5000, what: "the descriptors given back" });
    const ws = new WebSocket(`${server.wsUrl}/rooms/after/ws`);
    const opened = await new Promise<boolean>((resolve) => {
      ws.once("open", () => resolve(true));
      ws.once("error", () => resolve(false));
      ws.once("unexpected-response", () => resolve(false));
    });
    expect(opened).toBe(true);
    expect(await publish(server, "after")).toBe(200);
    ws.terminate();
    for (const p of peers) p.socket.destroy();
  }, 60_000);
});

describe("the gate's own counts", () => {
  /** The levels of every gate report line printed after `from` characters of output. */
  const levelsAfter = (server: LocalServer, from: number) =>
    server
      .output()
      .slice(from)
      .split("\n")
      .filter((line) => line.startsWith('{"event":"gate"'))
      .map((line) => JSON.parse(line) as { relayed: number; sockets: number; pending: number });

  it("are back to zero once slow readers closed with 4008 are let go: a kick lets nobody past a limit", async () => {
    // A kicked reader's client ends its side; workerd keeps its own open for
    // seconds, so the gate lets the connection go after its linger (10 s).
    const server = await serve({ gate: "on", vars: { WINDOW_BYTES: "4096", SLOW_GRACE_MS: "1000" } });
    const room = "kicked";
    const readers = await Promise.all([1, 2, 3].map(() => TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`, { autoAck: false })));
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${server.url}/rooms/${room}/publish`, { method: "POST", body: "x".repeat(1000) });
      await res.arrayBuffer();
    }
    for (const reader of readers) expect((await reader.closed).code).toBe(CloseCode.SLOW_CONSUMER);
    const from = server.output().length;
    const settled = () => levelsAfter(server, from).some((l) => l.relayed === 0 && l.sockets === 0 && l.pending === 0);
    await until(settled, { timeoutMs: 25_000, what: "the gate back to zero" });
    for (const line of levelsAfter(server, from)) {
      expect(Math.min(line.relayed, line.sockets, line.pending)).toBeGreaterThanOrEqual(0);
    }
  }, 60_000);
});
