import { utf8Length } from "../../worker/utf8";
import { MEMBER_ID_HEADER, MEMBER_INFO_HEADER, MEMBER_VERIFIED_HEADER } from "./headers";
import type { MemberIdentity } from "./socket-state";

/** Longest member id: a token's `sub` is bounded the same way. */
export const MAX_MEMBER_ID_LENGTH = 256;
/** Largest member data, bytes of its JSON text. */
export const MAX_MEMBER_INFO_BYTES = 1024;

export type MemberInfoCheck = { ok: true; json: string } | { ok: false; message: string };

/**
 * Member data must be a JSON object of at most MAX_MEMBER_INFO_BYTES as JSON
 * text: it is sent to every socket of the room with each snapshot and join,
 * and kept in the socket's attachment (at most 16 KiB).
 */
export function checkMemberInfo(value: unknown, source: string): MemberInfoCheck {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, message: `${source} must be a JSON object` };
  }
  const json = JSON.stringify(value);
  if (utf8Length(json) > MAX_MEMBER_INFO_BYTES) {
    return { ok: false, message: `${source} must be at most ${MAX_MEMBER_INFO_BYTES} bytes as JSON` };
  }
  return { ok: true, json };
}

/** Whether `id` can name a member: a non-empty string of at most MAX_MEMBER_ID_LENGTH characters. */
export function isValidMemberId(id: string): boolean {
  return id.length > 0 && id.length <= MAX_MEMBER_ID_LENGTH;
}

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
