import { DurableObject } from "cloudflare:workers";

/** Registry of live rooms and cross-room broadcast (one shard of it). */
export class Coordinator extends DurableObject<Record<string, unknown>> {}
