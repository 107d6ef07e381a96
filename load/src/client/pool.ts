import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { Histogram } from "../stats/histogram";
import { addTotals, emptyTotals, type PublishedRange } from "../stats/ledger";
import { addCounts } from "../stats/failures";
import type {
  CloseRecord,
  GroupResult,
  MainToWorker,
  SubscribeAllDone,
  WaveDone,
  WorkerConfig,
  WorkerProgress,
  WorkerSettled,
  WorkerToMain,
} from "./messages";

type PoolConfig = Omit<WorkerConfig, "workerIndex" | "workerCount">;

interface Worker {
  index: number;
  child: ChildProcess;
  progress: WorkerProgress | undefined;
  waiters: Array<(message: WorkerToMain) => boolean>;
}

/** Aggregated progress of all client processes. */
export interface PoolProgress extends Omit<WorkerProgress, "rssBytes"> {
  /** Sum of the client processes' CPU (µs), plus this coordinating process. */
  clientCpuUs: number;
  /** CPU (µs) of each client process: a saturated process shows here before the sum does. */
  workerCpuUs: number[];
  clientRssBytes: number;
}

export interface MergedGroup {
  clients: number;
  totals: ReturnType<typeof emptyTotals>;
  latency: Histogram;
  fromRequest: Histogram;
}

export interface PoolSettled {
  fast: MergedGroup;
  /** Per message, ms from its ts until the last fast client had it (in-time copies): publish-to-all latency. */
  allReachedMs: Histogram;
  slow: MergedGroup;
  handshakeMs: Histogram;
  welcomeMs: Histogram;
  failures: Record<string, number>;
  closesByCode: Record<string, number>;
  closeRecords: CloseRecord[];
  reconnect: { attempts: number; failures: Record<string, number>; downtimeMs: Histogram; notBack: number; lastBackAt: number };
  pongs: number;
  parseErrors: number;
  errorEvents: number;
  /** Multiplexed connections: `subscribed` events, refused subscribes by code, the time each connection's rooms took. */
  subscribe: { subscribed: number; refusals: Record<string, number>; connectionMs: Histogram };
}

/** A subscribe storm over every process: what was asked, answered and refused, and when the last room was subscribed. */
export interface SubscribeStorm {
  connections: number;
  asked: number;
  subscribed: number;
  refusals: Record<string, number>;
  closed: number;
  /** From the command to the last `subscribed` event, ms. */
  allSubscribedMs: number | undefined;
}

const workerScript = join(dirname(fileURLToPath(import.meta.url)), "client-worker.js");

/**
 * The client processes of one run. Sockets are spread over them (and over
 * source addresses) so the generator is not the bottleneck; the pool sends
 * them commands and merges what they report.
 */
export class ClientPool {
  private readonly workers: Worker[] = [];
  private waveCounter = 0;

  private constructor(private readonly config: PoolConfig) {}

  static async start(count: number, config: PoolConfig): Promise<ClientPool> {
    const pool = new ClientPool(config);
    await Promise.all(Array.from({ length: count }, (_, i) => pool.spawn(i, count)));
    return pool;
  }

  private spawn(index: number, count: number): Promise<void> {
    const workerConfig: WorkerConfig = { ...this.config, workerIndex: index, workerCount: count };
    const child = fork(workerScript, [], {
      env: { ...process.env, LOAD_WORKER_CONFIG: JSON.stringify(workerConfig) },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
      execArgv: ["--max-old-space-size=2048"],
    });
    const worker: Worker = { index, child, progress: undefined, waiters: [] };
    this.workers.push(worker);
    // A send to a process that already exited must not bring the coordinator down.
    child.on("error", (error) => process.stderr.write(`client process ${index}: ${error.message}\n`));
    child.on("message", (raw: unknown) => {
      const message = raw as WorkerToMain;
      if (message.type === "progress") worker.progress = message.progress;
      if (message.type === "fatal") process.stderr.write(`client process ${index}: ${message.message}\n`);
      worker.waiters = worker.waiters.filter((accept) => !accept(message));
    });
    return this.waitFor(worker, (m) => m.type === "ready", 15_000).then(() => undefined);
  }

