import { backoffCeiling as ceiling, fullJitter } from "../../common/jitter.js";

/** How long to wait between reconnect attempts. */
export interface BackoffOptions {
  /** Upper bound of the first delay, milliseconds. */
  initialDelayMs: number;
  /** No delay is ever longer than this, milliseconds. */
  maxDelayMs: number;
  /** Growth of the upper bound per failed attempt. */
  factor: number;
}

export const DEFAULT_BACKOFF: Readonly<BackoffOptions> = {
  initialDelayMs: 1000,
  maxDelayMs: 30_000,
  factor: 2,
};

/** The largest delay `backoffDelay` can return for `attempt` (0 = first retry). */
export function backoffCeiling(attempt: number, options: BackoffOptions): number {
  return ceiling(attempt, { baseMs: options.initialDelayMs, maxMs: options.maxDelayMs, factor: options.factor });
}

/**
 * Exponential backoff with full jitter: a uniformly random delay in
 * [0, min(max, initial * factor^attempt)). Full jitter spreads a crowd of
 * clients dropped at the same moment (a deploy, a restart) over the whole
 * window instead of having them return in synchronized waves.
 */
export function backoffDelay(attempt: number, options: BackoffOptions, random: () => number = Math.random): number {
  return fullJitter(attempt, { baseMs: options.initialDelayMs, maxMs: options.maxDelayMs, factor: options.factor }, random);
}
