/**
 * Headers the worker sets on an upgrade it forwards to a room: the edge's
 * verdict on the socket. The worker strips any a client sends itself.
 */

/** The room's own name (a room learns it from its first request). */
export const ROOM_NAME_HEADER = "x-room-name";
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

/** Which leaf of a sharded room the socket is for (docs/sharded-rooms.md), on upgrades the edge sends to a leaf. */
export const LEAF_INDEX_HEADER = "x-leaf-index";
/** On an upgrade the edge sends the root after a leaf refused it as full: `<index>:<sockets>`. */
export const LEAF_FULL_HEADER = "x-leaf-full";
/** On the root's answer to an upgrade: the body is a placement (which leaves take sockets), not a socket. */
export const PLACEMENT_HEADER = "x-leaf-placement";

/** Every header only the edge may set: the worker deletes these from what clients send. */
export const EDGE_HEADERS = [
  ROOM_NAME_HEADER,
  CAN_PUBLISH_HEADER,
  TOKEN_EXPIRES_HEADER,
  MEMBER_ID_HEADER,
  MEMBER_INFO_HEADER,
  MEMBER_VERIFIED_HEADER,
  LEAF_INDEX_HEADER,
  LEAF_FULL_HEADER,
] as const;
