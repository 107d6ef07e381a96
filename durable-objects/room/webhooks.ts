import type { RoomWebhookStats } from "../../protocol";
import type { Limits } from "../../common/settings";
import type { RoomCounters } from "../engine/counters";
import type { Message } from "../engine/message";
import { WebhookDeadLetters } from "./webhook-dead-letters";
import { WebhookDelivery } from "./webhook-delivery";
import type { WebhookTarget } from "./webhook-target";
import { WebhookMembership } from "./webhook-membership";
import { WebhookOutbox } from "./webhook-outbox";
import { WebhookRecord } from "./webhook-record";
import { WebhookRecorder } from "./webhook-recorder";

/** What the room's webhooks need from the room. */
export interface WebhooksHost {
  roomName(): string;
  /** The epoch of the room's history (message events name it beside their seq). */
  epoch(): string;
  /** Members of the room now, over every object. */
  memberCount(): number;
  /** Work of the webhooks fell due: the room's alarm must come (alarmWanted says when). */
  wantAlarm(): void;
}

export interface WebhooksConfig {
  /** Where the room's events go and in which format (webhook-target.ts). */
  target: WebhookTarget;
  limits: Pick<Limits, "PRESENCE_LEAVE_DELAY_MS" | "WEBHOOK_BATCH_MAX_EVENTS" | "WEBHOOK_OUTBOX_MAX_ROWS" | "WEBHOOK_RETRY_SECONDS" | "WEBHOOK_BACKOFF_MAX_MS">;
  /** Whether the room had leaves when it started: its members on them are confirmed by their reports, which take a moment. */
  sharded: boolean;
}

/** A root that starts with leaves gives their reports at least this long before members it does not see are taken as gone. */
const LEAF_REPORT_GRACE_MS = 10_000;

/**
 * A room's webhooks (docs/webhooks.md), its parts wired: what the receiver
 * is told about the room (WebhookMembership, against WebhookRecord), its
 * messages, the write of each turn's events (WebhookRecorder into
 * WebhookOutbox), their delivery from the alarm (WebhookDelivery), and dead
 * letters, in the format of the room's target (this service's own, or
 * Pusher's for a Pusher channel's room). The room calls the methods below; it
 * has this part only when it has a target, so a deployment without webhooks
 * records nothing.
 */
export class Webhooks {
  readonly #host: WebhooksHost;
  readonly #outbox: WebhookOutbox;
  readonly #record: WebhookRecord;
  readonly #deadLetters: WebhookDeadLetters;
  readonly #recorder: WebhookRecorder;
  readonly #membership: WebhookMembership;
  readonly #delivery: WebhookDelivery;
  readonly #retryMs: number;
  /** Whether this room's messages are recorded (its format sends them, and the room matches WEBHOOK_MESSAGE_PREFIX). */
  #messages: boolean | null = null;
  readonly #messagePrefix: string | null;

