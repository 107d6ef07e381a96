/** How long to wait before trying again: exponential backoff with full jitter, for every retry in the project. */

export interface BackoffPolicy {
  /** Upper bound of the first delay, milliseconds. */
  baseMs: number;
  /** No delay is ever longer than this, milliseconds. */
  maxMs: number;
  /** Growth of the upper bound per failed attempt (default 2). */
  factor?: number;
}

/** The largest delay `fullJitter` can return for `attempt` (0 = the first retry). */
export function backoffCeiling(attempt: number, policy: BackoffPolicy): number {
  // The exponent is clamped so a long outage cannot overflow to Infinity.
  const grown = policy.baseMs * Math.pow(policy.factor ?? 2, Math.min(Math.max(0, attempt), 64));
  return Math.min(policy.maxMs, grown);
}

/**
 * A uniformly random delay in [0, min(max, base * factor^attempt)). Full
 * jitter spreads a crowd of clients dropped at the same moment (a deploy, a
 * restart) over the whole window instead of having them return in
 * synchronized waves.
 */
export function fullJitter(attempt: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  return Math.floor(random() * backoffCeiling(attempt, policy));
}
