import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { findListeningPid } from "./proc";

/** Where the load tool's files live: load/dist/<entry>.js → repository root two levels up. */
export const DIST_DIR = dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = join(DIST_DIR, "..", "..");

export interface TargetAddress {
  httpOrigin: string;
  wsOrigin: string;
  host: string;
  port: number;
  loopback: boolean;
}

/** True for names and addresses that never leave the machine. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/**
 * Normalises a target URL (http, https, ws or wss). Anything that is not
 * loopback is refused unless `allowRemote` is set: a load run must never hit
 * someone else's machine by accident.
 */
export function parseTargetUrl(raw: string, allowRemote: boolean): TargetAddress {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`not a URL: ${raw}`);
  }
  const secure = url.protocol === "https:" || url.protocol === "wss:";
  if (!["http:", "https:", "ws:", "wss:"].includes(url.protocol)) throw new Error(`unsupported scheme ${url.protocol} (use http, https, ws or wss)`);
  const loopback = isLoopbackHost(url.hostname);
  if (!loopback && !allowRemote) {
    throw new Error(`refusing non-loopback target ${url.hostname}: pass --allow-remote to load a deployment you own`);
  }
  const port = url.port ? Number(url.port) : secure ? 443 : 80;
  const hostPort = url.host;
  return {
    httpOrigin: `${secure ? "https" : "http"}://${hostPort}`,
    wsOrigin: `${secure ? "wss" : "ws"}://${hostPort}`,
    host: url.hostname,
    port,
    loopback,
  };
}

/**
 * What a spawned server is: ours (the local server), the Node `ws` baseline,
 * the bare workerd baseline (load/baselines/bare-workerd), send-only or
 * storing each message first, or the PartyServer baseline (load/baselines/partyserver).
 */
export type ServerKind = "ours" | "baseline" | "bare" | "bare-durable" | "partyserver";

/** The local server's accept gate: the launcher relays connections to workerd (on), or workerd listens itself (off). */
export type GateMode = "auto" | "on" | "off";

/**
 * A server process started by the load tool itself (our local server or the
 * baseline), on a port of its own, stopped at the end of the run.
 */
export class SpawnedServer {
  private child: ChildProcess | undefined;
  readonly logPath: string;
  private readonly dataDir: string | undefined;

  private constructor(
    readonly kind: ServerKind,
    readonly port: number,
    private readonly workDir: string,
    private readonly vars: Record<string, string>,
    private readonly durable: boolean,
    private readonly gate: GateMode,
    /** The checkout whose local server runs: this one, or another (an earlier commit) to compare with. */
    private readonly checkout: string,
    /** Environment entries for the launcher beyond the run's own (CONNECTION_CEILING). */
    private readonly launcherEnv: Record<string, string>,
  ) {
    this.logPath = join(workDir, `${kind}-server.log`);
    this.dataDir = kind === "baseline" ? undefined : join(workDir, "data");
  }

  static async start(
    kind: ServerKind,
    port: number,
    vars: Record<string, string> = {},
    durable = false,
    gate: GateMode = "auto",
    checkout = REPO_ROOT,
    launcherEnv: Record<string, string> = {},
  ): Promise<SpawnedServer> {
    const workDir = mkdtempSync(join(tmpdir(), `edge-fanout-load-${kind}-`));
    const server = new SpawnedServer(kind, port, workDir, vars, durable, gate, checkout, launcherEnv);
    await server.launch();
    return server;
  }

  private launches = 0;

  private command(): { file: string; args: string[] } {
    if (this.kind === "baseline") {
      const durable = this.durable ? ["--durable", join(this.workDir, "baseline-history.sqlite")] : [];
      return { file: process.execPath, args: [join(DIST_DIR, "baseline-server.js"), "--port", String(this.port), ...durable] };
    }
    if (this.kind === "bare" || this.kind === "bare-durable") {
      const durable = this.kind === "bare-durable" ? ["--durable"] : [];
      return { file: process.execPath, args: [join(DIST_DIR, "bare-server.js"), "--port", String(this.port), "--data", this.dataDir ?? this.workDir, ...durable] };
    }
    if (this.kind === "partyserver") {
      return { file: process.execPath, args: [join(DIST_DIR, "partyserver-server.js"), "--port", String(this.port), "--data", this.dataDir ?? this.workDir] };
    }
    // Earlier checkouts kept the launcher under worker/local/.
    const launcher = [join(this.checkout, "local-server/server.mjs"), join(this.checkout, "worker/local/server.mjs")].find((path) => existsSync(path)) ?? "";
    // Built on the first launch; a restart measures the restart, not a rebuild.
    const varArgs = Object.entries(this.vars).flatMap(([key, value]) => ["--var", `${key}=${value}`]);
    // A developer's .dev.vars (secrets included) must not change what is measured.
    const fixed = ["--no-dev-vars", "--gate", this.gate];
    if (existsSync(launcher)) return { file: process.execPath, args: [launcher, ...(this.launches > 0 ? ["--no-build"] : []), ...fixed, ...varArgs] };
    throw new Error("no local server launcher found (local-server/server.mjs); run the service yourself and pass --url");
  }

