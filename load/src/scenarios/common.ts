import type { ClientPool, MergedGroup, PoolProgress, PoolSettled } from "../client/pool";
import { totalSockets, type LoadOptions } from "../options";
import { Publisher, type HttpClient } from "../publisher";
import type { ProgressLine } from "../report/progress";
import type { Summary } from "../report/metrics";
import type { WaveRow } from "../result";
import { lostOf, type PublishedRange } from "../stats/ledger";
import { addCounts, isClientSideCause } from "../stats/failures";
import { intervalBetween, type Interval, type Sampler, type TimelineSample } from "../target/sampler";
import type { Server } from "../kit/server";
import { sleep } from "../kit/time";
import type { TargetAddress } from "../target/address";

/** What a scenario gets to work with for one target. */
export interface ScenarioContext {
  options: LoadOptions;
  label: string;
  address: TargetAddress;
  spawned: Server | undefined;
  pool: ClientPool;
  sampler: Sampler;
  http: HttpClient;
  progress: ProgressLine;
  rooms: string[];
  roomPrefix: string;
  /** Epoch ms after which the scenario must wrap up. */
  hardStopAt: number;
  summary: Summary;
  details: Record<string, unknown>;
  notes: string[];
  waves: WaveRow[];
  latencyCdf?: Array<[number, number]>;
}

export type Scenario = (ctx: ScenarioContext) => Promise<void>;

export function remainingMs(ctx: ScenarioContext): number {
  return Math.max(0, ctx.hardStopAt - Date.now());
}

/**
 * How long to publish: the requested duration, cut so that the drain and the
 * report still fit in the time limit. Refuses when nothing useful is left.
 */
export function publishWindowMs(ctx: ScenarioContext, reserveMs: number): number {
  const requested = ctx.options.durationSeconds * 1000;
  const available = remainingMs(ctx) - reserveMs;
  if (available < 1000) throw new Error("the time limit (--max-seconds) leaves no time to publish");
  if (available < requested) ctx.notes.push(`publishing cut to ${(available / 1000).toFixed(1)} s by the time limit`);
  return Math.min(requested, available);
}

export interface OpenResult {
  ok: number;
  attempted: number;
  failures: Record<string, number>;
  seconds: number;
  welcomeSeqByRoom: Record<string, number>;
  before: TimelineSample;
  after: TimelineSample;
}

/**
 * Opens sockets [0, total) in waves of `waveSize`, each with a bounded number
 * of handshakes in flight, recording per-wave rate and failures by cause.
 */
export async function openSockets(ctx: ScenarioContext, total: number, waveSize: number): Promise<OpenResult> {
  const start = ctx.sampler.mark("connect");
  const result: Omit<OpenResult, "after"> = { ok: 0, attempted: 0, failures: {}, seconds: 0, welcomeSeqByRoom: {}, before: start };
  const waves = Math.ceil(total / waveSize);
  for (let w = 0; w < waves; w++) {
    const from = w * waveSize;
    const to = Math.min(total, from + waveSize);
    const before = w === 0 ? result.before : ctx.sampler.sample();
    const started = performance.now();
    ctx.progress.setExtra(`wave ${w + 1}/${waves}`);
    const perProcessInFlight = Math.ceil(ctx.options.inFlight / ctx.options.procs);
    const timeout = Math.min(
      remainingMs(ctx),
      30_000 + Math.ceil((to - from) / perProcessInFlight / ctx.options.procs) * ctx.options.handshakeTimeoutMs,
    );
    const wave = await ctx.pool.open(from, to, timeout);
    const seconds = (performance.now() - started) / 1000;
    const after = ctx.sampler.sample();
    const cpu = before.server && after.server ? after.server.cpuUs - before.server.cpuUs : undefined;
    const row: WaveRow = { index: w + 1, attempted: wave.attempted, ok: wave.ok, seconds, rate: wave.ok / seconds, failures: wave.failures };
    if (cpu !== undefined && wave.ok > 0) row.serverCpuPerHandshakeUs = cpu / wave.ok;
    ctx.waves.push(row);
    result.ok += wave.ok;
    result.attempted += wave.attempted;
    result.seconds += seconds;
    addCounts(result.failures, wave.failures);
    for (const [room, seq] of Object.entries(wave.welcomeSeqByRoom)) {
      const seen = result.welcomeSeqByRoom[room];
      result.welcomeSeqByRoom[room] = seen === undefined ? seq : Math.min(seen, seq);
    }
    if (remainingMs(ctx) === 0) {
      ctx.notes.push("time limit reached while connecting");
      break;
    }
  }
  const opened: OpenResult = { ...result, after: ctx.sampler.sample() };
  ctx.progress.setExtra("");
  const s = ctx.summary;
  s.connected = result.ok;
  s.connectFailures = result.attempted - result.ok;
  s.clientSideFailures = Object.entries(result.failures)
    .filter(([cause]) => isClientSideCause(cause))
    .reduce((n, [, c]) => n + c, 0);
  if (result.seconds > 0) s.handshakesPerSecond = result.ok / result.seconds;
  const interval = intervalBetween(opened.before, opened.after);
  if (interval.serverCpuUs !== undefined && result.ok > 0) s.serverCpuPerHandshakeUs = interval.serverCpuUs / result.ok;
  ctx.details.connectFailuresByCause = result.failures;
  if (s.clientSideFailures) ctx.notes.push(`${s.clientSideFailures} connection attempts failed on the client's own limits (not the server's)`);
  return opened;
}

