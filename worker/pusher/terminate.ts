import { forEachBounded } from "../../common/bounded";
import { hubName } from "../../common/followers";
import type { PusherHub } from "../../durable-objects/pusher/pusher-hub";

/** Hubs asked at once. */
const CONCURRENT_HUBS = 16;

/**
 * `POST /apps/{app_id}/users/{user_id}/terminate_connections`
 * (docs/pusher.md#the-http-api): every Pusher hub closes the connections
 * signed in as `user` (PusherHub.terminate). A connection may be on any hub,
 * and a hub's report to the registry can lag its connections, so every hub
 * the service places connections on is asked (MULTIPLEX_HUBS of them): rare
 * work, and exact. Returns the connections closed.
 */
export async function terminateUser(hubs: DurableObjectNamespace<PusherHub>, hubCount: number, user: string): Promise<number> {
  let closed = 0;
  const numbers = Array.from({ length: hubCount }, (_, n) => n);
  await forEachBounded(numbers, CONCURRENT_HUBS, async (n) => {
    closed += await hubs.get(hubs.idFromName(hubName("pusher", n))).terminate(user);
  });
  return closed;
}
