import { DurableObject } from "cloudflare:workers";
import { isValidRoomName } from "../../protocol";
import type { ServiceTotals } from "../../common/counters";
import { logEvent } from "../../common/log";
import type { Room } from "../room/room";
import { FANOUT_PAGE_ROOMS, readCoordinatorConfig, type CoordinatorConfig } from "../../common/coordinator-config";
import { FANOUT_ATTEMPTS, FANOUT_BACKOFF_MS, FANOUT_CONCURRENCY } from "./fan-out-policy";
import { fanOut, type FanOutResult } from "./fan-out";
import { Directory } from "./directory";
import { HubRegistry, type HubOccupancy, type HubReport } from "./hub-registry";
import { Registry, type RegistryQuery, type RoomEntry, type RoomReport } from "./registry";
import { TotalsStore } from "./totals-store";

/** A message for many rooms, as every shard receives it. */
export interface BroadcastMessage {
  /** The message's data as JSON text, validated by the worker. */
  dataJson: string;
  /** Idempotency key handed to every room; the same on every retry. */
  key: string;
}

/** A page of the shard's registry to deliver to: live rooms matching `prefix` after `after`. */
export interface RegistryPage {
  prefix: string;
  after: string | null;
}

/** One shard's part of GET /metrics. */
export interface ShardMetrics {
  liveRooms: number;
  connections: number;
  members: number;
  /** Hubs of multiplexed connections that report to this shard, as last reported. */
  multiplexed: HubOccupancy;
  /** Hubs of Pusher connections that report to this shard, as last reported. */
  pusher: HubOccupancy;
  totals: ServiceTotals;
}

export interface PageFanOutResult extends FanOutResult {
  /** Pass as `after` for the next page; null when this page reached the end of the registry. */
  next: string | null;
}

/**
 * One shard of the coordinator: the registry of live rooms whose names hash
 * to it, and the fan-out of broadcasts to them. Shards are named `shard-<i>`
 * (see shards.ts); nothing ever addresses one by any other name.
 *
 * @example
 * ```ts
 * // Exported from the worker and bound as COORDINATOR (with SQLite storage) in wrangler.toml.
 * export { Coordinator } from "edge-fanout";
 * ```
 *
 * @see docs/coordinator.md
 */
