/** Waiting and pacing, for every part of the load tool. */

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

/** Polls `condition` until it holds or `timeoutMs` is up; returns whether it held. */
export async function waitFor(condition: () => boolean, timeoutMs: number, pollMs = 100): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (condition()) return true;
    await sleep(pollMs);
  }
  return condition();
}

export interface PaceOptions {
  /** Items in progress at once (default: all of them). */
  concurrency?: number;
  /** Items started per second: item i starts no earlier than i ÷ rate s after the first (default: no pacing). */
  rate?: number;
  /** Checked before each item: true stops taking new ones. */
  stop?: () => boolean;
}

/**
 * Runs `work(i)` for i in [0, count), at most `concurrency` at a time and, with
 * `rate`, on a schedule that does not drift: a late item starts at once rather
 * than pushing every later one back.
 */
export async function paced(count: number, options: PaceOptions, work: (i: number) => Promise<void>): Promise<void> {
  const { concurrency = count, rate, stop } = options;
  const t0 = performance.now();
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < count && !stop?.()) {
      const i = next++;
      if (rate !== undefined) await sleep(t0 + (i * 1000) / rate - performance.now());
      await work(i);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, count)) }, lane));
}