/** True when every client expected to keep up has seen the publisher's last accepted seq of its room. */
export function caughtUp(pool: ClientPool, lastSeqByRoom: Record<string, number>): boolean {
  const lowest = pool.progress().lowestSeqByRoom;
  for (const [room, last] of Object.entries(lastSeqByRoom)) {
    const seen = lowest[room];
    if (seen !== undefined && seen < last) return false;
  }
  return true;
}

/** CPU figures for an interval: who was busy, so a reader can tell who saturated. */
export function cpuSummary(ctx: ScenarioContext, interval: Interval): void {
  const s = ctx.summary;
  const us = interval.seconds * 1e6;
  if (us <= 0) return;
  if (interval.serverCpuUs !== undefined) s.serverCpuPercent = (interval.serverCpuUs / us) * 100;
  if (interval.clientCpuUs !== undefined) s.clientCpuPercent = (interval.clientCpuUs / us) * 100;
  if (interval.busiestWorkerCpuUs !== undefined) s.busiestClientProcessPercent = (interval.busiestWorkerCpuUs / us) * 100;
  s.machineBusyPercent = interval.machineBusy * 100;
  if ((s.busiestClientProcessPercent ?? 0) > 85) {
    ctx.notes.push(
      `a client process ran at ${Math.round(s.busiestClientProcessPercent ?? 0)}% of a core: the load generator may have limited this run (add --procs)`,
    );
  }
  if (s.machineBusyPercent > 90) {
    ctx.notes.push(`the machine was ${Math.round(s.machineBusyPercent)}% busy: server and clients competed for the cores`);
  }
}

/** Latency, loss and per-delivery cost of one group of clients over the measured interval. */
export function deliverySummary(
  ctx: ScenarioContext,
  group: MergedGroup,
  interval: Interval,
  events: number,
  frames: number,
  /** False when the interval mixes in other work (reconnect storms): no per-delivery cost then. */
  costPerDelivery = true,
): void {
  const s = ctx.summary;
  const t = group.totals;
  s.expected = t.expected;
  s.delivered = t.inTime;
  s.lost = lostOf(t);
  s.lostLate = t.late;
  s.lostNever = t.never;
  s.gaps = t.gaps;
  s.duplicates = t.duplicates;
  s.outOfOrder = t.outOfOrder;
  s.lostEventSeqs = t.lostEventSeqs;
  const lat = group.latency.summary();
  if (lat.count > 0) {
    s.latencyP50Ms = lat.p50;
    s.latencyP95Ms = lat.p95;
    s.latencyP99Ms = lat.p99;
    s.latencyMaxMs = lat.max;
  }
  const fromRequest = group.fromRequest.summary();
  if (fromRequest.count > 0) s.fromRequestP99Ms = fromRequest.p99;
  if (interval.seconds > 0) s.deliveriesPerSecond = events / interval.seconds;
  if (costPerDelivery && interval.serverCpuUs !== undefined && events > 0) {
    s.serverCpuPerDeliveryUs = interval.serverCpuUs / events;
    s.deliveriesPerServerCpuSecond = events / (interval.serverCpuUs / 1e6);
  }
  if (frames > 0) s.eventsPerFrame = events / frames;
  ctx.latencyCdf = group.latency.cdf();
  ctx.details.latencyMs = lat;
  ctx.details.fromRequestMs = fromRequest;
  ctx.details.deliveryTotals = t;
  if (t.unconfirmed) ctx.notes.push(`${t.unconfirmed} deliveries of seqs whose publish answer never arrived`);
}

export function publisherSummary(ctx: ScenarioContext, publisher: Publisher): void {
  const st = publisher.stats;
  ctx.summary.published = st.accepted;
  ctx.summary.publishFailures = st.attempted - st.accepted;
  const span = (st.lastAt - st.firstAt) / 1000;
  if (span > 0 && st.accepted > 1) ctx.summary.publishRate = (st.accepted - 1) / span;
  const http = st.httpMs.summary();
  if (http.count) ctx.summary.publishHttpP99Ms = http.p99;
  ctx.details.publisher = {
    attempted: st.attempted,
    accepted: st.accepted,
    failures: st.failures,
    httpMs: http,
    serverRecipients: st.serverRecipients,
    maxLagMs: Math.round(st.maxLagMs),
  };
  if (st.maxLagMs > 1000) ctx.notes.push(`the publisher fell up to ${Math.round(st.maxLagMs)} ms behind its schedule`);
}

