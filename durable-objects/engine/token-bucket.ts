/** A budget of so many actions per second, with a burst above it. */
export interface RatePolicy {
  perSecond: number;
  burst: number;
}

/** A token bucket: starts full, refills at the policy's rate; a rate of 0 means no limit. */
export class TokenBucket {
  #tokens = -1;
  #refilledAt = 0;

  /** Takes one token; false when none is left. */
  take(now: number, policy: RatePolicy): boolean {
    if (policy.perSecond === 0) return true;
    if (this.#tokens < 0) {
      this.#tokens = policy.burst;
    } else {
      this.#tokens = Math.min(policy.burst, this.#tokens + ((now - this.#refilledAt) / 1000) * policy.perSecond);
    }
    this.#refilledAt = now;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }
}
