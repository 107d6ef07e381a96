import { CloseCode } from "../../protocol";
import { logEvent } from "../../common/log";
import type { RoomCounters } from "./counters";
import type { Delivery } from "./delivery";
import { KEY_MIN_AGE_MS, type History } from "./history";

export interface SweeperOptions {
  /** IDLE_TIMEOUT_SECONDS in ms (0 = never reap); also the interval of the sweep alarm. */
  idleTimeoutMs: number;
  /** HISTORY_MAX_AGE_SECONDS in ms: once the newest message is this old, an empty room holds nothing worth keeping. */
  historyMaxAgeMs: number;
}

export interface SweeperHooks {
  roomName(): string | null;
  /** The room's periodic report to the registry (and its counters) while it has sockets. */
  heartbeat(): void;
  /** The room is empty; report what is unreported, because storage is about to go. */
  reportEmpty(): void;
  /** True when the room has nothing in flight that storage still has to hold (no publish pending, counters reported). */
  quiet(): boolean;
  /** Storage was deleted: forget what memory knew of it, and tell the directory. */
  reclaimed(): Promise<void>;
}

/** The sockets swept (`size` also counts sockets the room holds on other objects, which keep it live). */
export type SweptSockets = Pick<Delivery, "size" | "entries" | "close">;
/** What the sweeper reads of storage to decide when an empty room may give it back. */
export type SweptStorage = Pick<History, "exists" | "latestTs" | "newestKeyTs">;

/** How long to wait before trying again when an empty room still has counters to report. */
const RECLAIM_RETRY_MS = 10_000;

/**
 * The room's housekeeping, run from its alarm (which wakes a hibernated room
 * briefly and never keeps it awake) and opportunistically during flushes:
 *
 * - sockets whose token expired are closed with 4001;
 * - sockets silent for IDLE_TIMEOUT_SECONDS (no heartbeat answered by the
 *   runtime, no frame) are closed with 4010. A socket's last frame time is
 *   kept in its attachment, so this holds whether or not the room slept;
 * - a room with no sockets whose history has aged out (and whose
 *   idempotency keys have expired) deletes its storage, so names that were
 *   used once do not keep storage forever.
 */
export class Sweeper {
  readonly #ctx: DurableObjectState;
  readonly #delivery: SweptSockets;
  readonly #history: SweptStorage;
  readonly #counters: RoomCounters;
  readonly #options: SweeperOptions;
  readonly #hooks: SweeperHooks;
  #lastSweep = Date.now();
  /** The alarm time this instance knows is set (0 = none known): spares a storage call on every upgrade. */
  #alarmAt = 0;

  constructor(ctx: DurableObjectState, delivery: SweptSockets, history: SweptStorage, counters: RoomCounters, options: SweeperOptions, hooks: SweeperHooks) {
    this.#ctx = ctx;
    this.#delivery = delivery;
    this.#history = history;
    this.#counters = counters;
    this.#options = options;
    this.#hooks = hooks;
  }

  /** During a flush: sweeps when half an idle timeout has passed since the last sweep. */
  maybeSweep(now: number): void {
    if (this.#options.idleTimeoutMs > 0 && now - this.#lastSweep >= this.#options.idleTimeoutMs / 2) this.sweep(now);
  }

  sweep(now: number): void {
    this.#lastSweep = now;
    const timeoutMs = this.#options.idleTimeoutMs || Number.POSITIVE_INFINITY;
    for (const [ws, state] of this.#delivery.entries()) {
      const expiresAt = state.attachment.expiresAt;
      if (expiresAt !== null && now >= expiresAt) {
        logEvent("kick", { room: this.#hooks.roomName(), socket: state.attachment.id, reason: "token_expired" });
        this.#counters.refused("token_expired");
        this.#delivery.close(ws, CloseCode.UNAUTHORIZED, "token expired");
        continue;
      }
      const heartbeat = this.#ctx.getWebSocketAutoResponseTimestamp(ws)?.getTime() ?? 0;
      const last = Math.max(heartbeat, state.lastActivity, state.attachment.connectedAt);
      if (now - last > timeoutMs) {
        logEvent("kick", { room: this.#hooks.roomName(), socket: state.attachment.id, reason: "idle_timeout" });
        this.#counters.refused("idle_timeout");
        this.#delivery.close(ws, CloseCode.IDLE_TIMEOUT, "no heartbeat");
      }
    }
  }

  async alarm(): Promise<void> {
    this.#alarmAt = 0;
    const now = Date.now();
    this.sweep(now);
    if (this.#delivery.size > 0) {
      this.#hooks.heartbeat();
    } else if (this.#history.exists && now >= this.#reclaimAt()) {
      if (!this.#hooks.quiet()) {
        this.#hooks.reportEmpty();
        await this.#arm(now + RECLAIM_RETRY_MS);
        return;
      }
      await this.#ctx.storage.deleteAlarm();
      await this.#ctx.storage.deleteAll();
      await this.#hooks.reclaimed();
      return;
    }
    await this.ensureAlarm();
  }

  /**
   * Makes sure an alarm is due: the next sweep while the room has sockets,
   * or the moment an empty room's storage may go.
   */
  async ensureAlarm(): Promise<void> {
    const now = Date.now();
    let want: number;
    if (this.#delivery.size > 0) {
      if (this.#options.idleTimeoutMs === 0) return;
      want = now + this.#options.idleTimeoutMs;
    } else if (this.#history.exists) {
      want = Math.max(this.#reclaimAt(), now + 1000);
    } else {
      return;
    }
    if (this.#alarmAt !== 0 && this.#alarmAt <= want) return;
    await this.#arm(want);
  }

  /** When an empty room's storage holds nothing anyone can still ask for. */
  #reclaimAt(): number {
    const keys = this.#history.newestKeyTs();
    return Math.max(this.#history.latestTs + this.#options.historyMaxAgeMs, keys > 0 ? keys + KEY_MIN_AGE_MS : 0);
  }

  async #arm(at: number): Promise<void> {
    const current = await this.#ctx.storage.getAlarm();
    if (current === null || current > at) await this.#ctx.storage.setAlarm(at);
    this.#alarmAt = current === null || current > at ? at : current;
  }
}
