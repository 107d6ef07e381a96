import { fullJitter, type BackoffPolicy } from "../../common/jitter";
import { logEvent } from "../../common/log";
import type { RoomCounters } from "../engine/counters";
import type { WebhookDeadLetters } from "./webhook-dead-letters";
import type { WebhookFormat } from "./webhook-format";
import type { WebhookOutbox } from "./webhook-outbox";

export interface DeliveryOptions {
  /** WEBHOOK_URL (or PUSHER_WEBHOOK_URL): the only address a request goes to (redirects are not followed). */
  url: string;
  /** The var that names it: said in errors instead of the address, which may hold credentials. */
  urlVar: string;
  /** The body and the signature of a request around the stored events. */
  format: WebhookFormat;
  /** WEBHOOK_BATCH_MAX_EVENTS: events per request. */
  batchMaxEvents: number;
  /** WEBHOOK_RETRY_SECONDS in ms: an event undelivered this long after it was recorded becomes a dead letter. */
  retryMs: number;
  /** WEBHOOK_BACKOFF_MAX_MS: the longest wait between two attempts. */
  backoffMaxMs: number;
  room(): string;
}

/** A receiver has this long to answer a request. */
export const REQUEST_TIMEOUT_MS = 10_000;
/** Bytes of events per request at most (a single larger row still goes alone). */
const REQUEST_MAX_BYTES = 1024 * 1024;
/** Requests one alarm sends at most, and for how long it keeps sending: an alarm is not a worker that never ends. */
const ROUND_REQUESTS = 20;
const ROUND_MS = 15_000;
/**
 * A row is sent once it is this old: events of the next turns join it
 * meanwhile, so a busy room sends fewer, larger requests and deletes fewer
 * rows (each delete is a row written), for a tenth of a second of latency.
 */
export const DELIVERY_HOLD_MS = 100;
/** The first retry waits up to a second; every failure doubles the ceiling. A retry never comes sooner than the floor. */
const BACKOFF_BASE_MS = 1000;
const RETRY_FLOOR_MS = 250;

/**
 * Sends a room's outbox to WEBHOOK_URL (PUSHER_WEBHOOK_URL for a Pusher channel's room), from the room's alarm (the sweeper
 * asks `dueAt` and runs `run`): an alarm wakes a hibernated room for as long
 * as the requests take, and no timer keeps it awake in between.
 *
 * - In order: one request at a time per room, each carrying the oldest
 *   undelivered rows; a failed request is retried before anything after it
 *   is sent. At least once: the rows are deleted only after a 2xx answer, so
 *   a room that stops between the answer and the delete sends them again.
 * - Retries back off exponentially with full jitter (common/jitter.ts), from
 *   a ceiling of 1 s up to WEBHOOK_BACKOFF_MAX_MS; any answer but 2xx, a
 *   network error and no answer within REQUEST_TIMEOUT_MS are failures.
 * - Events still undelivered WEBHOOK_RETRY_SECONDS after they were recorded
 *   become dead letters (WebhookDeadLetters) before the next attempt.
 * - Each request's body and signature are its format's (webhook-format.ts):
 *   this service's own (signed when WEBHOOK_SECRET is set) or Pusher's.
 */
export class WebhookDelivery {
  readonly #outbox: WebhookOutbox;
  readonly #deadLetters: WebhookDeadLetters;
  readonly #counters: RoomCounters;
  readonly #options: DeliveryOptions;
  readonly #backoff: BackoffPolicy;
  #failures = 0;
  #nextAttemptAt = 0;
  #lastError: string | null = null;
  #sending = false;

  constructor(outbox: WebhookOutbox, deadLetters: WebhookDeadLetters, counters: RoomCounters, options: DeliveryOptions) {
    this.#outbox = outbox;
    this.#deadLetters = deadLetters;
    this.#counters = counters;
    this.#options = options;
    this.#backoff = { baseMs: BACKOFF_BASE_MS, maxMs: Math.max(BACKOFF_BASE_MS, options.backoffMaxMs) };
  }