  constructor(storage: Pick<DurableObjectStorage, "sql" | "transactionSync">, config: WebhooksConfig, counters: RoomCounters, host: WebhooksHost) {
    const { target, limits } = config;
    const format = target.format;
    this.#host = host;
    this.#retryMs = limits.WEBHOOK_RETRY_SECONDS * 1000;
    this.#messagePrefix = target.messagePrefix;
    this.#outbox = new WebhookOutbox(storage.sql, limits.WEBHOOK_BATCH_MAX_EVENTS);
    this.#record = new WebhookRecord(storage.sql);
    this.#deadLetters = new WebhookDeadLetters(storage.sql, format);
    this.#recorder = new WebhookRecorder(storage, { outbox: this.#outbox, record: this.#record, deadLetters: this.#deadLetters }, counters, {
      format,
      maxRows: limits.WEBHOOK_OUTBOX_MAX_ROWS,
      room: () => host.roomName(),
      recorded: () => host.wantAlarm(),
    });
    const leaveDelayMs = limits.PRESENCE_LEAVE_DELAY_MS;
    this.#membership = new WebhookMembership(
      this.#record,
      this.#recorder,
      {
        leaveDelayMs,
        restartGraceMs: config.sharded ? Math.max(leaveDelayMs, LEAF_REPORT_GRACE_MS) : leaveDelayMs,
        members: format.records("member.joined") || format.records("member.left"),
        rooms: format.records("room.occupied") || format.records("room.vacated"),
      },
      { memberCount: () => host.memberCount(), wantAlarm: () => host.wantAlarm() },
      Date.now(),
    );
    this.#delivery = new WebhookDelivery(this.#outbox, this.#deadLetters, counters, {
      url: target.url,
      urlVar: target.urlVar,
      format,
      batchMaxEvents: limits.WEBHOOK_BATCH_MAX_EVENTS,
      retryMs: this.#retryMs,
      backoffMaxMs: limits.WEBHOOK_BACKOFF_MAX_MS,
      room: () => host.roomName(),
    });
  }

  // -------------------------------------------------------------------------
  // Changes in the room
  // -------------------------------------------------------------------------

  memberJoined(id: string, info: string | undefined, verified: boolean): void {
    this.#membership.joined(id, info, verified, Date.now());
  }

  memberLeft(id: string): void {
    this.#membership.left(id, Date.now());
  }

  /** The room's sockets, over every object, changed (at least across zero). */
  connections(count: number): void {
    this.#membership.connections(count, Date.now());
  }

  /** Inside a flush's transaction: its messages are being stored. */
  storing(messages: readonly Message[]): void {
    if (!this.#sendsMessages()) {
      this.#recorder.writeWithin([]);
      return;
    }
    const epoch = this.#host.epoch();
    const now = Date.now();
    this.#recorder.writeWithin(messages.map((message) => ({ change: { type: "message.published", message, epoch }, ts: now })));
  }

  /** A subscriber to the room's Pusher cache channel found no last event. */
  cacheMissed(): void {
    this.#recorder.record({ change: { type: "cache.missed" }, ts: Date.now() });
  }

  /** The flush's transaction committed. */
  stored(): void {
    this.#recorder.committed();
  }

  // -------------------------------------------------------------------------
  // The alarm
  // -------------------------------------------------------------------------

  alarmWanted(now: number): number | null {
    const settle = this.#membership.dueAt(now);
    const send = this.#delivery.dueAt(now);
    if (settle === null) return send;
    return send === null ? settle : Math.min(settle, send);
  }

  async onAlarm(now: number): Promise<void> {
    this.#membership.settle(now);
    // What settling decided is written before the delivery looks at the outbox.
    this.#recorder.flush();
    await this.#delivery.run(now);
  }

  // -------------------------------------------------------------------------
  // Storage
  // -------------------------------------------------------------------------

  /** Whether the room must keep its storage: events wait for delivery, or decisions for their delay. */
  get holdsStorage(): boolean {
    return this.#outbox.pendingRows > 0 || this.#recorder.busy || this.#membership.waiting || this.#record.occupied || this.#record.members > 0;
  }

  /** Until when dead letters keep the room's storage (0: none do). */
  heldUntil(): number {
    const newest = this.#deadLetters.newestAt;
    return newest === 0 ? 0 : newest + this.#retryMs;
  }

  get storageExists(): boolean {
    return this.#outbox.exists || this.#record.exists || this.#deadLetters.exists;
  }

  /** After the room gave its storage back (deleteAll). */
  reset(): void {
    this.#outbox.reset();
    this.#record.reset();
    this.#deadLetters.reset();
    this.#recorder.reset();
    this.#membership.reset();
    this.#delivery.reset();
  }

  stats(): RoomWebhookStats {
    return {
      pending: this.#outbox.pendingEvents,
      pendingRows: this.#outbox.pendingRows,
      oldestPendingAt: this.#outbox.oldest()?.opened ?? null,
      failures: this.#delivery.failures,
      nextAttemptAt: this.#delivery.nextAttemptAt,
      lastError: this.#delivery.lastError,
      deadLetters: this.#deadLetters.count(),
      recentDeadLetters: this.#deadLetters.recent(),
      members: this.#record.members,
      occupied: this.#record.occupied,
    };
  }

  #sendsMessages(): boolean {
    // Decided on first use: the room's name is known by then (an alarm-started instance reads it from storage).
    this.#messages ??= this.#recorder.sends("message.published") && (this.#messagePrefix === null || this.#host.roomName().startsWith(this.#messagePrefix));
    return this.#messages;
  }
}
