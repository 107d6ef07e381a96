import { sleep, waitFor } from "../kit/time";
import { CloseCode } from "../../../protocol";
import { lostOf } from "../stats/ledger";
import {
  caughtUp,
  openScenarioSockets,
  publishWindowMs,
  remainingMs,
  roomPublisher,
  roomStats,
  type Scenario,
  settleAndSummarize,
} from "./common";

interface StatsRow {
  t: number;
  rows: Array<Record<string, number | string>>;
}

function sumField(rows: Array<Record<string, number | string>>, field: string): number | undefined {
  let total: number | undefined;
  for (const row of rows) {
    const v = row[field];
    if (typeof v === "number") total = (total ?? 0) + v;
  }
  return total;
}

/**
 * Like fanout, but a share of the clients stop reading their sockets (the
 * kernel buffers fill, acks stop). Reports what the other clients see — their
 * latency and loss should not move — and when and how the server closed the
 * slow ones, from both the clients' and the server's point of view.
 */
export const slowScenario: Scenario = async (ctx) => {
  const o = ctx.options;
  await openScenarioSockets(ctx);

  const publisher = roomPublisher(ctx);
  const p0 = await ctx.pool.freshProgress();
  const s0 = ctx.sampler.mark("publish+stall");
  const stallAt = Date.now();
  ctx.pool.stall();
  publisher.start();

  const statsTimeline: StatsRow[] = [];
  const publishFor = publishWindowMs(ctx, o.deadlineMs + 20_000);
  const publishEnd = stallAt + publishFor;
  const resumeAt = stallAt + Math.min(o.stallSeconds * 1000, publishFor);
  let resumed = false;
  while (Date.now() < publishEnd) {
    statsTimeline.push({ t: Date.now() - stallAt, rows: await roomStats(ctx) });
    if (!resumed && Date.now() >= resumeAt) {
      ctx.pool.resume();
      ctx.sampler.mark("resumed");
      resumed = true;
    }
    ctx.progress.setExtra(`published ${publisher.stats.accepted}${resumed ? "" : " (slow clients stalled)"}`);
    await sleep(Math.min(1000, Math.max(0, publishEnd - Date.now())));
  }
  await publisher.stop();
  if (!resumed) {
    ctx.pool.resume();
    ctx.sampler.mark("resumed");
  }

  ctx.sampler.mark("drain");
  const last = publisher.lastSeqByRoom();
  const allIn = await waitFor(() => caughtUp(ctx.pool, last), Math.min(o.deadlineMs + 5000, remainingMs(ctx)));
  statsTimeline.push({ t: Date.now() - stallAt, rows: await roomStats(ctx) });
  const p1 = await ctx.pool.freshProgress();
  const s1 = ctx.sampler.mark("settle");
  if (!allIn) ctx.notes.push("not every client that should keep up had the last message when the deadline passed");

  const settled = await settleAndSummarize(ctx, publisher, publisher.ranges(), { sample: s0, progress: p0 }, { sample: s1, progress: p1 });

  const s = ctx.summary;
  s.slowClients = settled.slow.clients;
  s.slowLost = lostOf(settled.slow.totals);
  const slowLatency = settled.slow.latency.summary();
  if (slowLatency.count) s.slowLatencyP99Ms = slowLatency.p99;
  const slowCloses = settled.closeRecords.filter((r) => r.group === "slow");
  const fastCloses = settled.closeRecords.filter((r) => r.group === "fast");
  s.slowClosed = slowCloses.length;
  const byCode = (records: typeof slowCloses): Record<string, number> =>
    records.reduce<Record<string, number>>((acc, r) => ((acc[r.code] = (acc[r.code] ?? 0) + 1), acc), {});
  const closeTimes = slowCloses.map((r) => (r.at - stallAt) / 1000).sort((a, b) => a - b);

  // Server-side view: the first time the room stats counted a kick, and how many sockets were behind.
  const firstWith = (field: string): number | undefined => statsTimeline.find((row) => (sumField(row.rows, field) ?? 0) > 0)?.t;
  const firstKick = firstWith("kicks");
  if (firstKick !== undefined) s.slowClosedAfterS = firstKick / 1000;
  const lastRows = statsTimeline[statsTimeline.length - 1]?.rows ?? [];
  const behind = statsTimeline.map((row) => sumField(row.rows, "behind") ?? 0);
  if (behind.length) s.serverBehindPeak = Math.max(...behind);
  const catchUp = sumField(lastRows, "catchUpFrames");
  if (catchUp !== undefined) s.serverCatchUpFrames = catchUp;
  const buffered = statsTimeline.map((row) => sumField(row.rows, "bufferedBytes") ?? 0);
  if (buffered.some((b) => b > 0)) s.serverBufferedPeakBytes = Math.max(...buffered);

  ctx.details.slow = {
    clients: settled.slow.clients,
    totals: settled.slow.totals,
    latencyMs: slowLatency,
    closesByCode: byCode(slowCloses),
    closeSeenAtSeconds: closeTimes.length
      ? { first: closeTimes[0], median: closeTimes[Math.floor(closeTimes.length / 2)], last: closeTimes[closeTimes.length - 1] }
      : null,
    stalledForSeconds: Math.min(o.stallSeconds, publishFor / 1000),
    note: "a stalled client sees its close only after it reads again, so close times seen by clients are at or after the resume; the server-side kick time comes from the room stats",
  };
  ctx.details.fastCloses = byCode(fastCloses);
  ctx.details.roomStatsTimeline = statsTimeline.map((row) => ({
    t: row.t,
    behind: sumField(row.rows, "behind"),
    kicks: sumField(row.rows, "kicks"),
    bufferedBytes: sumField(row.rows, "bufferedBytes"),
    connections: sumField(row.rows, "connections"),
  }));
  if (fastCloses.length) ctx.notes.push(`${fastCloses.length} clients that kept reading were closed too (${JSON.stringify(byCode(fastCloses))})`);
  const slowKicked = slowCloses.filter((r) => r.code === CloseCode.SLOW_CONSUMER).length;
  if (settled.slow.clients > 0 && slowKicked === 0) {
    ctx.notes.push("no slow client was closed with 4008 SLOW_CONSUMER: this server keeps buffering for them (watch its memory)");
  }
};
