import { leafName, LEAF_FULL_HEADER, PLACEMENT_HEADER, type Placement } from "../common/edge-requests";
import type { Env } from "./env";

/** Sockets this isolate may still open on one leaf, until the root stops counting them as on their way. */
interface Grant {
  index: number;
  grant: number;
  until: number;
}

interface Cached {
  /** Each placement's grants keep their own deadline: the root reserved them until then. */
  grants: Grant[];
}

/** Rooms whose placement this isolate remembers (the oldest is forgotten first). */
const CACHE_ROOMS = 10_000;
const cache = new Map<string, Cached>();
/**
 * Rooms of this isolate with a placement being asked for: upgrades of the room that arrive
 * meanwhile wait for that answer and take its grants, rather than each asking the root. Every
 * placement reserves sockets on the leaves for its TTL, so parallel asks would make the leaves
 * look full and open more of them. Waiters poll with a timer of their own: a request must not
 * await a promise another request settles (workerd runs the continuation in the settling
 * request's context, where the waiter's I/O is refused, and cancels the waiter as hung).
 */
const asking = new Set<string>();
/** Rooms this isolate was given a placement for lately (when): only their upgrades wait on asks. */
const placedRooms = new Map<string, number>();
/** How long a room counts as sharded after its last placement here. */
const PLACED_MEMORY_MS = 60_000;
/** How often, and how long at most, an upgrade waits for another upgrade's ask. */
const ASK_POLL_MS = 2;
const ASK_WAIT_MS = 2_000;

/**
 * Opens a socket into `room` for the edge (docs/sharded-rooms.md).
 *
 * A room below ROOM_SHARD_SOCKETS is one object: the upgrade goes to it and
 * it accepts, with no extra hop. Past it, the root answers with a placement
 * instead of a socket: grants of sockets on leaves that have room. The edge
 * opens the socket on one of them (at random, weighted by what is left) and
 * keeps the rest of the grants for the placement's TTL, so a storm of
 * connects costs the root one placement per PLACEMENT_GRANT sockets rather
 * than one per socket. A leaf that is full refuses; the edge then asks the
 * root again, telling it so.
 *
 * `headers` are the edge's (the validated identity already set).
 */
export async function openRoomSocket(env: Env, room: string, url: string, headers: Headers): Promise<Response> {
  const index = take(room);
  if (index !== null) {
    const answer = await upgradeLeaf(env, room, index, url, headers);
    const full = answer.headers.get(LEAF_FULL_HEADER);
    if (full === null) return answer;
    cache.delete(room);
    headers = withHeader(headers, LEAF_FULL_HEADER, full);
  }
  // A sharded room whose placement another upgrade is asking for: its grants may cover this one
  // too. Waiters that find none when it is answered ask next, one of them at a time. A room of one
  // object (no placement here lately) skips this: its root takes the socket itself.
  const placed = isPlaced(room);
  if (index === null && placed) {
    const deadline = Date.now() + ASK_WAIT_MS;
    while (asking.has(room) && Date.now() < deadline) {
      await sleep(ASK_POLL_MS);
      const granted = take(room);
      if (granted === null) continue;
      const answer = await upgradeLeaf(env, room, granted, url, headers);
      const full = answer.headers.get(LEAF_FULL_HEADER);
      if (full === null) return answer;
      cache.delete(room);
      headers = withHeader(headers, LEAF_FULL_HEADER, full);
      break;
    }
  }
  const root = env.ROOMS.get(env.ROOMS.idFromName(room));
  const first = placed && !asking.has(room);
  if (first) asking.add(room);
  try {
    const answer = await root.fetch(new Request(url, { headers }));
    if (answer.headers.get(PLACEMENT_HEADER) === null) return answer;
    const placement = (await answer.json()) as Placement;
    const until = Date.now() + placement.ttlMs;
    notePlaced(room);
    remember(room, placement.leaves.filter((l) => l.grant > 0).map((l) => ({ index: l.index, grant: l.grant, until })));
  } finally {
    if (first) asking.delete(room);
  }
  const chosen = take(room);
  if (chosen === null) return roomFull("the room holds its maximum of sockets", 10);
  const leafAnswer = await upgradeLeaf(env, room, chosen, url, headers);
  if (leafAnswer.headers.get(LEAF_FULL_HEADER) === null) return leafAnswer;
  cache.delete(room);
  return roomFull("the room's leaves are full; retry", 1);
}

/** `headers` with `name` set, as a copy: the edge's headers may be the request's own, which cannot change. */
function withHeader(headers: Headers, name: string, value: string): Headers {
  const copy = new Headers(headers);
  copy.set(name, value);
  return copy;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function isPlaced(room: string): boolean {
  const at = placedRooms.get(room);
  if (at === undefined) return false;
  if (Date.now() - at < PLACED_MEMORY_MS) return true;
  placedRooms.delete(room);
  return false;
}

function notePlaced(room: string): void {
  placedRooms.delete(room);
  if (placedRooms.size >= CACHE_ROOMS) {
    const oldest = placedRooms.keys().next().value;
    if (oldest !== undefined) placedRooms.delete(oldest);
  }
  placedRooms.set(room, Date.now());
}

/** Takes one granted socket on a leaf of `room`, or null when this isolate holds no grant for it. */
function take(room: string): number | null {
  const cached = cache.get(room);
  if (!cached) return null;
  const now = Date.now();
  cached.grants = cached.grants.filter((g) => g.until > now && g.grant > 0);
  if (cached.grants.length === 0) {
    cache.delete(room);
    return null;
  }
  let total = 0;
  for (const g of cached.grants) total += g.grant;
  let ticket = Math.random() * total;
  let chosen = cached.grants[cached.grants.length - 1] as Grant;
  for (const g of cached.grants) {
    ticket -= g.grant;
    if (ticket < 0) {
      chosen = g;
      break;
    }
  }
  chosen.grant -= 1;
  if (chosen.grant <= 0) cached.grants = cached.grants.filter((g) => g.grant > 0);
  return chosen.index;
}

function upgradeLeaf(env: Env, room: string, index: number, url: string, headers: Headers): Promise<Response> {
  const leafHeaders = new Headers(headers);
  leafHeaders.delete(LEAF_FULL_HEADER);
  const stub = env.LEAVES.get(env.LEAVES.idFromName(leafName(room, index)));
  return stub.fetch(new Request(url, { headers: leafHeaders }));
}

function roomFull(message: string, retryAfter: number): Response {
  return Response.json({ error: "room_full", message }, { status: 503, headers: { "Retry-After": String(retryAfter) } });
}

/**
 * Adds a placement's grants to what this isolate holds for the room (the root reserved both), each
 * with its own deadline: a grant dropped before its deadline would stay reserved at the root and
 * make its leaf look fuller than it is.
 */
function remember(room: string, grants: Grant[]): void {
  const held = cache.get(room)?.grants ?? [];
  const entry: Cached = { grants: [...held, ...grants] };
  cache.delete(room);
  if (cache.size >= CACHE_ROOMS) {
    const oldest = cache.keys().next().value;
    if (oldest !== undefined) cache.delete(oldest);
  }
  cache.set(room, entry);
}
