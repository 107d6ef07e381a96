import { logEvent } from "../../common/log";
import { readCoordinatorConfig } from "../../common/coordinator-config";
import type { RoomReport } from "./registry";
import { shardOf, shardStub } from "../../common/coordinator-shards";
import type { Coordinator } from "./coordinator";
import { LatestReport, type CounterSource } from "./latest-report";

export type { CounterSource } from "./latest-report";

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

const NO_REGISTRATION: RoomRegistration = { occupancyChanged() {}, heartbeat() {}, storage: async () => {} };

/** Registration for a room object; reports run in the background (ctx.waitUntil). */
export function registrationFor(env: Record<string, unknown>, ctx: DurableObjectState, counters: CounterSource): RoomRegistration {
  const namespace = env.COORDINATOR;
  if (!isNamespace(namespace)) return NO_REGISTRATION;
  return new ShardRegistration(namespace, readCoordinatorConfig(env).shards, ctx, counters);
}

/** A room's reports go to the shard its name hashes to (LatestReport: in order, the latest only, never throwing). */
class ShardRegistration implements RoomRegistration {
  readonly #namespace: CoordinatorNamespace;
  readonly #shards: number;
  readonly #reports: LatestReport<RoomReport>;

  constructor(namespace: CoordinatorNamespace, shards: number, ctx: DurableObjectState, counters: CounterSource) {
    this.#namespace = namespace;
    this.#shards = shards;
    this.#reports = new LatestReport(ctx, counters, "registry_report", (report) => shardStub(namespace, shardOf(report.room, shards)).report(report));
  }

  occupancyChanged(room: string, connections: number, members: number): void {
    this.#reports.submit({ room, connections, members, at: Date.now() });
  }

  heartbeat(room: string, connections: number, members: number): void {
    this.#reports.submit({ room, connections, members, at: Date.now() });
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
}

export function isNamespace(value: unknown): value is CoordinatorNamespace {
  return typeof value === "object" && value !== null && typeof (value as { idFromName?: unknown }).idFromName === "function";
}
