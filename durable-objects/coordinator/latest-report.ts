import type { RoomCounterValues } from "../../protocol";
import { logEvent } from "../../common/log";

/** Where a report's counter delta comes from, and where its success is recorded. */
export interface CounterSource {
  unreported(): RoomCounterValues | null;
  reported(delta: RoomCounterValues): void;
}

/**
 * Sends an object's reports to the coordinator one at a time and in order,
 * never blocking the object and never throwing into it. A report made while
 * another is in flight replaces any unsent one: only the latest state
 * matters. A report that fails is logged and dropped; the next heartbeat (or
 * the entry's TTL) repairs what it would have said. Each report carries the
 * counters that grew since the last report that succeeded, taken when it is
 * sent, so a failed report's delta rides on the next one.
 */
export class LatestReport<R extends object> {
  readonly #ctx: DurableObjectState;
  readonly #counters: CounterSource;
  readonly #send: (report: R & { delta: RoomCounterValues | null }) => Promise<void>;
  readonly #where: string;
  #unsent: R | null = null;
  #sending = false;

  /** `where` names the reports in error logs. */
  constructor(ctx: DurableObjectState, counters: CounterSource, where: string, send: (report: R & { delta: RoomCounterValues | null }) => Promise<void>) {
    this.#ctx = ctx;
    this.#counters = counters;
    this.#where = where;
    this.#send = send;
  }

  submit(report: R): void {
    this.#unsent = report;
    if (this.#sending) return;
    this.#sending = true;
    try {
      this.#ctx.waitUntil(this.#drain());
    } catch (error) {
      this.#sending = false;
      logEvent("error", { where: this.#where, ...report, error: String(error) });
    }
  }

  async #drain(): Promise<void> {
    try {
      while (this.#unsent) {
        const delta = this.#counters.unreported();
        const report = { ...this.#unsent, delta };
        this.#unsent = null;
        try {
          await this.#send(report);
          if (delta) this.#counters.reported(delta);
        } catch (error) {
          logEvent("error", { where: this.#where, ...report, delta: undefined, error: String(error) });
        }
      }
    } finally {
      this.#sending = false;
    }
  }
}
