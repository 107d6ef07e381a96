import { logEvent } from "../../common/log";
import { utf8Length } from "../../common/utf8";
import type { RoomCounters } from "../engine/counters";
import type { WebhookDeadLetters } from "./webhook-dead-letters";
import type { RoomChange, RoomChangeType, WebhookFormat } from "./webhook-format";
import type { OutboxEvent, WebhookOutbox } from "./webhook-outbox";
import type { WebhookRecord } from "./webhook-record";

/** A change decided and not yet written: its event's id is given, and its text made, when it is written. */
export interface RecordedEvent {
  change: RoomChange;
  ts: number;
}

export interface RecorderOptions {
  /** How events are written, and which changes are sent at all (the others are never written). */
  format: WebhookFormat;
  /** WEBHOOK_OUTBOX_MAX_ROWS: past it, the oldest rows become dead letters. */
  maxRows: number;
  room(): string;
  /** Events were written: their delivery is due. */
  recorded(): void;
}

/**
 * Writes what the room decided to tell the receiver: the events of one turn
 * as one row of the outbox (or added to the newest row waiting), with the
 * record's changes (WebhookRecord), in one transaction.
 *
 * - Presence changes live in memory, so the write of their events is their
 *   only durable trace: it happens before the turn ends (a microtask), so the
 *   turn's other writes and its outgoing frames are in the same commit, and a
 *   turn's changes, however many, cost one outbox row.
 * - A flush of messages writes its `message.published` events inside the
 *   flush's own transaction (`writeWithin`, from History.append's
 *   `alongside`): the message and its event are stored together or not at
 *   all. Events decided before it in the same turn go first.
 *
 * A write that rolls back (its transaction threw) leaves memory as it was
 * decided: its events go back to the head of the queue and are written by
 * the next write, under new ids (nobody saw the old ones). Its message
 * events do not: the flush that rolled back stored none of its messages,
 * told their publishers so, and gives their seqs to later messages.
 */
export class WebhookRecorder {
  readonly #transactionSync: (write: () => void) => void;
  readonly #outbox: WebhookOutbox;
  readonly #record: WebhookRecord;
  readonly #deadLetters: WebhookDeadLetters;
  readonly #counters: RoomCounters;
  readonly #options: RecorderOptions;
  /** A random name per instance: with the count after it, ids never repeat, whatever storage forgot. */
  readonly #instance = randomHex(12);
  #nextId = 1;
  #queue: RecordedEvent[] = [];
  /** Written in a transaction that has not been seen to commit yet. */
  #staged: { events: RecordedEvent[]; rows: number; dead: number } | null = null;
  #scheduled = false;

  constructor(
    storage: Pick<DurableObjectStorage, "transactionSync">,
    parts: { outbox: WebhookOutbox; record: WebhookRecord; deadLetters: WebhookDeadLetters },
    counters: RoomCounters,
    options: RecorderOptions,
  ) {
    this.#transactionSync = (write) => storage.transactionSync(write);
    this.#outbox = parts.outbox;
    this.#record = parts.record;
    this.#deadLetters = parts.deadLetters;
    this.#counters = counters;
    this.#options = options;
  }

  /** Whether a change of `type` is ever written. */
  sends(type: RoomChangeType): boolean {
    return this.#options.format.records(type);
  }

  /** Whether something decided waits to be written. */
  get busy(): boolean {
    return this.#queue.length > 0 || this.#record.dirty || this.#staged !== null;
  }

  /** A change to write with this turn (dropped when this deployment does not send its type). */
  record(event: RecordedEvent): void {
    if (this.sends(event.change.type)) this.#queue.push(event);
    this.schedule();
  }

  /** The record changed: it is written with this turn, events or not. */
  schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    queueMicrotask(() => {
      this.#scheduled = false;
      this.flush();
    });
  }

  /** Writes what waits, in a transaction of its own. Never throws: a failed write is retried with the next one. */
  flush(): void {
    if (!this.busy) return;
    try {
      this.#transactionSync(() => this.writeWithin([]));
      this.committed();
    } catch (error) {
      logEvent("error", { room: this.#options.room(), where: "webhook_record", error: String(error) });
    }
  }

  /**
   * Writes what waits and then `more`, inside a transaction the caller holds
   * (a flush of messages). Call `committed()` once it committed.
   */
  writeWithin(more: readonly RecordedEvent[]): void {
    if (this.#staged !== null) {
      // The last write's transaction rolled back: storage has none of it. The changes it carried
      // happened all the same; the messages did not (their flush failed with it).
      this.#queue = [...this.#staged.events.filter((e) => e.change.type !== "message.published"), ...this.#queue];
      this.#staged = null;
      this.#outbox.reload();
      this.#record.writeFailed();
    }
    for (const event of more) if (this.sends(event.change.type)) this.#queue.push(event);
    if (!this.busy) return;
    const room = this.#options.room();
    const events: RecordedEvent[] = [];
    const texts: OutboxEvent[] = [];
    for (const e of this.#queue) {
      // A change the format has no event for (a message that is no client event, in Pusher's) is dropped here.
      const text = this.#options.format.eventText(`${this.#instance}-${this.#nextId++}`, e.change, room, e.ts);
      if (text === null) continue;
      events.push(e);
      texts.push({ text, bytes: utf8Length(text) });
    }
    this.#queue = [];
    if (events.length === 0 && !this.#record.dirty) return;
    const now = Date.now();
    let rows = this.#outbox.append(texts, now) + this.#record.write();
    let dead = 0;
    while (this.#outbox.pendingRows > this.#options.maxRows) {
      // A receiver that is down for long costs bounded storage: the oldest events give way.
      const taken = this.#outbox.takeOldest();
      if (!taken) break;
      rows += taken.rowsWritten + this.#deadLetters.keep("overflow", taken.count, taken.events, now);
      dead += taken.count;
    }
    this.#staged = { events, rows, dead };
  }

  /** The transaction of the last write committed. */
  committed(): void {
    const staged = this.#staged;
    if (staged === null) return;
    this.#staged = null;
    this.#record.written();
    this.#counters.webhookRecorded(staged.events.length, staged.rows);
    if (staged.dead > 0) this.#counters.webhookDead(staged.dead, 0);
    if (staged.events.length > 0) this.#options.recorded();
  }

  /** After the room gave its storage back (deleteAll). */
  reset(): void {
    this.#queue = [];
    this.#staged = null;
  }
}

function randomHex(bytes: number): string {
  return [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) => b.toString(16).padStart(2, "0")).join("");
}
