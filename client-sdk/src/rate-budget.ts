/** A budget a server announces: frames per second, and the burst above it. 0 per second means no limit. */
export interface AnnouncedRate {
  perSecond: number;
  burst: number;
}

/**
 * The client's side of a rate the server enforces (a token bucket): it
 * starts from half the announced burst and refills at three quarters of the
 * announced rate, never above half the burst, which leaves room for timing
 * slack between the two clocks. Going over the server's budget costs a close
 * (4009) or a refusal, so the client keeps well under it instead.
 */
export class RateBudget {
  /** Until a server announces a rate: no limit. */
  #rate: AnnouncedRate = { perSecond: 0, burst: 1 };
  #perSecond = Number.POSITIVE_INFINITY;
  #cap = 1;
  #tokens = 1;
  #refilledAt = 0;

  /** A connection announced its budget (absent: the one announced before); it starts full again. */
  reset(rate: AnnouncedRate | undefined): void {
    this.#rate = rate ?? this.#rate;
    this.#perSecond = this.#rate.perSecond > 0 ? this.#rate.perSecond * 0.75 : Number.POSITIVE_INFINITY;
    this.#cap = Math.max(1, Math.floor(this.#rate.burst / 2));
    this.#tokens = this.#cap;
    this.#refilledAt = Date.now();
  }

  /** 0 when a frame may go now; otherwise the milliseconds until one may. */
  wait(): number {
    if (this.#perSecond === Number.POSITIVE_INFINITY) return 0;
    const now = Date.now();
    this.#tokens = Math.min(this.#cap, this.#tokens + ((now - this.#refilledAt) / 1000) * this.#perSecond);
    this.#refilledAt = now;
    return this.#tokens >= 1 ? 0 : Math.ceil(((1 - this.#tokens) / this.#perSecond) * 1000);
  }

  /** A frame went out. */
  spend(): void {
    this.#tokens -= 1;
  }
}
