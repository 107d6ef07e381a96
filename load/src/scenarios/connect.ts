import { sleep } from "../kit/time";
import { intervalBetween, type TimelineSample } from "../target/sampler";
import { cpuSummary, openSockets, remainingMs, settledDetails, type Scenario, type ScenarioContext } from "./common";

/**
 * Multiplexed connections, once open and idle: every one of them sends all its
 * subscribes at once. Returns the sample that ends the connections' own share
 * of memory (taken before the storm), so what follows is the subscriptions'.
 */
async function subscribeStorm(ctx: ScenarioContext): Promise<TimelineSample> {
  await sleep(2000); // the handshakes' garbage settles before the connections' own memory is read
  const connected = ctx.sampler.mark("connected");
  const storm = await ctx.pool.subscribeAll(Math.max(10_000, Math.min(120_000, remainingMs(ctx) - 20_000)));
  const after = ctx.sampler.mark("subscribed");
  const s = ctx.summary;
  s.subscriptions = storm.subscribed;
  if (storm.allSubscribedMs !== undefined) s.allSubscribedMs = storm.allSubscribedMs;
  const iv = intervalBetween(connected, after);
  ctx.details.subscribeStorm = { ...storm, serverCpuUs: iv.serverCpuUs };
  if (storm.subscribed < storm.asked) ctx.notes.push(`${storm.asked - storm.subscribed} of ${storm.asked} subscriptions were not made (${JSON.stringify(storm.refusals)})`);
  if (storm.closed) ctx.notes.push(`${storm.closed} connections closed during the subscribe storm`);
  return connected;
}

/**
 * Opens N sockets in waves with a bounded number of handshakes in flight, then
 * holds them idle. Reports handshake rate per wave, failures by cause, and
 * what an idle connection costs the server (RSS, descriptors) and the machine.
 */
export const connectScenario: Scenario = async (ctx) => {
  const o = ctx.options;
  ctx.summary.socketsRequested = o.sockets;
  await sleep(1000); // let the server's own start-up settle before the baseline sample
  const idle = ctx.sampler.mark("idle");
  const opened = await openSockets(ctx, o.sockets, o.wave);
  cpuSummary(ctx, intervalBetween(opened.before, opened.after));
  if (opened.ok === 0) throw new Error(`no socket connected (${JSON.stringify(opened.failures)})`);

  const connected = o.mux > 0 ? await subscribeStorm(ctx) : undefined;
  ctx.sampler.mark("hold");
  await sleep(Math.min(o.holdSeconds * 1000, remainingMs(ctx) - 10_000));
  const progress = await ctx.pool.freshProgress();
  const held = ctx.sampler.mark("held");
  const open = progress.open;
  const iv = intervalBetween(idle, held);
  const s = ctx.summary;
  if (connected && open > 0) {
    // A multiplexed connection's memory before it follows anything, then each subscription's (the rooms' objects included).
    const own = intervalBetween(idle, connected).serverRssDelta;
    const followed = intervalBetween(connected, held).serverRssDelta;
    if (own !== undefined) s.idleMemoryPerConnectionBytes = own / open;
    if (followed !== undefined && progress.subscriptions > 0) s.idleMemoryPerSubscriptionBytes = followed / progress.subscriptions;
  }
  if (open > 0) {
    if (iv.serverRssDelta !== undefined && !connected) s.idleMemoryPerConnectionBytes = iv.serverRssDelta / open;
    if (iv.serverFdsDelta !== undefined) s.serverFdsPerConnection = iv.serverFdsDelta / open;
    const clientGrowth = held.client && idle.client ? held.client.rssBytes - idle.client.rssBytes : 0;
    // Machine-wide figures: other processes move them too, so only a plausible (positive) one is reported.
    const system = (iv.memAvailableDrop - clientGrowth) / open;
    if (system > 0) s.systemMemoryPerConnectionBytes = system;
    else ctx.notes.push("MemAvailable moved more because of other processes than because of this run; no system memory figure");
    if (iv.tcpMemDelta > 0) s.kernelTcpMemoryPerConnectionBytes = iv.tcpMemDelta / open;
  }
  ctx.details.heldOpen = open;
  if (open < opened.ok) ctx.notes.push(`${opened.ok - open} sockets closed while being held idle`);

  const settled = await ctx.pool.settle({});
  settledDetails(ctx, settled);
  const hs = settled.handshakeMs.summary();
  if (hs.count) {
    s.handshakeP50Ms = hs.p50;
    s.handshakeP99Ms = hs.p99;
  }
  const welcome = settled.welcomeMs.summary();
  if (welcome.count) s.welcomeP99Ms = welcome.p99;
};
