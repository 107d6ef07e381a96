import { sign, verify } from "hono/jwt";
import { JwtTokenExpired, JwtTokenNotBefore } from "hono/utils/jwt/types";
import { isValidRoomName } from "../protocol";
import { checkMemberInfo, isValidMemberId } from "./members";
import { isPrintable } from "./text";

/**
 * One grant of a token: the rooms it opens (one exact `room`, or every room
 * whose name starts with `prefix`) and whether the holder may publish into
 * them (`pub`; absent: the token's own `pub`).
 */
export interface RoomGrant {
  /** Exact room name the grant opens. */
  room?: string;
  /** Room-name prefix the grant opens. */
  prefix?: string;
  /** Whether the holder may publish in the rooms this grant opens; absent: the token's own `pub`. */
  pub?: boolean;
}

/** Grants one token may carry: a connection follows at most MAX_ROOMS_PER_CONNECTION rooms, and a token travels in headers. */
export const MAX_GRANTS = 100;

/**
 * Claims of a subscribe token (an HS256 JWT signed with TOKEN_SECRET).
 *
 * A token names the rooms it opens with `room` (one exact name), `prefix`
 * (every room whose name starts with it), `grants` (several of either, each
 * with its own right to publish), or any of them together: a room is open
 * when any of them matches it.
 *
 * @see docs/security.md#claims
 */
export interface SubscribeClaims {
  /** Exact room name the token opens. */
  room?: string;
  /** Room-name prefix the token opens, e.g. "org-42:" for "org-42:chat" and "org-42:feed". */
  prefix?: string;
  /** Expiry, seconds since the epoch (JWT `exp`). Required: tokens without one are refused. */
  exp: number;
  /** Issue time, seconds since the epoch (JWT `iat`). */
  iat?: number;
  /**
   * Who the token was issued to (JWT `sub`): the socket's member id in the
   * room's presence (several sockets with one `sub` are one member), and
   * logged with refusals.
   */
  sub?: string;
  /**
   * Member data shown with the member in presence (a name, an avatar URL):
   * a JSON object of at most 1 KiB as JSON text. Signed with the token, so
   * other members can trust it. Ignored without `sub`.
   */
  info?: Record<string, unknown>;
  /** True when the holder may publish over the socket; absent or false = listen only. */
  pub?: boolean;
  /** Further rooms and prefixes, each with its own `pub` (a multiplexed connection follows several). */
  grants?: RoomGrant[];
}

/**
 * What to put in a token (`mintToken`): the claims, with `exp` now + `ttlSeconds` unless given.
 *
 * @see docs/security.md#minting
 */
export type TokenRequest = Omit<SubscribeClaims, "exp" | "iat"> & {
  /** Absolute expiry (seconds since the epoch); wins over `ttlSeconds`. */
  exp?: number;
  /**
   * Lifetime in seconds when `exp` is not given.
   * @default 3600
   */
  ttlSeconds?: number;
};

export const DEFAULT_TOKEN_TTL_SECONDS = 3600;
/** Longest `sub` accepted; tokens travel in URLs and headers. */
const MAX_SUBJECT_LENGTH = 256;
/** Room names are at most 64 characters, so a longer prefix could match nothing. */
const MAX_PREFIX_LENGTH = 64;

/** What `verifyToken` found: the token's claims, or why it is refused (`bad_token` or `expired_token`, with words for people). */
export type TokenCheck =
  | { ok: true; claims: SubscribeClaims }
  | { ok: false; reason: "bad_token" | "expired_token"; message: string };

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Shape errors in a room or prefix claim (of the token, or of one grant), or null. */
function roomsProblem(room: unknown, prefix: unknown, where: string): string | null {
  if (room !== undefined && (typeof room !== "string" || !isValidRoomName(room))) {
    return `the room claim${where} must be a valid room name`;
  }
  if (prefix !== undefined && (typeof prefix !== "string" || prefix === "" || prefix.length > MAX_PREFIX_LENGTH || !isPrintable(prefix))) {
    return `the prefix claim${where} must be a non-empty string of at most 64 characters, well-formed, without control characters`;
  }
  return null;
}

