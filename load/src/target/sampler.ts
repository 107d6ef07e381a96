import { sampleMachine, sampleProcess, type MachineSample, type ProcessSample } from "../kit/proc";
import type { ClientPool, PoolProgress } from "../client/pool";

/** One point of a run's timeline. Times are ms since the run started. */
export interface TimelineSample {
  t: number;
  phase: string;
  server?: ProcessSample;
  machine: MachineSample;
  /** Busy share of all cores since the previous sample, 0..1. */
  machineBusy: number;
  client?: {
    cpuUs: number;
    workerCpuUs: number[];
    rssBytes: number;
    open: number;
    handshakes: number;
    failures: number;
    events: number;
    frames: number;
    reconnecting: number;
  };
}

export interface Mark {
  t: number;
  label: string;
}

/**
 * Samples the server process (when local), the machine and the client pool at
 * a fixed interval, and on demand at phase boundaries so deltas are exact.
 */
export class Sampler {
  readonly samples: TimelineSample[] = [];
  readonly marks: Mark[] = [];
  private timer: ReturnType<typeof setInterval> | undefined;
  private phase = "setup";
  private previousMachine: MachineSample | undefined;
  private pool: ClientPool | undefined;
  private listeners: Array<(sample: TimelineSample) => void> = [];
  readonly startedAt = Date.now();

  constructor(
    private serverPid: number | undefined,
    private readonly intervalMs: number,
  ) {}

  attachPool(pool: ClientPool): void {
    this.pool = pool;
  }

  /** The server process may change (restart): sample the new one from now on. */
  setServerPid(pid: number | undefined): void {
    this.serverPid = pid;
  }

  get pid(): number | undefined {
    return this.serverPid;
  }

  onSample(listener: (sample: TimelineSample) => void): void {
    this.listeners.push(listener);
  }

  start(): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), this.intervalMs);
  }

  stop(): TimelineSample {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    return this.sample();
  }

  /** Starts a named phase and returns a sample taken at its boundary. */
  mark(label: string): TimelineSample {
    this.phase = label;
    const sample = this.sample();
    this.marks.push({ t: sample.t, label });
    return sample;
  }

  /** Takes a sample now. */
  sample(): TimelineSample {
    const machine = sampleMachine();
    const prev = this.previousMachine;
    const total = prev ? machine.cpuTotalTicks - prev.cpuTotalTicks : 0;
    const busy = prev && total > 0 ? (machine.cpuBusyTicks - prev.cpuBusyTicks) / total : 0;
    this.previousMachine = machine;
    const progress: PoolProgress | undefined = this.pool?.progress();
    const sample: TimelineSample = {
      t: Date.now() - this.startedAt,
      phase: this.phase,
      machine,
      machineBusy: busy,
    };
    const server = this.serverPid ? sampleProcess(this.serverPid) : undefined;
    if (server) sample.server = server;
    if (progress && this.pool) {
      // CPU straight from /proc at this instant (progress reports can be 250 ms old); main process via cpuUsage.
      const workerCpuUs = this.pool.pids.map((pid) => sampleProcess(pid)?.cpuUs ?? 0);
      const own = process.cpuUsage();
      sample.client = {
        cpuUs: workerCpuUs.reduce((a, b) => a + b, 0) + own.user + own.system,
        workerCpuUs,
        rssBytes: progress.clientRssBytes,
        open: progress.open,
        handshakes: progress.handshakes,
        failures: progress.failures,
        events: progress.events,
        frames: progress.frames,
        reconnecting: progress.reconnecting,
      };
    }
    this.samples.push(sample);
    for (const listener of this.listeners) listener(sample);
    return sample;
  }

  /** Highest server RSS seen so far. */
  peakServerRss(): number | undefined {
    let peak: number | undefined;
    for (const s of this.samples) if (s.server && (peak === undefined || s.server.rssBytes > peak)) peak = s.server.rssBytes;
    return peak;
  }

  /** Mean machine busy share between two sample times. */
  machineBusyBetween(a: TimelineSample, b: TimelineSample): number {
    const total = b.machine.cpuTotalTicks - a.machine.cpuTotalTicks;
    return total > 0 ? (b.machine.cpuBusyTicks - a.machine.cpuBusyTicks) / total : 0;
  }
}

/** Resource use between two samples, the unit every per-operation figure is derived from. */
export interface Interval {
  seconds: number;
  serverCpuUs?: number;
  serverRssDelta?: number;
  serverFdsDelta?: number;
  clientCpuUs?: number;
  busiestWorkerCpuUs?: number;
  memAvailableDrop: number;
  tcpMemDelta: number;
  machineBusy: number;
}

export function intervalBetween(a: TimelineSample, b: TimelineSample): Interval {
  const totalTicks = b.machine.cpuTotalTicks - a.machine.cpuTotalTicks;
  const interval: Interval = {
    seconds: (b.t - a.t) / 1000,
    memAvailableDrop: a.machine.memAvailableBytes - b.machine.memAvailableBytes,
    tcpMemDelta: b.machine.tcpMemBytes - a.machine.tcpMemBytes,
    machineBusy: totalTicks > 0 ? (b.machine.cpuBusyTicks - a.machine.cpuBusyTicks) / totalTicks : 0,
  };
  if (a.server && b.server) {
    interval.serverCpuUs = b.server.cpuUs - a.server.cpuUs;
    interval.serverRssDelta = b.server.rssBytes - a.server.rssBytes;
    interval.serverFdsDelta = b.server.fds - a.server.fds;
  }
  if (a.client && b.client) {
    interval.clientCpuUs = b.client.cpuUs - a.client.cpuUs;
    const before = a.client.workerCpuUs;
    interval.busiestWorkerCpuUs = Math.max(0, ...b.client.workerCpuUs.map((cpu, i) => cpu - (before[i] ?? 0)));
  }
  return interval;
}
