import { backoffCeiling as ceiling, fullJitter } from "../../common/jitter.js";

/**
 * How long to wait between reconnect attempts: a random delay below
 * min(maxDelayMs, initialDelayMs * factor^attempt). The clients' `backoff`
 * option takes any of these fields; the rest keep their defaults.
 *
 * @see client-sdk/README.md#options
 */
export interface BackoffOptions {
  /**
   * Upper bound of the first delay, milliseconds.
   * @default 1000
   */
  initialDelayMs: number;
  /**
   * No delay is ever longer than this, milliseconds.
   * @default 30_000
   */
  maxDelayMs: number;
  /**
   * Growth of the upper bound per failed attempt.
   * @default 2
   */
  factor: number;
}

/** The clients' backoff when their `backoff` option leaves a field out. */
export const DEFAULT_BACKOFF: Readonly<BackoffOptions> = {
  initialDelayMs: 1000,
  maxDelayMs: 30_000,
  factor: 2,
};

/**
 * The largest delay `backoffDelay` can return for `attempt` (0 = first retry).
 *
 * @param attempt failed attempts before this one (0 = first retry).
 * @param options the backoff.
 * @returns min(maxDelayMs, initialDelayMs * factor^attempt), milliseconds.
 *
 * @example
 * ```ts
 * backoffCeiling(3, DEFAULT_BACKOFF); // 8000
 * ```
 *
 * @see client-sdk/README.md#options
 */
export function backoffCeiling(attempt: number, options: BackoffOptions): number {
  return ceiling(attempt, { baseMs: options.initialDelayMs, maxMs: options.maxDelayMs, factor: options.factor });
}

/**
 * Exponential backoff with full jitter: a uniformly random delay in
 * [0, min(max, initial * factor^attempt)). Full jitter spreads a crowd of
 * clients dropped at the same moment (a deploy, a restart) over the whole
 * window instead of having them return in synchronized waves.
 *
 * @param attempt failed attempts before this one (0 = first retry).
 * @param options the backoff.
 * @param [random=Math.random] a source of numbers in [0, 1).
 * @returns the delay, milliseconds.
 *
 * @example
 * ```ts
 * const delay = backoffDelay(attempt, { ...DEFAULT_BACKOFF, maxDelayMs: 5000 });
 * setTimeout(reconnect, delay);
 * ```
 *
 * @see client-sdk/README.md#options
 */
export function backoffDelay(attempt: number, options: BackoffOptions, random: () => number = Math.random): number {
  return fullJitter(attempt, { baseMs: options.initialDelayMs, maxMs: options.maxDelayMs, factor: options.factor }, random);
}