function grantsProblem(grants: unknown): string | null {
  if (grants === undefined) return null;
  if (!Array.isArray(grants) || grants.length > MAX_GRANTS) return `the grants claim must be a list of at most ${MAX_GRANTS} grants`;
  for (const [i, grant] of grants.entries()) {
    if (!isObject(grant)) return `grant ${i} must be an object`;
    if (grant.room === undefined && grant.prefix === undefined) return `grant ${i} names no room (room or prefix)`;
    const problem = roomsProblem(grant.room, grant.prefix, ` of grant ${i}`);
    if (problem) return problem;
    if (grant.pub !== undefined && typeof grant.pub !== "boolean") return `the pub claim of grant ${i} must be true or false`;
  }
  return null;
}

/** Shape errors in a claim set, or null when it is a usable subscribe token. */
function claimsProblem(payload: Record<string, unknown>): string | null {
  const { room, prefix, exp, sub, pub, grants } = payload;
  if (typeof exp !== "number" || !Number.isFinite(exp)) return "the token has no expiry (exp)";
  if (room === undefined && prefix === undefined && (grants === undefined || (Array.isArray(grants) && grants.length === 0))) {
    return "the token names no room (room, prefix or grants)";
  }
  const rooms = roomsProblem(room, prefix, "") ?? grantsProblem(grants);
  if (rooms) return rooms;
  if (sub !== undefined && (typeof sub !== "string" || sub.length > MAX_SUBJECT_LENGTH || (sub !== "" && !isValidMemberId(sub)))) {
    return "the sub claim must be a string of at most 256 characters, well-formed, without control characters";
  }
  if (pub !== undefined && typeof pub !== "boolean") return "the pub claim must be true or false";
  if (payload.info !== undefined) {
    const info = checkMemberInfo(payload.info, "the info claim");
    if (!info.ok) return info.message;
  }
  return null;
}

function pickClaims(payload: Record<string, unknown>): SubscribeClaims {
  const claims: SubscribeClaims = { exp: payload.exp as number };
  if (typeof payload.room === "string") claims.room = payload.room;
  if (typeof payload.prefix === "string") claims.prefix = payload.prefix;
  if (typeof payload.iat === "number") claims.iat = payload.iat;
  if (typeof payload.sub === "string") claims.sub = payload.sub;
  if (typeof payload.pub === "boolean") claims.pub = payload.pub;
  if (payload.info !== undefined) claims.info = payload.info as Record<string, unknown>;
  if (Array.isArray(payload.grants)) {
    claims.grants = (payload.grants as Record<string, unknown>[]).map((g) => {
      const grant: RoomGrant = {};
      if (typeof g.room === "string") grant.room = g.room;
      if (typeof g.prefix === "string") grant.prefix = g.prefix;
      if (typeof g.pub === "boolean") grant.pub = g.pub;
      return grant;
    });
  }
  return claims;
}

/**
 * Mints a subscribe token. For backends (hand the token to a browser) and
 * tests. Throws on claims that verification would refuse, so a bad token is
 * caught where it is made rather than where it is used.
 *
 * @param secret the service's TOKEN_SECRET.
 * @param request the claims: the rooms (`room`, `prefix`, `grants`), `sub`, `info`, `pub`, and `exp` or `ttlSeconds`.
 * @param [now=Date.now()] the issue time, epoch milliseconds.
 * @returns the token, an HS256 JWT.
 * @throws {TypeError} for an empty secret, or claims that `verifyToken` would refuse.
 *
 * @example
 * ```ts
 * import { mintToken } from "edge-fanout";
 *
 * // In your back end, for a signed-in user: ten minutes in "lobby", allowed to publish.
 * const token = await mintToken(secret, { room: "lobby", sub: "user-17", info: { name: "Ada" }, pub: true, ttlSeconds: 600 });
 * ```
 *
 * @see docs/security.md#minting
 */
