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
