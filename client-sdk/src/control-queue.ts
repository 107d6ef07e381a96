import type { OutboxTransport } from "./outbox.js";
import type { RateBudget } from "./rate-budget.js";

/** A frame of the connection's own, waiting for its budgets. */
interface ControlFrame {
  /** The frame's text, made when it goes; null when it is no longer wanted (a room left before its subscribe went). */
  text(): string | null;
  /** A further budget it needs beside the connection's frame budget (subscribes: the connection's subscribe rate). */
  paced: RateBudget | undefined;
  /** It went out. */
  sent: (() => void) | undefined;
}

/**
 * The frames a multiplexed connection sends for itself (subscribe,
 * unsubscribe, auth), in order, inside the connection's frame budget (which
 * publishes spend too) and, for subscribes, its subscribe budget. They mean
 * something only on the connection they were made for, so the queue is
 * emptied when it ends; the next connection asks for its rooms afresh.
 */
export class ControlQueue {
  #transport: OutboxTransport;
  #budget: RateBudget;
  #queued: ControlFrame[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;

  /** @param budget the connection's frame budget, shared with its Outbox. */
  constructor(transport: OutboxTransport, budget: RateBudget) {
    this.#transport = transport;
    this.#budget = budget;
  }

  /** Queues a frame; it goes as soon as its budgets allow. */
  push(text: () => string | null, paced?: RateBudget, sent?: () => void): void {
    this.#queued.push({ text, paced, sent });
    this.pump();
  }

  /** Sends queued frames as far as the budgets allow; retries when they have refilled. */
  pump(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (!this.#transport.writable) return;
    while (this.#queued.length > 0) {
      const next = this.#queued[0]!;
      const text = next.text();
      if (text === null) {
        this.#queued.shift();
        continue;
      }
      const wait = Math.max(this.#budget.wait(), next.paced?.wait() ?? 0);
      if (wait > 0) {
        this.#timer = setTimeout(() => this.pump(), wait);
        return;
      }
      if (!this.#transport.send(text)) return;
      this.#queued.shift();
      this.#budget.spend();
      next.paced?.spend();
      next.sent?.();
    }
  }

  /** The connection ended: what it had not sent is not for the next one. */
  clear(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#queued = [];
  }
}
