import { sleep, waitFor } from "../kit/time";
import { Publisher } from "../publisher";
import type { PublishedRange } from "../stats/ledger";
import {
  caughtUp,
  openScenarioSockets,
  publishWindowMs,
  remainingMs,
  type Scenario,
  settleAndSummarize,
} from "./common";

/**
 * One HTTP call publishes into many rooms through the coordinator:
 * POST /broadcast {"data", "rooms": [...]} or {"data", "prefix"}. Each room
 * numbers the message with its own seq, so every socket is matched by its
 * room and seq exactly as in fanout.
 */
export const broadcastScenario: Scenario = async (ctx) => {
  const o = ctx.options;
  const opened = await openScenarioSockets(ctx);

  const select = o.select === "prefix" ? { prefix: ctx.roomPrefix } : { rooms: ctx.rooms };
  const publisher = new Publisher(ctx.http, { rooms: ctx.rooms, rate: o.rate, payloadBytes: o.payloadBytes, mode: { kind: "broadcast", select } });
  const p0 = await ctx.pool.freshProgress();
  const s0 = ctx.sampler.mark("broadcast");
  publisher.start();
  const publishEnd = Date.now() + publishWindowMs(ctx, o.deadlineMs + 15_000);
  while (Date.now() < publishEnd && !publisher.fatal) {
    await sleep(250);
    ctx.progress.setExtra(`broadcasts ${publisher.stats.accepted}`);
  }
  await publisher.stop();
  if (publisher.fatal) throw new Error(publisher.fatal);

  // Rooms were fresh: each accepted broadcast is the next seq after the welcome's.
  const accepted = publisher.stats.accepted;
  const ranges: Record<string, PublishedRange[]> = {};
  const last: Record<string, number> = {};
  for (const room of ctx.rooms) {
    const base = opened.welcomeSeqByRoom[room];
    if (base === undefined || accepted === 0) continue;
    ranges[room] = [{ first: base + 1, last: base + accepted }];
    last[room] = base + accepted;
  }
  ctx.sampler.mark("drain");
  const allIn = await waitFor(() => caughtUp(ctx.pool, last), Math.min(o.deadlineMs + 1000, remainingMs(ctx)));
  const p1 = await ctx.pool.freshProgress();
  const s1 = ctx.sampler.mark("settle");
  if (!allIn) ctx.notes.push("not every client had the last broadcast when the deadline passed");

  await settleAndSummarize(ctx, publisher, ranges, { sample: s0, progress: p0 }, { sample: s1, progress: p1 });
  ctx.details.broadcast = { select: o.select, rooms: ctx.rooms.length, broadcastsAccepted: accepted };
};
