/**
 * The hook seam's benchmark worker: the service's app at the root, with
 * ValidatingRoom as ROOMS. Its beforePublish does what a typical one does,
 * once per message: checks the shape of the load tool's payload
 * (`{"k","t","p"}`, load/src/publisher.ts) and publishes it as sent, or
 * (BENCH_HOOK=transform) with a field added.
 */
import { createFanoutApp, Room, type FanoutEnv, type PublishDecision, type PublishRequest } from "../../../worker/lib";

export { Coordinator } from "../../../worker/lib";

interface Payload {
  k: number;
  t: number;
  p: string;
}

function isPayload(data: unknown): data is Payload {
  if (typeof data !== "object" || data === null) return false;
  const { k, t, p } = data as Record<string, unknown>;
  return typeof k === "number" && typeof t === "number" && typeof p === "string" && p.length <= 65_536;
}

export class ValidatingRoom extends Room<FanoutEnv & { BENCH_HOOK?: string }> {
  protected override beforePublish({ data, source }: PublishRequest): PublishDecision {
    if (!isPayload(data)) return { refuse: "not a load-tool payload" };
    if (this.env.BENCH_HOOK === "transform") return { data: { ...data, via: source.kind } };
    return undefined;
  }
}

export default createFanoutApp();