export async function mintToken(secret: string, request: TokenRequest, now: number = Date.now()): Promise<string> {
  if (secret === "") throw new TypeError("mintToken needs a non-empty secret");
  const { ttlSeconds, exp, ...rest } = request;
  const iat = Math.floor(now / 1000);
  const payload: Record<string, unknown> = { ...rest, iat, exp: exp ?? iat + (ttlSeconds ?? DEFAULT_TOKEN_TTL_SECONDS) };
  for (const key of Object.keys(payload)) if (payload[key] === undefined) delete payload[key];
  const problem = claimsProblem(payload);
  if (problem) throw new TypeError(problem);
  return sign(payload, secret, "HS256");
}

/**
 * Verifies a subscribe token: HS256 signature with `secret`, not expired, not
 * used before `nbf`, and a usable claim set. Never throws.
 *
 * @param token the token as presented.
 * @param secret the service's TOKEN_SECRET.
 * @returns `{ ok: true, claims }`, or `{ ok: false, reason, message }`.
 *
 * @example
 * ```ts
 * import { verifyToken } from "edge-fanout";
 *
 * const check = await verifyToken(token, secret);
 * if (check.ok) console.log("member", check.claims.sub, "until", check.claims.exp);
 * else console.log(check.reason, check.message); // "expired_token", "the token has expired"
 * ```
 *
 * @see docs/security.md#claims
 */
export async function verifyToken(token: string, secret: string): Promise<TokenCheck> {
  let payload: Record<string, unknown>;
  try {
    // `iat` in the future is clock skew between issuer and edge, not forgery; the signature decides.
    payload = await verify(token, secret, { alg: "HS256", iat: false });
  } catch (error) {
    if (error instanceof JwtTokenExpired) return { ok: false, reason: "expired_token", message: "the token has expired" };
    if (error instanceof JwtTokenNotBefore) return { ok: false, reason: "bad_token", message: "the token is not valid yet" };
    return { ok: false, reason: "bad_token", message: "the token is not a valid signed token" };
  }
  if (!isObject(payload)) return { ok: false, reason: "bad_token", message: "the token payload is not an object" };
  const problem = claimsProblem(payload);
  if (problem) return { ok: false, reason: "bad_token", message: problem };
  return { ok: true, claims: pickClaims(payload) };
}

/** A token's grants as one list: its own `room`/`prefix` first, each grant's `pub` resolved. */
export function grantsOf(claims: SubscribeClaims): RoomGrant[] {
  const own = claims.pub === true;
  const grants: RoomGrant[] = [];
  if (claims.room !== undefined) grants.push({ room: claims.room, pub: own });
  if (claims.prefix !== undefined) grants.push({ prefix: claims.prefix, pub: own });
  for (const grant of claims.grants ?? []) grants.push({ ...grant, pub: grant.pub ?? own });
  return grants;
}

/**
 * What `grants` allow in `room`: null when no grant opens it, else whether
 * the holder may publish there (any grant that opens it and allows publishing
 * does).
 */
export function accessTo(grants: readonly RoomGrant[], room: string): { pub: boolean } | null {
  let access: { pub: boolean } | null = null;
  for (const grant of grants) {
    const opens = (grant.room !== undefined && grant.room === room) || (grant.prefix !== undefined && room.startsWith(grant.prefix));
    if (!opens) continue;
    if (grant.pub === true) return { pub: true };
    access = { pub: false };
  }
  return access;
}

/** Whether `claims` open `room`: its exact name, a name starting with the prefix, or one of its grants. */
export function tokenAllowsRoom(claims: SubscribeClaims, room: string): boolean {
  return accessTo(grantsOf(claims), room) !== null;
}