  private waitFor(worker: Worker, match: (m: WorkerToMain) => boolean, timeoutMs: number): Promise<WorkerToMain> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`client process ${worker.index} did not answer within ${timeoutMs} ms`)), timeoutMs);
      const onExit = (code: number | null): void => {
        clearTimeout(timer);
        reject(new Error(`client process ${worker.index} exited (${code})`));
      };
      worker.child.once("exit", onExit);
      worker.waiters.push((message) => {
        if (message.type === "fatal") {
          clearTimeout(timer);
          worker.child.off("exit", onExit);
          reject(new Error(`client process ${worker.index}: ${message.message}`));
          return true;
        }
        if (!match(message)) return false;
        clearTimeout(timer);
        worker.child.off("exit", onExit);
        resolve(message);
        return true;
      });
    });
  }

  private send(message: MainToWorker): void {
    for (const worker of this.workers) if (worker.child.connected) worker.child.send(message, undefined, undefined, () => undefined);
  }

  /** Opens sockets [from, to) across all processes; resolves when every attempt has an outcome. */
  async open(from: number, to: number, timeoutMs: number): Promise<WaveDone> {
    const waveId = ++this.waveCounter;
    const answers = this.workers.map((w) => this.waitFor(w, (m) => m.type === "wave-done" && m.wave.waveId === waveId, timeoutMs));
    this.send({ type: "open", waveId, from, to });
    const waves = (await Promise.all(answers)).map((m) => (m as Extract<WorkerToMain, { type: "wave-done" }>).wave);
    const merged: WaveDone = { waveId, attempted: 0, ok: 0, failures: {}, welcomeSeqByRoom: {} };
    for (const wave of waves) {
      merged.attempted += wave.attempted;
      merged.ok += wave.ok;
      addCounts(merged.failures, wave.failures);
      for (const [room, seq] of Object.entries(wave.welcomeSeqByRoom)) {
        const seen = merged.welcomeSeqByRoom[room];
        merged.welcomeSeqByRoom[room] = seen === undefined ? seq : Math.min(seen, seq);
      }
    }
    return merged;
  }

  /** Every open multiplexed connection subscribes to all its rooms at once; resolves when each room has its answer. */
  async subscribeAll(timeoutMs: number): Promise<SubscribeStorm> {
    const id = ++this.waveCounter;
    const answers = this.workers.map((w) => this.waitFor(w, (m) => m.type === "subscribed-all" && m.done.id === id, timeoutMs));
    const sentAt = Date.now();
    this.send({ type: "subscribe-all", id });
    const parts = (await Promise.all(answers)).map((m) => (m as Extract<WorkerToMain, { type: "subscribed-all" }>).done);
    const storm: SubscribeStorm = { connections: 0, asked: 0, subscribed: 0, refusals: {}, closed: 0, allSubscribedMs: undefined };
    let lastAt = 0;
    for (const part of parts as SubscribeAllDone[]) {
      storm.connections += part.connections;
      storm.asked += part.asked;
      storm.subscribed += part.subscribed;
      storm.closed += part.closed;
      addCounts(storm.refusals, part.refusals);
      lastAt = Math.max(lastAt, part.lastAt);
    }
    if (lastAt > 0) storm.allSubscribedMs = lastAt - sentAt;
    return storm;
  }

  stall(): void {
    this.send({ type: "stall" });
  }

  resume(): void {
    this.send({ type: "resume" });
  }

  drop(at: number): void {
    this.send({ type: "drop", at });
  }

  markDrop(at: number): void {
    this.send({ type: "mark-drop", at });
  }

  /** Latest merged progress (each process reports every 250 ms). */
  progress(): PoolProgress {
    const own = process.cpuUsage();
    const merged: PoolProgress = {
      open: 0,
      connecting: 0,
      handshakes: 0,
      failures: 0,
      welcomes: 0,
      events: 0,
      frames: 0,
      bytes: 0,
      closes: 0,
      reconnecting: 0,
      subscriptions: 0,
      lowestSeqByRoom: {},
      cpuUserUs: own.user,
      cpuSystemUs: own.system,
      clientCpuUs: own.user + own.system,
      workerCpuUs: [],
      clientRssBytes: process.memoryUsage.rss(),
    };
    for (const worker of this.workers) {
      const p = worker.progress;
      if (!p) continue;
      merged.open += p.open;
      merged.connecting += p.connecting;
      merged.handshakes += p.handshakes;
      merged.failures += p.failures;
      merged.welcomes += p.welcomes;
      merged.events += p.events;
      merged.frames += p.frames;
      merged.bytes += p.bytes;
      merged.closes += p.closes;
      merged.reconnecting += p.reconnecting;
      merged.subscriptions += p.subscriptions;
      merged.cpuUserUs += p.cpuUserUs;
      merged.cpuSystemUs += p.cpuSystemUs;
      merged.clientCpuUs += p.cpuUserUs + p.cpuSystemUs;
      merged.workerCpuUs.push(p.cpuUserUs + p.cpuSystemUs);
      merged.clientRssBytes += p.rssBytes;
      for (const [room, seq] of Object.entries(p.lowestSeqByRoom)) {
        const seen = merged.lowestSeqByRoom[room];
        merged.lowestSeqByRoom[room] = seen === undefined ? seq : Math.min(seen, seq);
      }
    }
    return merged;
  }

  /** Waits for fresh progress from every process (after a command whose effect we want to observe). */
  async freshProgress(): Promise<PoolProgress> {
    await Promise.all(this.workers.map((w) => this.waitFor(w, (m) => m.type === "progress", 5000).catch(() => undefined)));
    return this.progress();
  }

  /** Final accounting against the published ranges; merges every process's result. */
  async settle(generations: Record<string, PublishedRange[]>): Promise<PoolSettled> {
    const answers = this.workers.map((w) => this.waitFor(w, (m) => m.type === "settled", 60_000));
    this.send({ type: "settle", generations });
    const parts = (await Promise.all(answers)).map((m) => (m as Extract<WorkerToMain, { type: "settled" }>).settled);
    return mergeSettled(parts, this.config.histogramCeilingMs);
  }

  /** Closes every socket (1000) and stops the processes. */
  async stop(): Promise<void> {
    const closing = this.workers.map((w) =>
      w.child.connected ? this.waitFor(w, (m) => m.type === "closed", 10_000).catch(() => undefined) : Promise.resolve(undefined),
    );
    for (const w of this.workers) if (w.child.connected) w.child.send({ type: "close-all" } satisfies MainToWorker);
    await Promise.all(closing);
    await Promise.all(
      this.workers.map(
        (w) =>
          new Promise<void>((resolve) => {
            if (w.child.exitCode !== null || w.child.signalCode !== null) return resolve();
            const timer = setTimeout(() => {
              w.child.kill("SIGKILL");
              resolve();
            }, 3000);
            w.child.once("exit", () => {
              clearTimeout(timer);
              resolve();
            });
            if (w.child.connected) w.child.disconnect();
            else w.child.kill("SIGTERM");
          }),
      ),
    );
  }

  /** Immediate teardown for aborts. */
  kill(): void {
    for (const w of this.workers) if (w.child.exitCode === null) w.child.kill("SIGKILL");
  }

  get pids(): number[] {
    return this.workers.map((w) => w.child.pid ?? -1).filter((pid) => pid > 0);
  }
}

