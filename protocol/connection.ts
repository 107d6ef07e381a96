/**
 * What a client needs before the room has said anything: the protocol's
 * version, the subprotocols of the upgrade, and the heartbeat. Every other
 * figure a client needs (window, frame budget) is announced in the welcome.
 */

/** The version of this protocol; the subprotocol a client offers (`fanout.v1`) names it. */
export const PROTOCOL_VERSION = 1;

/**
 * The heartbeat: the text `ping`, answered `pong` by the runtime itself
 * (setWebSocketAutoResponse), so a ping never wakes a hibernated room.
 */
export const PING = "ping";
export const PONG = "pong";

/** How often clients send `ping`; the server closes sockets silent for its idle timeout (90 s by default) with 4010. */
export const PING_INTERVAL_SECONDS = 25;

/**
 * Subprotocol clients offer and the server selects. Browsers cannot set
 * headers on a WebSocket but can offer subprotocols:
 * `new WebSocket(url, [SUBPROTOCOL, TOKEN_SUBPROTOCOL_PREFIX + jwt])` carries a
 * subscribe token outside the URL (docs/security.md).
 */
export const SUBPROTOCOL = "fanout.v1";
/** Prefix of the offered subprotocol that carries a subscribe token: `token.<jwt>`. */
export const TOKEN_SUBPROTOCOL_PREFIX = "token.";