  private async launch(): Promise<void> {
    if (await isUp(this.port)) throw new Error(`port ${this.port} is already in use; pick another with --port/--baseline-port`);
    const { file, args } = this.command();
    this.launches++;
    const log = createWriteStream(this.logPath, { flags: "a" });
    const child = spawn(file, args, {
      cwd: this.kind === "ours" ? this.checkout : REPO_ROOT,
      env: { ...process.env, ...this.launcherEnv, PORT: String(this.port), ...(this.dataDir ? { DATA_DIR: this.dataDir } : {}) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    this.child = child;
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline) {
      if (child.exitCode !== null) throw new Error(`${this.kind} server exited with ${child.exitCode}; see ${this.logPath}`);
      if (await isUp(this.port)) return;
      await sleep(200);
    }
    await this.stop();
    throw new Error(`${this.kind} server did not answer /healthz on port ${this.port} within 120 s; see ${this.logPath}`);
  }

  /**
   * The process to sample: workerd for our server and the bare baseline (their
   * launchers print its pid; with the accept gate on, our launcher itself
   * holds the listening socket), the node process for the Node baseline.
   */
  serverPid(): number | undefined {
    if (this.kind !== "baseline") {
      const printed = [...this.#log().matchAll(/workerd pid (\d+)/g)].at(-1)?.[1];
      if (printed) return Number(printed);
    }
    return findListeningPid(this.port) ?? this.child?.pid;
  }

  /** The launcher's pid when it relays connections to workerd (accept gate on): its CPU is part of the server's cost. */
  gatePid(): number | undefined {
    return this.kind === "ours" && /accept gate on/.test(this.#log()) ? this.child?.pid : undefined;
  }

  #log(): string {
    try {
      return readFileSync(this.logPath, "utf8");
    } catch {
      return "";
    }
  }

  get launcherPid(): number | undefined {
    return this.child?.pid;
  }

  /**
   * Rows of history the rooms of a spawned local server hold in their SQLite
   * files (each room's `log` table), read with the `sqlite3` command; undefined
   * for another server or without the command. A room's ring is never emptied,
   * only overwritten, so for a run shorter than its ring these are the rows it
   * wrote.
   */
  storedHistoryRows(): number | undefined {
    if (this.kind !== "ours" || this.dataDir === undefined) return undefined;
    const rooms = join(this.dataDir, "edge-fanout-Room");
    let files: string[];
    try {
      files = readdirSync(rooms).filter((name) => name.endsWith(".sqlite") && name !== "metadata.sqlite");
    } catch {
      return 0;
    }
    let rows = 0;
    for (const file of files) {
      try {
        const out = execFileSync("sqlite3", ["-readonly", join(rooms, file), "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'log'"], { encoding: "utf8", timeout: 10_000, stdio: ["ignore", "pipe", "ignore"] });
        // A room that wrote no history has no log table (an ephemeral room never has one).
        if (out.trim() === "1") rows += Number(execFileSync("sqlite3", ["-readonly", join(rooms, file), "SELECT count(*) FROM log"], { encoding: "utf8", timeout: 10_000, stdio: ["ignore", "pipe", "ignore"] }).trim()) || 0;
      } catch (error) {
        if ((error as { code?: string }).code === "ENOENT") return undefined;
      }
    }
    return rows;
  }

  /** Graceful stop (SIGTERM: sockets are closed with 1012), forced after a grace period. */
  async stop(graceMs = 15_000): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const runtimePid = findListeningPid(this.port);
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    await exited;
    clearTimeout(timer);
    // A runtime started by the launcher must not outlive it.
    if (runtimePid && runtimePid !== child.pid && isAlive(runtimePid)) {
      try {
        process.kill(runtimePid, "SIGKILL");
      } catch {
        /* already gone */
      }
    }
    this.child = undefined;
  }

  /** Stops and starts again on the same port and data directory (history survives if the server persists it). */
  async restart(): Promise<void> {
    await this.stop();
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && (await isUp(this.port))) await sleep(100);
    await this.launch();
  }

  async dispose(): Promise<void> {
    await this.stop();
    try {
      rmSync(this.workDir, { recursive: true, force: true });
    } catch {
      /* temp files; not worth failing a run */
    }
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function isUp(port: number): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) });
    await res.arrayBuffer();
    return res.ok;
  } catch {
    return false;
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Loopback source addresses to spread client sockets over (127.0.0.2 …), so ephemeral ports never run out. */
export function loopbackSources(count: number): string[] {
  return Array.from({ length: Math.max(0, Math.min(count, 250)) }, (_, i) => `127.0.0.${i + 2}`);
}