/** Generic details every delivery scenario records. */
export function settledDetails(ctx: ScenarioContext, settled: PoolSettled): void {
  ctx.details.closesByCode = settled.closesByCode;
  ctx.details.handshakeMs = settled.handshakeMs.summary();
  ctx.details.welcomeMs = settled.welcomeMs.summary();
  if (settled.parseErrors) ctx.notes.push(`${settled.parseErrors} frames were not valid protocol JSON`);
  if (settled.errorEvents) ctx.notes.push(`${settled.errorEvents} error events received`);
  if (ctx.options.mux > 0) {
    const sub = settled.subscribe;
    const refused = Object.values(sub.refusals).reduce((a, b) => a + b, 0);
    ctx.summary.subscribeRefusals = refused;
    const perConnection = sub.connectionMs.summary();
    if (perConnection.count) ctx.summary.subscribeP99Ms = perConnection.p99;
    ctx.details.subscribe = { subscribed: sub.subscribed, refusalsByCode: sub.refusals, connectionMs: perConnection };
    if (refused) ctx.notes.push(`${refused} subscribes refused: ${JSON.stringify(sub.refusals)}`);
  }
}

/** Polls GET /rooms/:room for every room; numeric fields only. */
export async function roomStats(ctx: ScenarioContext): Promise<Array<Record<string, number | string>>> {
  const out: Array<Record<string, number | string>> = [];
  await Promise.all(
    ctx.rooms.map(async (room) => {
      try {
        const answer = await ctx.http.send("GET", `/rooms/${encodeURIComponent(room)}`, undefined, 3000);
        if (answer.status !== 200) return;
        const body = JSON.parse(answer.body) as Record<string, unknown>;
        const row: Record<string, number | string> = { room };
        for (const [k, v] of Object.entries(body)) if (typeof v === "number") row[k] = v;
        out.push(row);
      } catch {
        /* stats are optional */
      }
    }),
  );
  return out;
}

/**
 * Opens every socket a publishing scenario asks for (rooms × sockets per room)
 * and lets them settle for a second; fails when none connected.
 */
export async function openScenarioSockets(ctx: ScenarioContext): Promise<OpenResult> {
  const o = ctx.options;
  const total = totalSockets(o);
  ctx.summary.socketsRequested = total;
  const opened = await openSockets(ctx, total, o.wave);
  if (opened.ok === 0) throw new Error(`no socket connected (${JSON.stringify(opened.failures)})`);
  await sleep(1000);
  if (o.mux > 0) ctx.summary.subscriptions = (await ctx.pool.freshProgress()).subscriptions;
  return opened;
}

/** A publisher into each of the scenario's rooms at the options' rate, payload and publishes in flight. */
export function roomPublisher(ctx: ScenarioContext): Publisher {
  const o = ctx.options;
  return new Publisher(ctx.http, { rooms: ctx.rooms, rate: o.rate, payloadBytes: o.payloadBytes, mode: { kind: "room" }, concurrency: o.publishers });
}

/** Where a measured phase started: the sampler mark and the clients' counts at that moment. */
export interface PhaseStart {
  sample: TimelineSample;
  progress: PoolProgress;
}

/**
 * Ends a publishing phase: collects every client's ledger against what was
 * accepted (`ranges`), and writes the publisher, delivery, CPU and settlement
 * figures for the interval from `start` to `end`.
 */
export async function settleAndSummarize(
  ctx: ScenarioContext,
  publisher: Publisher,
  ranges: Record<string, PublishedRange[]>,
  start: PhaseStart,
  end: PhaseStart,
  /** False when the interval mixes in other work (reconnect storms): no per-delivery cost then. */
  costPerDelivery = true,
): Promise<PoolSettled> {
  const settled = await ctx.pool.settle(ranges);
  const interval = intervalBetween(start.sample, end.sample);
  publisherSummary(ctx, publisher);
  // The headline latency and loss are the fast clients' (in `slow`, the question is whether the slow ones hurt them).
  const allReached = settled.allReachedMs.summary();
  if (allReached.count > 0) {
    ctx.summary.allReachedP50Ms = allReached.p50;
    ctx.summary.allReachedP99Ms = allReached.p99;
    ctx.details.allReachedMs = allReached;
  }
  deliverySummary(ctx, settled.fast, interval, end.progress.events - start.progress.events, end.progress.frames - start.progress.frames, costPerDelivery);
  cpuSummary(ctx, interval);
  settledDetails(ctx, settled);
  return settled;
}
