/**
 * What the edge (the worker) and the objects say to each other in request
 * headers: the edge's verdict on a socket it forwards (who it is, whether it
 * may publish, when its token expires), and the placement of sockets on the
 * leaves of a sharded room (docs/sharded-rooms.md). The worker strips any of
 * these headers a client sends itself.
 */
import { isValidMemberId, type MemberIdentity } from "./members";
import type { RoomGrant } from "./tokens";

/** Whether the socket may publish ("true"/"false"), decided from its token. */
export const CAN_PUBLISH_HEADER = "x-can-publish";
/** When the token the socket was admitted with expires (epoch ms). */
export const TOKEN_EXPIRES_HEADER = "x-token-expires";
/** The member the socket is in the room's presence (URI-encoded): a token's `sub`, or a name chosen in open mode. */
export const MEMBER_ID_HEADER = "x-member-id";
/** The member's data, JSON text of an object (URI-encoded), already checked at the edge. */
export const MEMBER_INFO_HEADER = "x-member-info";
/** "true" when a token vouches for the member id, "false" for a self-chosen name. */
export const MEMBER_VERIFIED_HEADER = "x-member-verified";

/** On an upgrade the edge sends the root after a leaf refused it as full: `<index>:<sockets>`. */
export const LEAF_FULL_HEADER = "x-leaf-full";
/** On the root's answer to an upgrade: the body is a placement (which leaves take sockets), not a socket. */
export const PLACEMENT_HEADER = "x-leaf-placement";

/**
 * On a room's answer to an upgrade it refused (a hook's onConnect): the close
 * code the socket is to be closed with. The edge answers a client that can
 * take one with a socket closed at once with that code (a browser sees only
 * 1006 for an HTTP refusal), and passes the status and JSON body on to one
 * that asked for `X-Refusal: http`.
 */
export const REFUSAL_CLOSE_HEADER = "x-refusal-close";

/**
 * On an upgrade of a multiplexed connection: the rooms its token grants, as
 * URI-encoded JSON of RoomGrant[] (absent: every room, with publishing: the
 * service has no TOKEN_SECRET).
 */
export const GRANTS_HEADER = "x-grants";

/** Every header only the edge may set: the worker deletes these from what clients send. */
export const EDGE_HEADERS = [
  CAN_PUBLISH_HEADER,
  TOKEN_EXPIRES_HEADER,
  MEMBER_ID_HEADER,
  MEMBER_INFO_HEADER,
  MEMBER_VERIFIED_HEADER,
  LEAF_FULL_HEADER,
  REFUSAL_CLOSE_HEADER,
  GRANTS_HEADER,
] as const;

/**
 * The edge's headers for a member (header values must be Latin-1, so ids and
 * data travel URI-encoded). `infoJson` is JSON text already checked by
 * `checkMemberInfo`.
 */
export function memberHeaders(id: string, infoJson: string | null, verified: boolean): Record<string, string> {
  const headers: Record<string, string> = {
    [MEMBER_ID_HEADER]: encodeURIComponent(id),
    [MEMBER_VERIFIED_HEADER]: verified ? "true" : "false",
  };
  if (infoJson !== null) headers[MEMBER_INFO_HEADER] = encodeURIComponent(infoJson);
  return headers;
}

/** The member an upgrade forwarded by the edge names, or null for a socket without an identity. */
export function memberFromHeaders(headers: Headers): MemberIdentity | null {
  const id = headers.get(MEMBER_ID_HEADER);
  if (id === null) return null;
  try {
    const identity: MemberIdentity = { id: decodeURIComponent(id), verified: headers.get(MEMBER_VERIFIED_HEADER) === "true" };
    const info = headers.get(MEMBER_INFO_HEADER);
    if (info !== null) identity.info = decodeURIComponent(info);
    return isValidMemberId(identity.id) ? identity : null;
  } catch {
    // Only the edge sets these; a value that does not decode is not an identity.
    return null;
  }
}

/**
 * Which leaves take new sockets (the body of a placement answer): each grant
 * is how many sockets the edge may open on that leaf without asking again.
 */
export interface Placement {
  leaves: { index: number; grant: number }[];
  /** How long the edge may use the grants; the root counts them as taken until then. */
  ttlMs: number;
}

/** The name of leaf `index` of `room` in the LEAVES namespace (room names never hold a slash). */
export function leafName(room: string, index: number): string {
  return `${room}/${index}`;
}

/** The room and index a leaf's name says, or null for a name no leaf has. */
export function parseLeafName(name: string): { room: string; index: number } | null {
  const slash = name.lastIndexOf("/");
  const index = Number(name.slice(slash + 1));
  if (slash <= 0 || !/^\d{1,6}$/.test(name.slice(slash + 1)) || !Number.isSafeInteger(index)) return null;
  return { room: name.slice(0, slash), index };
}

/** The value of GRANTS_HEADER for `grants`. */
export function encodeGrants(grants: readonly RoomGrant[]): string {
  return encodeURIComponent(JSON.stringify(grants));
}

/** The grants an upgrade forwarded by the edge carries: null for every room (no header), [] when the header does not decode. */
export function grantsFromHeaders(headers: Headers): RoomGrant[] | null {
  const value = headers.get(GRANTS_HEADER);
  if (value === null) return null;
  try {
    const parsed: unknown = JSON.parse(decodeURIComponent(value));
    return Array.isArray(parsed) ? (parsed as RoomGrant[]) : [];
  } catch {
    // Only the edge sets it; a value that does not decode grants nothing.
    return [];
  }
}

/** On a hub's answer to an upgrade: it holds its maximum of connections; the edge tries another. */
export const HUB_FULL_HEADER = "x-hub-full";
