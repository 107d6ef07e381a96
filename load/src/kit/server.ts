/**
 * Starting and stopping the servers a measurement runs against: the local
 * server (local-server/server.mjs, what `npm start` runs) of this checkout or
 * another, or a baseline (kit/baselines.ts), each on 127.0.0.1 on a port of its
 * own with a data directory of its own. No server outlives the process that
 * started it, whatever ends that process.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { baselineNamed, type Baseline } from "./baselines";
import { launcherIn, REPO_ROOT } from "./paths";
import { findListeningPid } from "./proc";
import { sleep } from "./time";

/** The local server's accept gate: the launcher relays connections to workerd (on), or workerd listens itself (off). */
export type GateMode = "auto" | "on" | "off";

export interface ServerSpec {
  /** "ours" (the local server) or a baseline's name (kit/baselines.ts). */
  kind: string;
  port: number;
  /** ours: wrangler.toml var overrides (--var KEY=VALUE). */
  vars?: Record<string, string>;
  /** ours: the accept gate; absent, the launcher decides (ACCEPT_GATE, or on below its descriptor threshold). */
  gate?: GateMode;
  /** ours: the checkout whose local server runs (an earlier commit, to compare with); this one by default. */
  checkout?: string;
  /** ours: this launcher instead of the checkout's. */
  launcher?: string;
  /** ours: bundle the worker at the first start; by default the launcher serves the dist/worker.js a build left. */
  build?: boolean;
  /** Further arguments for the launcher or the baseline. */
  args?: string[];
  /** Storage to start on (a restart on the same rooms); a fresh directory by default. */
  dataDir?: string;
  /** The descriptor limit (soft and hard) it runs under, as `ulimit -n` (raising it past the hard limit needs privilege). */
  fdLimit?: number;
  /** Environment entries on top of this process's, and names to leave out of it. */
  env?: Record<string, string>;
  unsetEnv?: string[];
  startTimeoutMs?: number;
}

const running = new Set<Server>();
let exitHookInstalled = false;

function killQuietly(pid: number | undefined, signal: NodeJS.Signals = "SIGKILL"): void {
  if (pid === undefined) return;
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

export function isAlive(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** True when something answers GET /healthz on the port. */
export async function answersHealth(port: number): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) });
    await res.arrayBuffer();
    return res.ok;
  } catch {
    return false;
  }
}

export class Server {
  readonly url: string;
  readonly wsUrl: string;
  readonly dataDir: string;
  private readonly workDir: string;
  private readonly baseline: Baseline | undefined;
  private child: ChildProcess | undefined;
  private exit: Promise<void> = Promise.resolve();
  private log = "";
  private launches = 0;

  private constructor(readonly spec: ServerSpec) {
    this.baseline = spec.kind === "ours" ? undefined : baselineNamed(spec.kind);
    this.url = `http://127.0.0.1:${spec.port}`;
    this.wsUrl = `ws://127.0.0.1:${spec.port}`;
    this.workDir = mkdtempSync(join(tmpdir(), `edge-fanout-${spec.kind}-`));
    this.dataDir = spec.dataDir ?? join(this.workDir, "data");
    mkdirSync(this.dataDir, { recursive: true });
  }

  /** Starts a server and resolves once it answers /healthz (and, on workerd, has printed its runtime's pid). */
  static async start(spec: ServerSpec): Promise<Server> {
    const server = new Server(spec);
    running.add(server);
    if (!exitHookInstalled) {
      exitHookInstalled = true;
      process.on("exit", () => {
        for (const s of running) {
          s.child?.kill("SIGKILL");
          killQuietly(s.runtimePid());
        }
      });
    }
    try {
      await server.launch();
    } catch (error) {
      await server.stop();
      throw error;
    }
    return server;
  }

  get port(): number {
    return this.spec.port;
  }

  private command(): string[] {
    if (this.baseline) return [...this.baseline.args(this.port, this.workDir), ...(this.spec.args ?? [])];
    const s = this.spec;
    // A restart measures the restart, not a rebuild; a developer's .dev.vars must not change what is measured.
    const build = s.build === true && this.launches === 0 ? [] : ["--no-build"];
    const gate = s.gate === undefined ? [] : ["--gate", s.gate];
    const vars = Object.entries(s.vars ?? {}).flatMap(([key, value]) => ["--var", `${key}=${value}`]);
    return [s.launcher ?? launcherIn(s.checkout ?? REPO_ROOT), ...build, "--no-dev-vars", ...gate, ...vars, ...(s.args ?? [])];
  }

