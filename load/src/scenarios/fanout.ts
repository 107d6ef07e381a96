import { sleep, waitFor } from "../kit/time";
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
 * R rooms × N sockets and a publisher at a fixed rate. Latency is receive time
 * minus the message's `ts`, matched by room and seq; anything not received
 * within the deadline is lost and kept out of the percentiles.
 */
export const fanoutScenario: Scenario = async (ctx) => {
  const o = ctx.options;
  await openScenarioSockets(ctx);

  const publisher = roomPublisher(ctx);
  const p0 = await ctx.pool.freshProgress();
  const s0 = ctx.sampler.mark("publish");
  publisher.start();
  const publishFor = publishWindowMs(ctx, o.deadlineMs + 15_000);
  const publishEnd = Date.now() + publishFor;
  while (Date.now() < publishEnd) {
    await sleep(250);
    ctx.progress.setExtra(`published ${publisher.stats.accepted}`);
  }
  await publisher.stop();

  ctx.sampler.mark("drain");
  const last = publisher.lastSeqByRoom();
  const allIn = await waitFor(() => caughtUp(ctx.pool, last), Math.min(o.deadlineMs + 1000, remainingMs(ctx)));
  const p1 = await ctx.pool.freshProgress();
  const s1 = ctx.sampler.mark("settle");
  if (!allIn) ctx.notes.push("not every client had the last message when the deadline passed");

  await settleAndSummarize(ctx, publisher, publisher.ranges(), { sample: s0, progress: p0 }, { sample: s1, progress: p1 });
};