  get failures(): number {
    return this.#failures;
  }

  get lastError(): string | null {
    return this.#lastError;
  }

  /** When the next request is due after a failure, or null when none failed. */
  get nextAttemptAt(): number | null {
    return this.#failures > 0 ? this.#nextAttemptAt : null;
  }

  /** When the alarm should send (null: nothing to send, or a request is out and its end decides). */
  dueAt(now: number): number | null {
    const oldest = this.#outbox.oldest();
    if (this.#sending || !oldest) return null;
    return Math.max(now, this.#nextAttemptAt, oldest.opened + DELIVERY_HOLD_MS);
  }

  /** Sends what is due, oldest first, until the outbox is empty, a request fails, or the round is over. */
  async run(now: number): Promise<void> {
    const due = this.dueAt(now);
    if (due === null || now < due) return;
    this.#sending = true;
    const started = Date.now();
    try {
      for (let sent = 0; sent < ROUND_REQUESTS && Date.now() - started < ROUND_MS; sent++) {
        this.#expire(Date.now());
        // Rows written since the round began wait out their hold like any other (the next alarm takes them).
        const oldest = this.#outbox.oldest();
        if (!oldest || oldest.opened + DELIVERY_HOLD_MS > Date.now()) break;
        const batch = this.#outbox.peek(this.#options.batchMaxEvents, REQUEST_MAX_BYTES);
        if (!batch) break;
        this.#outbox.sending(batch.lastRow);
        const failure = await this.#post(batch.events);
        this.#outbox.sending(0);
        if (failure !== null) {
          this.#failed(failure, batch.count);
          break;
        }
        const { events, rowsWritten } = this.#outbox.delivered(batch.lastRow);
        this.#counters.webhookSent(events, true, rowsWritten);
        this.#failures = 0;
        this.#nextAttemptAt = 0;
        this.#lastError = null;
      }
    } finally {
      this.#sending = false;
      this.#outbox.sending(0);
    }
  }

  /** After the room gave its storage back (deleteAll). */
  reset(): void {
    this.#failures = 0;
    this.#nextAttemptAt = 0;
    this.#lastError = null;
  }

  #failed(failure: string, events: number): void {
    this.#counters.webhookSent(0, false, 0);
    this.#failures += 1;
    this.#lastError = failure;
    this.#nextAttemptAt = Date.now() + RETRY_FLOOR_MS + fullJitter(this.#failures - 1, this.#backoff);
    logEvent("webhook_failed", { room: this.#options.room(), events, failures: this.#failures, error: failure, retryAt: this.#nextAttemptAt });
  }

  /** Rows older than the retry window become dead letters (rows are in time order: only the oldest are looked at). */
  #expire(now: number): void {
    for (let oldest = this.#outbox.oldest(); oldest && oldest.closed < now - this.#options.retryMs; oldest = this.#outbox.oldest()) {
      const taken = this.#outbox.takeOldest();
      if (!taken) return;
      const rows = this.#deadLetters.keep("expired", taken.count, taken.events, now);
      this.#counters.webhookDead(taken.count, taken.rowsWritten + rows);
      logEvent("webhook_dead_letter", { room: this.#options.room(), events: taken.count, reason: "expired" });
    }
  }

  /** One request carrying `events` (stored texts); null when the receiver acknowledged it, else why not. */
  async #post(events: string): Promise<string | null> {
    const { body, headers } = await this.#options.format.request(events, Date.now());
    try {
      const response = await fetch(this.#options.url, {
        method: "POST",
        body,
        headers,
        // A redirect could name any address: the configured one is the only one spoken to.
        redirect: "manual",
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      await response.body?.cancel();
      return response.ok ? null : `status ${response.status}`;
    } catch (error) {
      if (error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")) return "timeout";
      // Messages can quote the address, and the address can hold credentials.
      return `network error: ${String(error instanceof Error ? error.message : error).split(this.#options.url).join(this.#options.urlVar)}`;
    }
  }
}