  private async launch(): Promise<void> {
    if (await answersHealth(this.port)) throw new Error(`port ${this.port} is already in use; pick another port`);
    const args = this.command();
    this.launches++;
    // What it prints from here is this start's: its runtime's pid among it.
    this.log = "";
    const env: NodeJS.ProcessEnv = { ...process.env, PORT: String(this.port), DATA_DIR: this.dataDir, ...this.spec.env };
    for (const name of this.spec.unsetEnv ?? []) delete env[name];
    const limit = this.spec.fdLimit;
    // ulimit sets soft and hard; exec keeps the pid, so the server is the process started.
    const child =
      limit === undefined
        ? spawn(process.execPath, args, { cwd: this.spec.checkout ?? REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"] })
        : spawn("/bin/sh", ["-c", `ulimit -n ${limit} && exec "$0" "$@"`, process.execPath, ...args], { cwd: this.spec.checkout ?? REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    const keep = (chunk: Buffer): void => {
      this.log = (this.log + chunk.toString()).slice(-200_000);
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    this.child = child;
    this.exit = new Promise((resolve) => child.once("exit", () => resolve()));
    const deadline = Date.now() + (this.spec.startTimeoutMs ?? 120_000);
    const onWorkerd = this.baseline?.runtime !== "node";
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${this.spec.kind} server exited (${child.exitCode ?? child.signalCode}):\n${this.log.slice(-3000)}`);
      if ((!onWorkerd || this.runtimePid() !== undefined) && (await answersHealth(this.port))) return;
      await sleep(100);
    }
    throw new Error(`${this.spec.kind} server did not answer /healthz on port ${this.port} within ${(this.spec.startTimeoutMs ?? 120_000) / 1000} s:\n${this.log.slice(-3000)}`);
  }

  /** workerd's pid as its launcher printed it (the latest start's). */
  private runtimePid(): number | undefined {
    const printed = [...this.log.matchAll(/workerd pid (\d+)/g)].at(-1)?.[1];
    return printed === undefined ? undefined : Number(printed);
  }

  /** The process to sample: workerd for our server and the bare baseline, the server process itself for a Node baseline. */
  get pid(): number {
    return (this.baseline?.runtime === "node" ? undefined : this.runtimePid()) ?? findListeningPid(this.port) ?? this.child?.pid ?? 0;
  }

  /** The launcher (or baseline) process started. */
  get launcherPid(): number | undefined {
    return this.child?.pid;
  }

  /** The launcher's pid when it relays connections to workerd (accept gate on): its CPU is part of the server's cost. */
  gatePid(): number | undefined {
    return this.spec.kind === "ours" && /accept gate on/.test(this.log) ? this.child?.pid : undefined;
  }

  /** Everything it printed since it last started (the last 200,000 characters). */
  output(): string {
    return this.log;
  }

  alive(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null && isAlive(this.pid);
  }

  /** Resolves when the process started last has exited. */
  exited(): Promise<void> {
    return this.exit;
  }

  /** Stops it (SIGTERM: our server closes its sockets with 1012; SIGKILL after `graceMs`), with its runtime; removes its storage unless `keepData`. */
  async stop({ keepData = false, graceMs = 15_000 }: { keepData?: boolean; graceMs?: number } = {}): Promise<void> {
    const child = this.child;
    const runtime = this.runtimePid() ?? findListeningPid(this.port);
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await this.exit;
      clearTimeout(timer);
    }
    // A runtime started by the launcher must not outlive it.
    if (runtime !== child?.pid && isAlive(runtime)) killQuietly(runtime);
    this.child = undefined;
    if (keepData) return;
    running.delete(this);
    rmSync(this.workDir, { recursive: true, force: true });
    if (this.spec.dataDir) rmSync(this.spec.dataDir, { recursive: true, force: true });
  }

  /** Stops and starts again on the same port and data directory (history survives where the server keeps it). */
  async restart(pauseMs = 0): Promise<void> {
    await this.stop({ keepData: true });
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && (await answersHealth(this.port))) await sleep(100);
    await sleep(pauseMs);
    await this.launch();
  }
}

/** Stops every server this process started that is still running. */
export async function stopAllServers(): Promise<void> {
  await Promise.all([...running].map((server) => server.stop().catch(() => undefined)));
}
