import { intervalBetween } from "../target/sampler";
import { cpuSummary, openSockets, remainingMs, settledDetails, sleep, type Scenario } from "./common";

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

  ctx.sampler.mark("hold");
  await sleep(Math.min(o.holdSeconds * 1000, remainingMs(ctx) - 10_000));
  const progress = await ctx.pool.freshProgress();
  const held = ctx.sampler.mark("held");
  const open = progress.open;
  const iv = intervalBetween(idle, held);
  const s = ctx.summary;
  if (open > 0) {
    if (iv.serverRssDelta !== undefined) s.idleMemoryPerConnectionBytes = iv.serverRssDelta / open;
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
