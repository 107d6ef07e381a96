/**
 * The ± of per-operation CPU figures. Server CPU comes from /proc utime+stime
 * in 10 ms ticks, so "µs per delivery" over a short phase can be far less
 * precise than its digits suggest; these bounds say how far.
 */
import type { LoadReport, TargetRun, WaveRow } from "../result";
import { perCpuSecondUncertainty, perOperationUncertaintyUs } from "../stats/cpu-ticks";
import type { Summary } from "./metrics";

/** A wave row as written to JSON, with the ± of its CPU per handshake. */
export type WaveWithUncertainty = WaveRow & { serverCpuPerHandshakeUsPlusMinus?: number };

export interface MeasuredInterval {
  seconds: number;
  serverCpuUs: number;
  operations: number;
}

/**
 * The phase whose server CPU and deliveries produced `serverCpuPerDeliveryUs`:
 * the pair of phase-boundary samples for which deliveries/s × seconds and CPU
 * ÷ deliveries both reproduce the summary. Found from the timeline rather than
 * assumed, so a scenario that measures a different span is still read right;
 * undefined when no pair matches.
 */
export function deliveryInterval(run: TargetRun): MeasuredInterval | undefined {
  const perDelivery = run.summary.serverCpuPerDeliveryUs;
  const rate = run.summary.deliveriesPerSecond;
  if (perDelivery === undefined || rate === undefined || !(rate > 0)) return undefined;
  const markTimes = new Set(run.marks.map((m) => m.t));
  const boundaries = run.timeline.filter((s) => s.server && markTimes.has(s.t));
  for (let i = 0; i < boundaries.length; i++) {
    for (let j = i + 1; j < boundaries.length; j++) {
      const a = boundaries[i];
      const b = boundaries[j];
      if (!a?.server || !b?.server || b.t <= a.t) continue;
      const seconds = (b.t - a.t) / 1000;
      const serverCpuUs = b.server.cpuUs - a.server.cpuUs;
      const operations = rate * seconds;
      if (operations < 0.5) continue;
      const reproduced = serverCpuUs / operations;
      if (Math.abs(reproduced - perDelivery) <= 1e-6 * Math.max(1, perDelivery)) return { seconds, serverCpuUs, operations: Math.round(operations) };
    }
  }
  return undefined;
}

/** The ± figures a run's summary can carry, derived from the run itself. */
export function cpuUncertainties(run: TargetRun): Summary {
  const s = run.summary;
  const out: Summary = {};
  // Handshake CPU is the connect phase's CPU over the sockets accepted in it (`connected`).
  if (s.serverCpuPerHandshakeUs !== undefined && s.connected !== undefined) {
    const pm = perOperationUncertaintyUs(s.connected);
    if (pm !== undefined) out.serverCpuPerHandshakeUsPlusMinus = pm;
  }
  const interval = deliveryInterval(run);
  if (interval && s.serverCpuPerDeliveryUs !== undefined) {
    const pm = perOperationUncertaintyUs(interval.operations);
    if (pm !== undefined) out.serverCpuPerDeliveryUsPlusMinus = pm;
    if (s.deliveriesPerServerCpuSecond !== undefined) {
      const rate = perCpuSecondUncertainty(s.deliveriesPerServerCpuSecond, interval.serverCpuUs);
      if (rate !== undefined) out.deliveriesPerServerCpuSecondPlusMinus = rate;
    }
  }
  return out;
}

/** ± of one wave's CPU per handshake: the wave's CPU over its accepted handshakes. */
export function waveUncertaintyUs(wave: WaveRow): number | undefined {
  return wave.serverCpuPerHandshakeUs === undefined ? undefined : perOperationUncertaintyUs(wave.ok);
}

/**
 * Writes the ± figures into every run's summary and wave rows. Idempotent.
 * The renderers call it first, so the JSON written after the table carries
 * the same bounds the table prints.
 */
export function annotateCpuUncertainty(report: LoadReport): void {
  for (const run of report.runs) {
    Object.assign(run.summary, cpuUncertainties(run));
    for (const wave of (run.waves ?? []) as WaveWithUncertainty[]) {
      const pm = waveUncertaintyUs(wave);
      if (pm !== undefined) wave.serverCpuPerHandshakeUsPlusMinus = pm;
    }
  }
}