export class Coordinator extends DurableObject<Record<string, unknown>> {
  readonly #config: CoordinatorConfig;
  readonly #registry: Registry;
  readonly #directory: Directory;
  readonly #totals: TotalsStore;
  readonly #hubs: HubRegistry;
  /** Whether the sweep alarm is known to be set; saves a storage call per report. */
  #sweepArmed = false;

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env);
    this.#config = readCoordinatorConfig(env);
    this.#registry = new Registry(ctx.storage.sql);
    this.#directory = new Directory(ctx.storage.sql);
    this.#totals = new TotalsStore(ctx.storage.sql);
    this.#hubs = new HubRegistry(ctx.storage.sql);
  }

  /** A room wrote its first row (stored) or gave its storage back (not stored). */
  async storage(room: string, stored: boolean): Promise<void> {
    if (!isValidRoomName(room)) return;
    this.#directory.set(room, stored);
  }

  /** Whether `room` holds storage or sockets: whether looking at it can find anything. */
  async known(room: string): Promise<boolean> {
    return this.#directory.has(room) || this.#registry.list({ prefix: room, after: null, limit: 1 }, Date.now()).some((e) => e.room === room);
  }

  /** A room's occupancy report (edge or heartbeat). Reports older than the stored one are ignored. */
  async report(report: RoomReport): Promise<void> {
    const counts = [report.connections, report.members ?? 0];
    if (!isValidRoomName(report.room) || !counts.every((n) => Number.isSafeInteger(n) && n >= 0)) {
      logEvent("error", { where: "registry_report", report: JSON.stringify(report).slice(0, 200) });
      return;
    }
    const now = Date.now();
    this.#registry.apply(report, now + this.#config.ttlMs, now + this.#config.refreshBelowMs);
    // Deltas add up in any order, so even a report too old for the registry counts here.
    if (report.delta) this.#totals.add(report.delta);
    await this.#armSweep();
  }

  /** A hub's report of its multiplexed connections (edge or heartbeat). */
  async hubReport(report: HubReport): Promise<void> {
    const counts = [report.hub, report.connections, report.subscriptions, report.rooms, report.at];
    if (!counts.every((n) => Number.isSafeInteger(n) && n >= 0)) {
      logEvent("error", { where: "hub_report", report: JSON.stringify(report).slice(0, 200) });
      return;
    }
    this.#hubs.apply(report, Date.now() + this.#config.ttlMs);
    if (report.delta) this.#totals.add(report.delta);
    await this.#armSweep();
  }

  /** Counts that happen outside rooms (the worker's refusals and broadcasts), added to this shard's totals. */
  async addTotals(delta: Partial<ServiceTotals>): Promise<void> {
    this.#totals.add(delta);
  }

  /** Live rooms and connections in this shard's registry, and its totals. */
  async metrics(): Promise<ShardMetrics> {
    const now = Date.now();
    return { ...this.#registry.occupancy(now), multiplexed: this.#hubs.occupancy(now, "hub"), pusher: this.#hubs.occupancy(now, "pusher"), totals: this.#totals.values };
  }

  /** Live rooms in name order (see RegistryQuery). */
  async list(query: RegistryQuery): Promise<RoomEntry[]> {
    return this.#registry.list(query, Date.now());
  }

  /** Delivers `message` to the named rooms (a broadcast's explicit list, the part that hashes here). */
  async deliver(message: BroadcastMessage, rooms: string[]): Promise<FanOutResult> {
    return this.#fanOut(message, rooms);
  }

  /**
   * Delivers `message` to the next page of live rooms in this shard's
   * registry. One call handles at most FANOUT_PAGE_ROOMS rooms, so one
   * invocation's subrequests stay bounded however many rooms the shard holds;
   * the caller pages with `next`.
   */
  async deliverPage(message: BroadcastMessage, page: RegistryPage): Promise<PageFanOutResult> {
    const entries = this.#registry.list({ prefix: page.prefix, after: page.after, limit: FANOUT_PAGE_ROOMS }, Date.now());
    const rooms = entries.map((e) => e.room);
    const result = await this.#fanOut(message, rooms);
    const next = rooms.length === FANOUT_PAGE_ROOMS ? (rooms[rooms.length - 1] ?? null) : null;
    return { ...result, next };
  }

  override async alarm(): Promise<void> {
    this.#sweepArmed = false;
    const now = Date.now();
    const left = this.#registry.sweep(now) + this.#hubs.sweep(now);
    if (left > 0) await this.#armSweep();
  }

  async #fanOut(message: BroadcastMessage, rooms: string[]): Promise<FanOutResult> {
    const namespace = this.env.ROOMS as DurableObjectNamespace<Room>;
    return fanOut(
      rooms,
      (room) => namespace.get(namespace.idFromName(room)).publish(message.dataJson, { idempotencyKey: message.key, source: "broadcast" }),
      {
        concurrency: FANOUT_CONCURRENCY,
        attempts: FANOUT_ATTEMPTS,
        backoffMs: FANOUT_BACKOFF_MS,
        onError: (room, attempt, error) =>
          logEvent("error", { where: "broadcast_delivery", room, attempt, key: message.key, error: String(error) }),
      },
    );
  }

  /** Keeps an alarm set while the registry holds rows, so expired entries are reclaimed. */
  async #armSweep(): Promise<void> {
    if (this.#sweepArmed) return;
    if ((await this.ctx.storage.getAlarm()) === null) {
      await this.ctx.storage.setAlarm(Date.now() + Math.min(this.#config.ttlMs, 86_400_000));
    }
    this.#sweepArmed = true;
  }
}
