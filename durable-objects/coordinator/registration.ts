import type { RoomCounterValues } from "../../protocol";
import { logEvent } from "../../common/log";
import { readCoordinatorConfig } from "../../common/coordinator-config";
import type { RoomReport } from "./registry";
import { shardOf, shardStub } from "../../common/coordinator-shards";
import type { Coordinator } from "./coordinator";

type CoordinatorNamespace = DurableObjectNamespace<Coordinator>;

/**
 * How a room tells the coordinator it is live. Rooms report on the edges
 * (0 -> 1 socket and 1 -> 0), and re-assert from their periodic sweep so that
 * lost reports heal.
 */
export interface RoomRegistration {
  /** The room went from no sockets to some, or from some to none. */
  occupancyChanged(room: string, connections: number, members: number): void;
  /** Called from the room's periodic sweep while it has sockets. */
  heartbeat(room: string, connections: number, members: number): void;
  /**
   * The room holds storage (it is about to write) or gave it back. Resolves
   * once the directory has it, or after STORAGE_REPORT_TIMEOUT_MS; never rejects.
   */
  storage(room: string, stored: boolean): Promise<void>;
}

/** How long a room waits for the directory before it goes on anyway (and logs). */
const STORAGE_REPORT_TIMEOUT_MS = 5000;

/** Where a report's counter delta comes from, and where its success is recorded. */
export interface CounterSource {
  unreported(): RoomCounterValues | null;
  reported(delta: RoomCounterValues): void;
}

const NO_REGISTRATION: RoomRegistration = { occupancyChanged() {}, heartbeat() {}, storage: async () => {} };

/** Registration for a room object; reports run in the background (ctx.waitUntil). */
export function registrationFor(env: Record<string, unknown>, ctx: DurableObjectState, counters: CounterSource): RoomRegistration {
  const namespace = env.COORDINATOR;
  if (!isNamespace(namespace)) return NO_REGISTRATION;
  return new ShardRegistration(namespace, readCoordinatorConfig(env).shards, ctx, counters);
}

/**
 * Sends a room's reports to its registry shard, one at a time and in order,
 * never blocking the room and never throwing into it. A report made while
 * another is in flight replaces any unsent one: only the latest state
 * matters. A report that fails is logged and dropped; the next heartbeat (or
 * the entry's TTL) repairs what it would have said. Each report carries the
 * counters that grew since the last report that succeeded, taken when it is
 * sent, so a failed report's delta rides on the next one.
 */
class ShardRegistration implements RoomRegistration {
  readonly #namespace: CoordinatorNamespace;
  readonly #shards: number;
  readonly #ctx: DurableObjectState;
  readonly #counters: CounterSource;
  #unsent: RoomReport | null = null;
  #sending = false;

  constructor(namespace: CoordinatorNamespace, shards: number, ctx: DurableObjectState, counters: CounterSource) {
    this.#namespace = namespace;
    this.#shards = shards;
    this.#ctx = ctx;
    this.#counters = counters;
  }

  occupancyChanged(room: string, connections: number, members: number): void {
    this.#submit({ room, connections, members, at: Date.now() });
  }

  heartbeat(room: string, connections: number, members: number): void {
    this.#submit({ room, connections, members, at: Date.now() });
  }

  async storage(room: string, stored: boolean): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | null = null;
    try {
      await Promise.race([
        shardStub(this.#namespace, shardOf(room, this.#shards)).storage(room, stored),
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error("timed out")), STORAGE_REPORT_TIMEOUT_MS))),
      ]);
    } catch (error) {
      logEvent("error", { where: "directory_report", room, stored, error: String(error) });
    } finally {
      if (timer !== null) clearTimeout(timer);
    }
  }

  #submit(report: RoomReport): void {
    this.#unsent = report;
    if (this.#sending) return;
    this.#sending = true;
    try {
      this.#ctx.waitUntil(this.#drain());
    } catch (error) {
      this.#sending = false;
      logEvent("error", { where: "registry_report", room: report.room, error: String(error) });
    }
  }

  async #drain(): Promise<void> {
    try {
      while (this.#unsent) {
        const delta = this.#counters.unreported();
        const report: RoomReport = { ...this.#unsent, delta };
        this.#unsent = null;
        try {
          await shardStub(this.#namespace, shardOf(report.room, this.#shards)).report(report);
          if (delta) this.#counters.reported(delta);
        } catch (error) {
          logEvent("error", { where: "registry_report", room: report.room, error: String(error) });
        }
      }
    } finally {
      this.#sending = false;
    }
  }
}

function isNamespace(value: unknown): value is CoordinatorNamespace {
  return typeof value === "object" && value !== null && typeof (value as { idFromName?: unknown }).idFromName === "function";
}
