import { HUB_FULL_HEADER } from "../common/edge-requests";
import { hubName } from "../common/followers";

/** Hubs an upgrade tries before it is refused as over capacity. */
const ATTEMPTS = 3;

/** What placing a connection needs of a hubs' namespace: a hub by name, and its fetch. */
export interface HubNamespace {
  idFromName(name: string): DurableObjectId;
  get(id: DurableObjectId): { fetch(request: Request): Promise<Response> };
}

/** Hubs of one kind: their namespace and how many there are. */
export interface HubSet {
  kind: "hub" | "pusher";
  namespace: HubNamespace;
  count: number;
}

/**
 * Opens a connection that follows many rooms on a hub of its kind
 * (docs/multiplexing.md, docs/pusher.md): one of `count`, at random, so
 * connections spread evenly without anyone keeping count; a hub that holds
 * MAX_CONNECTIONS_PER_HUB says so and the edge tries another, up to ATTEMPTS,
 * then answers 503 `over_capacity`. Returns the hub's answer and its name
 * (the local server remembers which hubs it used, to close their connections
 * on shutdown).
 *
 * `headers` are the edge's (the validated identity and grants already set).
 */
export async function openConnection(hubs: HubSet, url: string, headers: Headers): Promise<{ answer: Response; hub: string | null }> {
  const tried = new Set<number>();
  for (let attempt = 0; attempt < Math.min(ATTEMPTS, hubs.count); attempt++) {
    let n = Math.floor(Math.random() * hubs.count);
    while (tried.has(n)) n = (n + 1) % hubs.count;
    tried.add(n);
    const name = hubName(hubs.kind, n);
    const answer = await hubs.namespace.get(hubs.namespace.idFromName(name)).fetch(new Request(url, { headers }));
    if (answer.headers.get(HUB_FULL_HEADER) === null) return { answer, hub: name };
  }
  return {
    answer: Response.json({ error: "over_capacity", message: "every hub tried holds its maximum of connections; retry" }, { status: 503, headers: { "Retry-After": "2" } }),
    hub: null,
  };
}
