import { memberHeaders } from "../../common/edge-requests";
import { checkMemberInfo, isValidMemberId, MAX_MEMBER_ID_LENGTH } from "../../common/members";
import type { SubscribeClaims } from "../../common/tokens";

/** Query parameters an open-mode socket names itself with. */
export const MEMBER_QUERY = "member";
export const MEMBER_INFO_QUERY = "info";

export type MemberVerdict = { ok: true; headers: Record<string, string> } | { ok: false; message: string };

/**
 * Who a socket is in the room's presence, decided at the edge.
 *
 * - With a token: its `sub` is the member id and its `info` claim the member
 *   data, both signed by the issuer (verified). `?member=` and `?info=` are
 *   ignored, so a token holder cannot pose as someone else.
 * - In open mode (no TOKEN_SECRET): `?member=<id>` and optional
 *   `?info=<JSON object>` name the socket. Anyone can choose any name, so
 *   such members are marked `verified: false`.
 * - Otherwise the socket is in the room without being a member.
 *
 * Token claims were checked with the token (tokens.ts); a bad `?info=` is
 * refused here with 400.
 */
export function memberVerdict(claims: SubscribeClaims | null, query: URLSearchParams): MemberVerdict {
  if (claims !== null) {
    if (claims.sub === undefined || !isValidMemberId(claims.sub)) return { ok: true, headers: {} };
    const info = claims.info === undefined ? null : JSON.stringify(claims.info);
    return { ok: true, headers: memberHeaders(claims.sub, info, true) };
  }
  const id = query.get(MEMBER_QUERY);
  const rawInfo = query.get(MEMBER_INFO_QUERY);
  if (id === null) {
    if (rawInfo !== null) return { ok: false, message: "info needs member: ?member=<id>&info=<JSON object>" };
    return { ok: true, headers: {} };
  }
  if (!isValidMemberId(id)) return { ok: false, message: `member must be 1-${MAX_MEMBER_ID_LENGTH} characters of well-formed text without control characters` };
  if (rawInfo === null) return { ok: true, headers: memberHeaders(id, null, false) };
  let parsed: unknown;
  try {
    parsed = JSON.parse(rawInfo);
  } catch {
    return { ok: false, message: "info is not JSON: give a JSON object, URL-encoded" };
  }
  const info = checkMemberInfo(parsed, "info");
  if (!info.ok) return { ok: false, message: info.message };
  return { ok: true, headers: memberHeaders(id, info.json, false) };
}
