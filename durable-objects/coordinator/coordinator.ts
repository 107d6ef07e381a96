import { DurableObject } from "cloudflare:workers";
import { isValidRoomName } from "../../protocol";
import type { ServiceTotals } from "../../common/counters";
import { Pacer } from "../../common/bounded";
import { logEvent } from "../../common/log";
import { FANOUT_PAGE_ROOMS, readCoordinatorConfig, type CoordinatorConfig } from "../../common/coordinator-config";
import { FANOUT_ATTEMPTS, FANOUT_BACKOFF_MS, FANOUT_CONCURRENCY } from "./fan-out-policy";
import { DeliveredRooms } from "./delivered-rooms";
import { fanOut, type FanOutResult, type RoomDelivery } from "./fan-out";
import { roomOf } from "./room-contract";
import { Directory } from "./directory";
import { HubRegistry, type HubOccupancy, type HubReport } from "./hub-registry";
import { Registry, type RegistryQuery, type RoomEntry, type RoomReport } from "./registry";
import { StorageSweep, SWEEP_GAP_MS } from "./storage-sweep";
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

/** Rooms that answered a broadcast are recorded (DeliveredRooms) in rows of at most this many. */
const RECORD_EVERY = 250;

export interface PageFanOutResult extends FanOutResult {
  /** Pass as `after` for the next page; null when this page reached the end of the registry. */
  next: string | null;
}

