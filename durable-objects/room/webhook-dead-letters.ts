import type { WebhookDeadLetter } from "../../protocol";
import type { WebhookFormat } from "./webhook-format";
import { rowsWrittenBy, tableExists } from "./sql-writes";

/**
 * Rows of dead letters a room keeps: with rows of at most 256 KiB, at most
 * 25 MiB, and usually far less (a member event is ~200 bytes). Older ones are
 * dropped; every dead letter is counted (webhookDeadLetters) either way.
 */
export const DEAD_LETTER_ROWS = 100;
/** Dead letters `GET /rooms/{room}` names. */
const RECENT = 10;

/**
 * Webhook events that will not be sent again (table
 * `webhook_dead_letters`): undelivered WEBHOOK_RETRY_SECONDS after they were
 * recorded, or pushed out of a full outbox. They are kept, whole, as the rows
 * they were in, so an operator can see what a receiver missed (their count
 * and the newest ids in `GET /rooms/{room}`, their sum in `/metrics`). A room
 * that holds dead letters keeps its storage until the newest is
 * WEBHOOK_RETRY_SECONDS old (storage-reclaim.ts asks heldUntil).
 */
export class WebhookDeadLetters {
  readonly #sql: SqlStorage;
  readonly #format: Pick<WebhookFormat, "describe">;
  #exists: boolean;
  #newestAt = 0;

  /** `format` reads a stored event's id and type back. */
  constructor(sql: SqlStorage, format: Pick<WebhookFormat, "describe">) {
    this.#sql = sql;
    this.#format = format;
    this.#exists = tableExists(sql, "webhook_dead_letters");
    if (this.#exists) this.#newestAt = sql.exec<{ at: number | null }>(`SELECT max(at) AS at FROM webhook_dead_letters`).one().at ?? 0;
  }

  get exists(): boolean {
    return this.#exists;
  }

  /** When the newest dead letter was kept (0 when there is none). */
  get newestAt(): number {
    return this.#newestAt;
  }

  /** Keeps `count` events (their stored texts, comma-separated) as dead letters. Returns the rows written. */
  keep(reason: WebhookDeadLetter["reason"], count: number, events: string, now: number): number {
    let written = 0;
    if (!this.#exists) {
      written += rowsWrittenBy(
        this.#sql,
        `CREATE TABLE IF NOT EXISTS webhook_dead_letters (
          row INTEGER PRIMARY KEY, at INTEGER NOT NULL, reason TEXT NOT NULL, count INTEGER NOT NULL, events TEXT NOT NULL)`,
      );
      this.#exists = true;
    }
    const row = (this.#sql.exec<{ row: number | null }>(`SELECT max(row) AS row FROM webhook_dead_letters`).one().row ?? 0) + 1;
    written += rowsWrittenBy(this.#sql, `INSERT INTO webhook_dead_letters (row, at, reason, count, events) VALUES (?, ?, ?, ?, ?)`, row, now, reason, count, events);
    written += rowsWrittenBy(this.#sql, `DELETE FROM webhook_dead_letters WHERE row <= ?`, row - DEAD_LETTER_ROWS);
    this.#newestAt = now;
    return written;
  }

  /** Events kept as dead letters. */
  count(): number {
    if (!this.#exists) return 0;
    return this.#sql.exec<{ n: number | null }>(`SELECT sum(count) AS n FROM webhook_dead_letters`).one().n ?? 0;
  }

  /** The newest dead letters, newest first. */
  recent(): WebhookDeadLetter[] {
    if (!this.#exists) return [];
    const out: WebhookDeadLetter[] = [];
    const rows = this.#sql.exec<{ at: number; reason: string; events: string }>(
      `SELECT at, reason, events FROM webhook_dead_letters ORDER BY row DESC LIMIT ?`,
      RECENT,
    );
    for (const { at, reason, events } of rows) {
      const parsed = JSON.parse(`[${events}]`) as Record<string, unknown>[];
      for (const event of parsed.reverse()) {
        if (out.length === RECENT) return out;
        const { id, type } = this.#format.describe(event);
        out.push({ id, type, reason: reason === "overflow" ? "overflow" : "expired", at });
      }
    }
    return out;
  }

  /** After the room gave its storage back (deleteAll). */
  reset(): void {
    this.#exists = false;
    this.#newestAt = 0;
  }
}
