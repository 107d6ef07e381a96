import { HUB_FULL_HEADER, hubName } from "../common/edge-requests";
import type { Limits } from "../common/settings";
import type { Env } from "./env";

/** Hubs an upgrade tries before it is refused as over capacity. */
const ATTEMPTS = 3;

/**
 * Opens a multiplexed connection on a hub (docs/multiplexing.md): one of
 * MULTIPLEX_HUBS, at random, so connections spread evenly without anyone
 * keeping count; a hub that holds MAX_CONNECTIONS_PER_HUB says so and the
 * edge tries another, up to ATTEMPTS, then answers 503 `over_capacity`.
 * Returns the hub's answer and its number (the local server remembers which
 * hubs it used, to close their connections on shutdown).
 *
 * `headers` are the edge's (the validated identity and grants already set).
 */
export async function openConnection(env: Env, limits: Limits, url: string, headers: Headers): Promise<{ answer: Response; hub: number | null }> {
  const hubs = env.HUBS;
  if (!hubs) {
    return { answer: Response.json({ error: "not_found", message: "this service has no multiplexed connections (no HUBS binding)" }, { status: 404 }), hub: null };
  }
  const tried = new Set<number>();
  const count = limits.MULTIPLEX_HUBS;
  for (let attempt = 0; attempt < Math.min(ATTEMPTS, count); attempt++) {
    let hub = Math.floor(Math.random() * count);
    while (tried.has(hub)) hub = (hub + 1) % count;
    tried.add(hub);
    const answer = await hubs.get(hubs.idFromName(hubName(hub))).fetch(new Request(url, { headers }));
    if (answer.headers.get(HUB_FULL_HEADER) === null) return { answer, hub };
  }
  return {
    answer: Response.json({ error: "over_capacity", message: "every hub tried holds its maximum of connections; retry" }, { status: 503, headers: { "Retry-After": "2" } }),
    hub: null,
  };
}
