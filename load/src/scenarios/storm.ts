import { sleep, waitFor } from "../kit/time";
import { DEFAULTS } from "../../../common/settings";
import {
  caughtUp,
  openScenarioSockets,
  publishWindowMs,
  remainingMs,
  roomPublisher,
  type Scenario,
  settleAndSummarize,
} from "./common";

/**
 * Every connection is dropped at once — by the clients (network drop), or by
 * restarting the server — while the publisher keeps going. Clients reconnect
 * with full-jitter backoff and resume with `since`. Reports how long until
 * everyone was back and how many messages were lost (0 expected within the
 * history window).
 */
export const stormScenario: Scenario = async (ctx) => {
  const o = ctx.options;
  if (o.dropMode === "server" && !ctx.spawned) {
    throw new Error("--mode server restarts the server, so the tool must have started it: add --spawn (or use --baseline-only)");
  }
  await openScenarioSockets(ctx);

  const publisher = roomPublisher(ctx);
  const p0 = await ctx.pool.freshProgress();
  const s0 = ctx.sampler.mark("publish");
  const startedAt = Date.now();
  publisher.start();
  const publishFor = publishWindowMs(ctx, o.deadlineMs + 30_000);
  await sleep(Math.min(o.dropAtSeconds * 1000, publishFor));

  const dropAt = Date.now();
  ctx.sampler.mark(o.dropMode === "server" ? "server restart" : "drop");
  let restartMs: number | undefined;
  if (o.dropMode === "client") {
    ctx.pool.drop(dropAt);
  } else {
    ctx.pool.markDrop(dropAt);
    await ctx.spawned?.restart();
    restartMs = Date.now() - dropAt;
    ctx.sampler.setServerPid(ctx.spawned?.pid);
    ctx.sampler.mark("restarted");
  }

  // Wait for everyone to come back while the publisher keeps going (a little past --duration if needed).
  const publishEnd = startedAt + publishFor;
  const backDeadline = Math.min(publishEnd + 30_000, Date.now() + remainingMs(ctx) - o.deadlineMs - 10_000);
  await sleep(600); // every process reports the drop before we ask whether all are back
  for (;;) {
    const progress = ctx.pool.progress();
    const allBack = progress.reconnecting === 0;
    const now = Date.now();
    if (now >= publishEnd && (allBack || now >= backDeadline)) break;
    ctx.progress.setExtra(`published ${publisher.stats.accepted}${allBack ? " all back" : ` waiting for ${progress.reconnecting}`}`);
    await sleep(250);
  }
  await publisher.stop();

  ctx.sampler.mark("drain");
  const last = publisher.lastSeqByRoom();
  const allIn = await waitFor(() => caughtUp(ctx.pool, last), Math.min(o.deadlineMs + 1000, remainingMs(ctx)));
  const p1 = await ctx.pool.freshProgress();
  const s1 = ctx.sampler.mark("settle");
  if (!allIn) ctx.notes.push("not every client had the last message when the deadline passed");

  // Reconnect handshakes and replays share the interval: a per-delivery cost would mislead here.
  const settled = await settleAndSummarize(ctx, publisher, publisher.ranges(), { sample: s0, progress: p0 }, { sample: s1, progress: p1 }, false);
  if (o.dropMode === "server") delete ctx.summary.serverCpuPercent; // two server processes in one interval

  const s = ctx.summary;
  const r = settled.reconnect;
  if (r.lastBackAt >= dropAt) s.allBackMs = r.lastBackAt - dropAt;
  const downtime = r.downtimeMs.summary();
  if (downtime.count) {
    s.downtimeP50Ms = downtime.p50;
    s.downtimeP99Ms = downtime.p99;
  }
  s.notBack = r.notBack;
  s.reconnectAttempts = r.attempts;
  s.reconnectFailures = Object.values(r.failures).reduce((a, b) => a + b, 0);
  const generations = Object.values(publisher.ranges()).reduce((n, gens) => Math.max(n, gens.length), 0);
  ctx.details.storm = {
    mode: o.dropMode,
    dropAfterSeconds: (dropAt - startedAt) / 1000,
    serverRestartMs: restartMs,
    reconnectFailuresByCause: r.failures,
    downtimeMs: downtime,
    backoff: { baseMs: o.backoffBaseMs, maxMs: o.backoffMaxMs, jitter: "full" },
    historyGenerations: generations,
  };
  if (generations > 1) {
    ctx.notes.push("the room's seq restarted after the drop: the server lost its history (new epoch), so messages from before could not be resumed");
  }
  const perRoomDuringOutage = o.rate * ((s.allBackMs ?? 0) / 1000);
  if (perRoomDuringOutage > DEFAULTS.HISTORY_MAX_MESSAGES) {
    ctx.notes.push(`about ${Math.round(perRoomDuringOutage)} messages per room were published during the outage, more than the history holds (${DEFAULTS.HISTORY_MAX_MESSAGES}): losses are expected`);
  }
  if ((s.lostNever ?? 0) > 0) ctx.notes.push(`${s.lostNever} deliveries never arrived; within the history window this should be 0`);
};
