/**
 * Access control: the publish key for HTTP publishing and operations routes,
 * subscribe tokens and the origin allow-list for sockets. docs/security.md
 * describes the secrets, the token claims and every refusal.
 */
export { requirePublishKey, secretsEqual, bearerCredentials } from "./publish-key";
export { connectionAccess, forwardedHeaders, subscribeAccess, type ForwardEnv } from "./subscribe-access";
export { warnWhenOpen, openModeGaps } from "./open-mode";
export { mintToken, verifyToken, tokenAllowsRoom, DEFAULT_TOKEN_TTL_SECONDS, type SubscribeClaims, type TokenRequest, type TokenCheck } from "../../common/tokens";
export { FANOUT_SUBPROTOCOL, TOKEN_SUBPROTOCOL_PREFIX, parseSubprotocolOffer } from "./subprotocol";
export { refusalAnswer, type RefusalReason } from "./refusal";