/**
 * One shard of the coordinator: the registry of live rooms whose names hash
 * to it, and the fan-out of broadcasts to them. Shards are named `shard-<i>`
 * (see shards.ts); nothing ever addresses one by any other name.
 *
 * A broadcast reaches live rooms (a socket at their last report) as fast as
 * FANOUT_CONCURRENCY allows: clients wait for it. A room without sockets is
 * woken (or created) only to store it, and stays in memory a while after, so
 * those go at this shard's share of BROADCAST_IDLE_ROOMS_PER_SECOND, one
 * pacer for every broadcast the shard runs: rooms in memory at once stay
 * bounded whatever the broadcasts' size. Rooms that answered are recorded
 * (DeliveredRooms), so a retry with the same key only reaches the rest.
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
  readonly #storageSweep: StorageSweep;
  readonly #delivered: DeliveredRooms;
  /** The pace of rooms without sockets, shared by every broadcast this shard runs. */
  readonly #idlePace: Pacer;
  /** When the alarm is known to be set (null: not known); saves a storage call per report. */
  #alarmAt: number | null = null;

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env);
    this.#config = readCoordinatorConfig(env);
    this.#registry = new Registry(ctx.storage.sql);
    this.#directory = new Directory(ctx.storage.sql);
    this.#totals = new TotalsStore(ctx.storage.sql);
    this.#hubs = new HubRegistry(ctx.storage.sql);
    this.#storageSweep = new StorageSweep({
      directory: this.#directory,
      ask: (room) => roomOf(this.env, room).giveBack(),
      counted: (delta) => this.#totals.add(delta),
    });
    this.#delivered = new DeliveredRooms(ctx.storage.sql);
    this.#idlePace = new Pacer(this.#config.idleRoomsPerShardPerSecond);
  }

  /**
   * A room is about to write its first row of an instance (stored), to be
   * asked at `due` whether its storage can go; or (not stored, from rooms of
   * earlier versions) it gave its storage back.
   */
  async storage(room: string, stored: boolean, due?: number): Promise<void> {
    if (!isValidRoomName(room)) return;
    if (!stored) {
      this.#directory.remove(room);
      return;
    }
    const at = due !== undefined && Number.isSafeInteger(due) ? due : Date.now();
    this.#directory.add(room, at);
    this.#storageSweep.listed(room);
    await this.#armAlarm(at);
  }

  /** A listed room with no sockets says when to ask it whether its storage can go. */
  async storageDue(room: string, due: number): Promise<void> {
    if (!isValidRoomName(room) || !Number.isSafeInteger(due)) return;
    this.#directory.moveDue(room, due, SWEEP_GAP_MS);
    await this.#armAlarm(due);
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
    // An empty room says when its storage can go: it is asked then.
    if (report.connections === 0 && report.due !== undefined && Number.isSafeInteger(report.due)) {
      this.#directory.moveDue(report.room, report.due, SWEEP_GAP_MS);
      await this.#armAlarm(report.due);
    }
    await this.#armAlarm(now + this.#registrySweepMs());
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
    await this.#armAlarm(Date.now() + this.#registrySweepMs());
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

  /**
   * Delivers `message` to the named rooms (a broadcast's explicit list, the
   * part that hashes here): live ones at once, the others at the pace of rooms
   * without sockets.
   */
  async deliver(message: BroadcastMessage, rooms: string[]): Promise<FanOutResult> {
    return this.#fanOut(message, rooms, false);
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
    const result = await this.#fanOut(message, rooms, true);
    const next = rooms.length === FANOUT_PAGE_ROOMS ? (rooms[rooms.length - 1] ?? null) : null;
    return { ...result, next };
  }

  /** Expired registry entries go; rooms whose storage may go are asked (storage-sweep.ts). */
  override async alarm(): Promise<void> {
    this.#alarmAt = null;
    const now = Date.now();
    const left = this.#registry.sweep(now) + this.#hubs.sweep(now) + this.#delivered.sweep(now);
    const more = await this.#storageSweep.run(now);
    const after = Date.now() + SWEEP_GAP_MS;
    const due = more ? after : this.#directory.nextDue();
    if (due !== null) await this.#armAlarm(Math.max(due, after));
    if (left > 0) await this.#armAlarm(Date.now() + this.#registrySweepMs());
  }

  /**
   * Delivers `message` to `rooms` (`allLive`: they come from the registry's
   * live rooms): rooms already known to hold it are counted, not asked; live
   * rooms go at once, the others at the pace of rooms without sockets.
   */
  async #fanOut(message: BroadcastMessage, rooms: string[], allLive: boolean): Promise<FanOutResult> {
    const now = Date.now();
    const known = this.#delivered.of(message.key, now);
    const fresh = known.size === 0 ? rooms : rooms.filter((room) => !known.has(room));
    const live = allLive ? null : this.#registry.liveAmong(fresh, now);
    const send = (room: string): Promise<RoomDelivery> => roomOf(this.env, room).publish(message.dataJson, { idempotencyKey: message.key, source: "broadcast" });
    // Recorded as they answer, a few hundred at a time: a call cut short still leaves its progress.
    let confirmed: string[] = [];
    const record = (): void => {
      this.#delivered.record(message.key, confirmed, Date.now());
      confirmed = [];
    };
    const options = {
      concurrency: FANOUT_CONCURRENCY,
      attempts: FANOUT_ATTEMPTS,
      backoffMs: FANOUT_BACKOFF_MS,
      onError: (room: string, attempt: number, error: unknown) =>
        logEvent("error", { where: "broadcast_delivery", room, attempt, key: message.key, error: String(error) }),
      delivered: (room: string) => {
        confirmed.push(room);
        if (confirmed.length >= RECORD_EVERY) record();
      },
    };
    const [atOnce, idle] = await Promise.all([
      fanOut(live === null ? fresh : fresh.filter((room) => live.has(room)), send, options),
      fanOut(live === null ? [] : fresh.filter((room) => !live.has(room)), send, { ...options, pace: () => this.#idlePace.turn() }),
    ]);
    record();
    // The record of delivered rooms expires with the registry's entries: the same sweep reclaims it.
    await this.#armAlarm(Date.now() + this.#registrySweepMs());
    const skipped = rooms.length - fresh.length;
    return {
      rooms: atOnce.rooms + idle.rooms + skipped,
      sockets: atOnce.sockets + idle.sockets,
      duplicates: atOnce.duplicates + idle.duplicates + skipped,
      refused: atOnce.refused + idle.refused,
      failed: [...atOnce.failed, ...idle.failed],
      paced: idle.paced,
    };
  }

  /** How long after a report its entry's sweep may wait: expired entries are reclaimed within a TTL. */
  #registrySweepMs(): number {
    return Math.min(this.#config.ttlMs, 86_400_000);
  }

  /** Makes sure the alarm runs by `at` (one set alarm serves the registry's sweep and the directory's questions). */
  async #armAlarm(at: number): Promise<void> {
    if (this.#alarmAt !== null && this.#alarmAt <= at) return;
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > at) await this.ctx.storage.setAlarm(at);
    this.#alarmAt = current === null || current > at ? at : current;
  }
}