function mergeGroup(parts: GroupResult[], ceiling: number): MergedGroup {
  const merged: MergedGroup = { clients: 0, totals: emptyTotals(), latency: new Histogram(ceiling), fromRequest: new Histogram(ceiling) };
  for (const part of parts) {
    merged.clients += part.clients;
    addTotals(merged.totals, part.totals);
    merged.latency.merge(part.latency);
    merged.fromRequest.merge(part.fromRequest);
  }
  return merged;
}

export function mergeSettled(parts: WorkerSettled[], ceiling: number): PoolSettled {
  const handshakeMs = new Histogram(60_000);
  const welcomeMs = new Histogram(60_000);
  const downtimeMs = new Histogram(600_000);
  const result: PoolSettled = {
    fast: mergeGroup(parts.map((p) => p.groups.fast), ceiling),
    allReachedMs: new Histogram(ceiling),
    slow: mergeGroup(parts.map((p) => p.groups.slow), ceiling),
    handshakeMs,
    welcomeMs,
    failures: {},
    closesByCode: {},
    closeRecords: [],
    reconnect: { attempts: 0, failures: {}, downtimeMs, notBack: 0, lastBackAt: 0 },
    pongs: 0,
    parseErrors: 0,
    errorEvents: 0,
    subscribe: { subscribed: 0, refusals: {}, connectionMs: new Histogram(60_000) },
  };
  for (const p of parts) {
    result.subscribe.subscribed += p.subscribe.subscribed;
    addCounts(result.subscribe.refusals, p.subscribe.refusals);
    result.subscribe.connectionMs.merge(p.subscribe.connectionMs);
    handshakeMs.merge(p.handshakeMs);
    welcomeMs.merge(p.welcomeMs);
    downtimeMs.merge(p.reconnect.downtimeMs);
    addCounts(result.failures, p.failures);
    addCounts(result.closesByCode, p.closesByCode);
    result.closeRecords.push(...p.closeRecords);
    result.reconnect.attempts += p.reconnect.attempts;
    addCounts(result.reconnect.failures, p.reconnect.failures);
    result.reconnect.notBack += p.reconnect.notBack;
    result.reconnect.lastBackAt = Math.max(result.reconnect.lastBackAt, p.reconnect.lastBackAt);
    result.pongs += p.pongs;
    result.parseErrors += p.parseErrors;
    result.errorEvents += p.errorEvents;
  }
  const lastArrival = new Map<string, number>();
  for (const p of parts) for (const [key, ms] of Object.entries(p.lastArrivalMs)) lastArrival.set(key, Math.max(lastArrival.get(key) ?? 0, ms));
  for (const ms of lastArrival.values()) result.allReachedMs.add(ms);
  return result;
}
