import { CloseCode } from "../../protocol";
import { logEvent } from "../../common/log";
import type { RoomCounters } from "./counters";
import type { Delivery } from "./delivery";
import type { SocketState } from "./socket-state";

export interface SweeperOptions {
  /** IDLE_TIMEOUT_SECONDS in ms (0 = never reap); also the interval of the sweep alarm, unless `nudge` is set. */
  idleTimeoutMs: number;
  /**
   * For sockets whose clients only speak when they have heard nothing for a while (Pusher's
   * ping after its activity timeout): a socket silent for half the idle timeout is asked for
   * a sign of life, so one that reads a busy room without a word is not taken for dead. The
   * sweep then runs every half timeout, so a nudged socket has that long to answer.
   */
  nudge?: (socket: SocketState) => void;
}

/** What the sweep asks of the object it runs in. */
export interface SweeperHost {
  /** The periodic report (registry, root) while the object has sockets. */
  heartbeat(): void;
  /** Sockets of the room held by other objects (a sharded room's leaves): while there are any, the room is live. */
  otherSockets(): number;
  /**
   * When the object wants its alarm for work of its own, or null: with no socket anywhere
   * (`live` false) a room gives its storage back from it; any object may have work that is due
   * sooner than the next sweep. The alarm is set for the earliest of that and the sweep.
   */
  alarmWanted(now: number, live: boolean): number | null;
  /** At the alarm, after the sweep: that work. The alarm is then set again. */
  onAlarm(now: number, live: boolean): Promise<void>;
  /** For logs. */
  name(): string | null;
}

/**
 * Housekeeping of an object that holds sockets, run from its alarm (which
 * wakes a hibernated object briefly and never keeps it awake) and
 * opportunistically during flushes:
 *
 * - sockets whose token expired are closed with 4001;
 * - sockets silent for IDLE_TIMEOUT_SECONDS (no heartbeat answered by the
 *   runtime, no frame) are closed with 4010. A socket's last frame time is
 *   kept in its attachment, so this holds whether or not the object slept;
 * - while the object has sockets, the alarm is the heartbeat of its reports;
 *   the object's own work (giving storage back once it has none, anything
 *   else that falls due) runs from it too.
 */
export class Sweeper {
  readonly #ctx: DurableObjectState;
  readonly #delivery: Delivery;
  readonly #counters: RoomCounters;
  readonly #options: SweeperOptions;
  readonly #host: SweeperHost;
  #lastSweep = Date.now();
  /** The alarm time this instance knows is set (0 = none known): spares a storage call on every upgrade. */
  #alarmAt = 0;

  constructor(ctx: DurableObjectState, delivery: Delivery, counters: RoomCounters, options: SweeperOptions, host: SweeperHost) {
    this.#ctx = ctx;
    this.#delivery = delivery;
    this.#counters = counters;
    this.#options = options;
    this.#host = host;
  }

  /** During a flush: sweeps when half an idle timeout has passed since the last sweep. */
  maybeSweep(now: number): void {
    if (this.#options.idleTimeoutMs > 0 && now - this.#lastSweep >= this.#options.idleTimeoutMs / 2) this.sweep(now);
  }

  sweep(now: number): void {
    this.#lastSweep = now;
    const timeoutMs = this.#options.idleTimeoutMs || Number.POSITIVE_INFINITY;
    for (const socket of this.#delivery.sockets()) {
      const { attachment, ws } = socket;
      if (attachment.expiresAt !== null && now >= attachment.expiresAt) {
        logEvent("kick", { room: this.#host.name(), socket: attachment.id, reason: "token_expired" });
        this.#counters.refused("token_expired");
        this.#delivery.close(ws, CloseCode.UNAUTHORIZED, "token expired");
        continue;
      }
      const heartbeat = this.#ctx.getWebSocketAutoResponseTimestamp(ws)?.getTime() ?? 0;
      const last = Math.max(heartbeat, socket.lastActivity, attachment.connectedAt);
      if (now - last > timeoutMs) {
        logEvent("kick", { room: this.#host.name(), socket: attachment.id, reason: "idle_timeout" });
        this.#counters.refused("idle_timeout");
        this.#delivery.close(ws, CloseCode.IDLE_TIMEOUT, "no heartbeat");
      } else if (this.#options.nudge && now - last > timeoutMs / 2) {
        this.#options.nudge(socket);
      }
    }
  }

  async alarm(): Promise<void> {
    this.#alarmAt = 0;
    const now = Date.now();
    this.sweep(now);
    const live = this.#live();
    if (live) this.#host.heartbeat();
    await this.#host.onAlarm(now, live);
    await this.ensureAlarm();
  }

  /**
   * Makes sure an alarm is due: the next sweep while the object has sockets,
   * or sooner when the object wants it for work of its own.
   */
  async ensureAlarm(): Promise<void> {
    const want = this.#unscheduled(Date.now());
    if (want === null) return;
    const current = await this.#ctx.storage.getAlarm();
    if (current === null || current > want) await this.#ctx.storage.setAlarm(want);
    this.#alarmAt = current === null || current > want ? want : current;
  }

  /**
   * Whether ensureAlarm has anything to do: false when no alarm is wanted or
   * one is already due soon enough. Asked before starting ensureAlarm in the
   * background, so a busy room's flushes do not each start a task for nothing.
   */
  alarmNeeded(): boolean {
    return this.#unscheduled(Date.now()) !== null;
  }

  /** When an alarm is wanted that is not yet scheduled (null: none, or one due no later). */
  #unscheduled(now: number): number | null {
    const live = this.#live();
    const interval = this.#options.nudge ? this.#options.idleTimeoutMs / 2 : this.#options.idleTimeoutMs;
    const sweep = live && interval > 0 ? now + interval : null;
    const work = this.#host.alarmWanted(now, live);
    const want = sweep === null ? work : work === null ? sweep : Math.min(sweep, work);
    if (want === null || (this.#alarmAt !== 0 && this.#alarmAt <= want)) return null;
    return want;
  }

  /** The object gave its storage back (deleteAll took the alarm with it). */
  forgetAlarm(): void {
    this.#alarmAt = 0;
  }

  #live(): boolean {
    return this.#delivery.size + this.#host.otherSockets() > 0;
  }
}
