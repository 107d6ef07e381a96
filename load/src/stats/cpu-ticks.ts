/**
 * How precise a CPU time read from /proc is. utime and stime count kernel
 * clock ticks (USER_HZ = 100 on mainstream Linux builds: 10 ms each), so the
 * CPU spent between two readings is known only to within the ticks each
 * reading truncated. A per-operation figure spreads that over its operations.
 */

/** One kernel clock tick of utime/stime, µs. */
export const CPU_TICK_US = 10_000;

/**
 * Ticks a difference of two utime+stime readings can be off by: each of
 * utime and stime loses less than one tick at each end, and the two ends
 * partly cancel, so the sum is off by less than two ticks.
 */
export const CPU_DELTA_TICKS = 2;

/** Bound on the error of the CPU time between two readings, µs. */
export function cpuDeltaUncertaintyUs(ticks: number = CPU_DELTA_TICKS): number {
  return ticks * CPU_TICK_US;
}

/**
 * ± of "CPU per operation" when `operations` shared one measured interval:
 * the interval's bound divided by the count. Undefined without operations.
 */
export function perOperationUncertaintyUs(operations: number, ticks: number = CPU_DELTA_TICKS): number | undefined {
  if (!(operations > 0) || !Number.isFinite(operations)) return undefined;
  return cpuDeltaUncertaintyUs(ticks) / operations;
}

/**
 * ± of "operations per CPU-second" (= operations / CPU): its relative error
 * is the CPU's, to first order. Undefined when no CPU time was counted, since
 * the rate is then unbounded.
 */
export function perCpuSecondUncertainty(operationsPerCpuSecond: number, cpuUs: number, ticks: number = CPU_DELTA_TICKS): number | undefined {
  if (!(cpuUs > 0) || !Number.isFinite(operationsPerCpuSecond)) return undefined;
  return operationsPerCpuSecond * (cpuDeltaUncertaintyUs(ticks) / cpuUs);
}

/** ± of a CPU share (% of one core) averaged over `seconds`. */
export function cpuPercentUncertainty(seconds: number, ticks: number = CPU_DELTA_TICKS): number | undefined {
  if (!(seconds > 0)) return undefined;
  return (cpuDeltaUncertaintyUs(ticks) / (seconds * 1e6)) * 100;
}
