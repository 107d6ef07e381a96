import { readCoordinatorConfig } from "../../common/coordinator-config";
import { shardStub } from "../../common/coordinator-shards";
import type { Coordinator } from "../coordinator/coordinator";
import type { HubReport } from "../coordinator/hub-registry";
import { LatestReport, type CounterSource } from "../coordinator/latest-report";
import { isNamespace } from "../coordinator/registration";
import { followerIndex } from "../../common/followers";

/** What a hub holds, as it reports it. */
export type HubOccupancy = Pick<HubReport, "connections" | "subscriptions" | "rooms">;

/**
 * How a hub tells the coordinator what it holds, for GET /metrics: hub n (of
 * either kind) reports to shard n mod COORDINATOR_SHARDS, under its index
 * among followers (common/followers.ts), on its first connection and its last
 * and from its periodic sweep (so figures lag by at most one sweep, as rooms'
 * do), with the counters that grew at the hub itself.
 */
export class HubRegistration {
  readonly #hub: number;
  readonly #reports: LatestReport<Omit<HubReport, "delta">> | null;

  constructor(env: Record<string, unknown>, ctx: DurableObjectState, counters: CounterSource, kind: "hub" | "pusher", hub: number) {
    this.#hub = followerIndex(kind, hub);
    const namespace = env.COORDINATOR;
    if (!isNamespace(namespace) || hub < 0) {
      this.#reports = null;
      return;
    }
    const shards = readCoordinatorConfig(env).shards;
    const coordinators = namespace as DurableObjectNamespace<Coordinator>;
    this.#reports = new LatestReport(ctx, counters, "hub_report", (report) => shardStub(coordinators, hub % shards).hubReport(report));
  }

  report(occupancy: HubOccupancy): void {
    this.#reports?.submit({ hub: this.#hub, ...occupancy, at: Date.now() });
  }
}
