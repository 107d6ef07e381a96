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
 * lost reports heal. A room without a name (an instance the runtime started
 * for an alarm, with nothing stored that names it) reports nothing: a report
 * needs the name it is filed under.
 */
export interface RoomRegistration {
  /**
   * The room went from no sockets to some, or from some to none; `due`, from
   * a room left with no sockets that holds storage: when to ask it whether its
   * storage can go.
   */
  occupancyChanged(room: string, connections: number, members: number, due?: number): void;
  /**
   * A room with no sockets holds storage nobody told its shard about since
   * (its sockets went with a restart, or webhook events that held it were
   * sent): when to ask it. In the background; never throws.
   */
  storageDue(room: string, due: number): void;
  /** Called from the room's periodic sweep while it has sockets. */
  heartbeat(room: string, connections: number, members: number): void;
  /**
   * The room is about to write the first row of this instance: the directory
   * lists it, to ask it at `due` whether its storage can go. Resolves true
   * once the directory has it; false (logged) when the shard could not be
   * reached within STORAGE_REPORT_TIMEOUT_MS. Never rejects.
   */
  storage(room: string, due: number): Promise<boolean>;
}

/** How long a room waits for the directory before it goes on anyway (and logs). */
const STORAGE_REPORT_TIMEOUT_MS = 5000;

const NO_REGISTRATION: RoomRegistration = { occupancyChanged() {}, heartbeat() {}, storageDue() {}, storage: async () => true };

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
  readonly #ctx: DurableObjectState;
  readonly #reports: LatestReport<RoomReport>;

  constructor(namespace: CoordinatorNamespace, shards: number, ctx: DurableObjectState, counters: CounterSource) {
    this.#namespace = namespace;
    this.#shards = shards;
    this.#ctx = ctx;
    this.#reports = new LatestReport(ctx, counters, "registry_report", (report) => shardStub(namespace, shardOf(report.room, shards)).report(report));
  }

  occupancyChanged(room: string, connections: number, members: number, due?: number): void {
    if (room === "") return;
    this.#reports.submit(due === undefined ? { room, connections, members, at: Date.now() } : { room, connections, members, at: Date.now(), due });
  }

  heartbeat(room: string, connections: number, members: number): void {
    if (room === "") return;
    this.#reports.submit({ room, connections, members, at: Date.now() });
  }

  storageDue(room: string, due: number): void {
    if (room === "") return;
    const told = shardStub(this.#namespace, shardOf(room, this.#shards)).storageDue(room, due);
    this.#ctx.waitUntil(told.catch((error: unknown) => logEvent("error", { where: "directory_report", room, due, error: String(error) })));
  }

  async storage(room: string, due: number): Promise<boolean> {
    if (room === "") return false;
    let timer: ReturnType<typeof setTimeout> | null = null;
    try {
      await Promise.race([
        shardStub(this.#namespace, shardOf(room, this.#shards)).storage(room, true, due),
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error("timed out")), STORAGE_REPORT_TIMEOUT_MS))),
      ]);
      return true;
    } catch (error) {
      logEvent("error", { where: "directory_report", room, error: String(error) });
      return false;
    } finally {
      if (timer !== null) clearTimeout(timer);
    }
  }
}

export function isNamespace(value: unknown): value is CoordinatorNamespace {
  return typeof value === "object" && value !== null && typeof (value as { idFromName?: unknown }).idFromName === "function";
}
