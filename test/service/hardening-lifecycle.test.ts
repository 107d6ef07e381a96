import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import WebSocket from "ws";
import { CloseCode } from "../../protocol";
import { alive, freePort, privateDirOf } from "../helpers/server";
import { managedServers } from "../helpers/servers";
import { readUntil, sleep, until } from "../helpers/wait";

// Whatever stops the launcher stops workerd; a start that cannot have its port
// says so; a shutting-down server refuses new sockets instead of dropping them,
// and a signal that arrives twice (a terminal's Ctrl-C and npm's forward of it)
// still closes every socket with 1012.

const root = fileURLToPath(new URL("../../", import.meta.url));
const serve = managedServers();

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
}

function openSocket(url: string): Promise<{ ws: WebSocket; closed: Promise<number> }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const closed = new Promise<number>((settle) => {
      ws.on("close", (code) => settle(code));
      ws.once("open", () => {
        // The close frame is the answer; the TCP connection may linger after it.
        const receiver = (ws as unknown as { _receiver?: NodeJS.EventEmitter })._receiver;
        receiver?.on("conclude", (code: number) => settle(code));
      });
    });
    ws.once("open", () => resolve({ ws, closed }));
    ws.once("unexpected-response", (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    ws.once("error", reject);
  });
}

describe("workerd never outlives the launcher", () => {
  it("stops workerd, frees the port and removes the private directory when the launcher is killed with SIGKILL", async () => {
    const server = await serve();
    const workerd = server.workerdPid;
    const privateDir = privateDirOf(workerd);
    expect(privateDir && existsSync(privateDir)).toBeTruthy();
    process.kill(server.pid, "SIGKILL");
    await until(() => !alive(workerd), { timeoutMs: 6000, what: "workerd to exit" });
    expect(await portFree(server.port)).toBe(true);
    await until(() => !existsSync(privateDir as string), { timeoutMs: 3000, what: "the private directory to go" });
    // And the next start on the same port and data gets it.
    const again = await serve({ port: server.port, dataDir: server.dataDir });
    const res = await fetch(`${again.url}/healthz`);
    expect(res.status).toBe(200);
  }, 30_000);

  it("stops everything when `npm start` itself gets SIGTERM", async () => {
    const port = await freePort();
    const npm = spawn("npm", ["start", "--", "--no-build", "--no-dev-vars"], {
      cwd: root,
      env: { ...process.env, PORT: String(port), DATA_DIR: mkdtempSync(join(tmpdir(), "fanout-npm-")) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    npm.stdout.on("data", (d: Buffer) => (output += d.toString()));
    npm.stderr.on("data", (d: Buffer) => (output += d.toString()));
    await until(() => /workerd pid \d+/.test(output), { timeoutMs: 30_000, what: "workerd to start" });
    const workerd = Number(/workerd pid (\d+)/.exec(output)?.[1]);
    const socket = await openSocket(`ws://127.0.0.1:${port}/rooms/npm/ws`);
    npm.kill("SIGTERM");
    expect(await socket.closed).toBe(CloseCode.SERVICE_RESTART);
    await until(() => !alive(workerd), { timeoutMs: 8000, what: "workerd to exit" });
    await until(() => npm.exitCode !== null || npm.signalCode !== null, { timeoutMs: 5000, what: "npm to exit" });
    expect(await portFree(port)).toBe(true);
  }, 45_000);
});

describe("starting", () => {
  it("says the port is taken and exits non-zero, leaving the server on it alone", async () => {
    const server = await serve();
    const started = Date.now();
    const second = spawn(process.execPath, [join(root, "local-server/server.mjs"), "--no-build", "--no-dev-vars"], {
      env: { ...process.env, PORT: String(server.port), DATA_DIR: mkdtempSync(join(tmpdir(), "fanout-taken-")) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    second.stdout.on("data", (d: Buffer) => (output += d.toString()));
    second.stderr.on("data", (d: Buffer) => (output += d.toString()));
    const code = await new Promise<number | null>((resolve) => second.once("exit", resolve));
    expect(code).not.toBe(0);
    expect(output).toMatch(/127\.0\.0\.1:\d+ is already in use/);
    expect(output).not.toContain("listening on");
    // It failed before building or starting anything.
    expect(Date.now() - started).toBeLessThan(5000);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });
});

describe("shutting down", () => {
  it("refuses upgrades with 503 and Retry-After once it has closed its sockets, instead of accepting them", async () => {
    const server = await serve();
    const first = await openSocket(`${server.wsUrl}/rooms/drain/ws`);
    const stopped = server.stop("SIGTERM");
    expect(await first.closed).toBe(CloseCode.SERVICE_RESTART);
    // A client that reconnects at once is told to come back later.
    const answer = await new Promise<{ status: number; retryAfter: string | undefined; body: string }>((resolve, reject) => {
      const ws = new WebSocket(`${server.wsUrl}/rooms/drain/ws`);
      ws.once("open", () => reject(new Error("a shutting-down server accepted a socket")));
      ws.once("unexpected-response", (_req, res) => {
        let body = "";
        res.on("data", (chunk: Buffer) => (body += chunk.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers["retry-after"] as string | undefined, body }));
      });
      ws.once("error", reject);
    });
    expect(answer.status).toBe(503);
    expect(answer.retryAfter).toBeDefined();
    expect(JSON.parse(answer.body)).toMatchObject({ error: "over_capacity" });
    await stopped;
  });
});

describe("stopped by the same signal twice", () => {
  it("closes every socket with 1012 when SIGINT comes twice in quick succession", async () => {
    const server = await serve();
    const sockets = await Promise.all(Array.from({ length: 5 }, () => openSocket(`${server.wsUrl}/rooms/twice/ws`)));
    // What a terminal's Ctrl-C and npm's forward of it deliver to the launcher.
    process.kill(server.pid, "SIGINT");
    await sleep(5);
    process.kill(server.pid, "SIGINT");
    const codes = await Promise.all(sockets.map((s) => s.closed));
    expect(codes).toEqual(Array(5).fill(CloseCode.SERVICE_RESTART));
    await server.stop();
    expect(server.output()).not.toContain("graceful close failed");
  });

  it("closes every socket with 1012 when `npm start | tee` gets Ctrl-C as a process group", async () => {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), "fanout-tee-"));
    const log = join(dir, "log");
    // A pipeline in a process group of its own, as a terminal runs it: the group's SIGINT reaches npm, the launcher and tee.
    const pipeline = spawn("/bin/sh", ["-c", 'npm start -- --no-build --no-dev-vars | tee "$0"', log], {
      cwd: root,
      env: { ...process.env, PORT: String(port), DATA_DIR: join(dir, "data") },
      stdio: "ignore",
      detached: true,
    });
    const group = pipeline.pid as number;
    try {
      await until(() => existsSync(log) && /workerd pid \d+/.test(readFileSync(log, "utf8")), { timeoutMs: 30_000, what: "workerd to start" });
      const workerd = Number(/workerd pid (\d+)/.exec(readFileSync(log, "utf8"))?.[1]);
      const sockets = await Promise.all(Array.from({ length: 5 }, () => openSocket(`ws://127.0.0.1:${port}/rooms/tee/ws`)));
      process.kill(-group, "SIGINT");
      const codes = await Promise.all(sockets.map((s) => s.closed));
      expect(codes).toEqual(Array(5).fill(CloseCode.SERVICE_RESTART));
      await until(() => !alive(workerd), { timeoutMs: 8000, what: "workerd to exit" });
      // The launcher lets the port go as it exits, just after workerd.
      const free = await readUntil(() => portFree(port), (isFree) => isFree, { timeoutMs: 5000, everyMs: 100, what: "the port to be free" });
      expect(free).toBe(true);
    } finally {
      try {
        process.kill(-group, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
  }, 60_000);
});
