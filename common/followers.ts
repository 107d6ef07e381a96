/**
 * The objects that follow a room from its root, each pushed every flush:
 * - `leaf`: a leaf of a sharded room (LEAVES, named `<room>/<index>`), holding the room's own sockets;
 * - `hub`: a hub of multiplexed connections (HUBS, named `hub-<n>`);
 * - `pusher`: a hub of Pusher connections (PUSHER_HUBS, named `pusher-<n>`).
 * A root keeps its followers in one directory, each at an index: a leaf's own
 * index, a hub's number past its kind's base. Only this module knows the bases.
 */

export type FollowerKind = "leaf" | "hub" | "pusher";

/** Where each kind's indices start; a kind holds at most a million of its objects. */
const BASES: Readonly<Record<FollowerKind, number>> = { leaf: 0, hub: 1_000_000, pusher: 2_000_000 };
const SPAN = 1_000_000;

/** Follower `n` of `kind`, as the root's directory numbers it. */
export function followerIndex(kind: FollowerKind, n: number): number {
  return BASES[kind] + n;
}

/** Which follower a directory index is. */
export function followerAt(index: number): { kind: FollowerKind; n: number } {
  if (index >= BASES.pusher) return { kind: "pusher", n: index - BASES.pusher };
  if (index >= BASES.hub) return { kind: "hub", n: index - BASES.hub };
  return { kind: "leaf", n: index };
}

/** Whether a directory index is a leaf (it holds the room's own sockets) rather than a hub of either kind. */
export function isLeaf(index: number): boolean {
  return index < SPAN;
}

/** The name of hub `n` of a hub kind in its namespace. */
export function hubName(kind: Exclude<FollowerKind, "leaf">, n: number): string {
  return `${kind}-${n}`;
}

/** The kind and number a hub's name says, or null for a name no hub has. */
export function parseHubName(name: string): { kind: Exclude<FollowerKind, "leaf">; n: number } | null {
  const match = /^(hub|pusher)-(\d{1,6})$/.exec(name);
  return match ? { kind: match[1] as "hub" | "pusher", n: Number(match[2]) } : null;
}
