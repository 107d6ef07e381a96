/**
 * Who a socket is in a room's presence: the rules for a member's id and data,
 * checked at the edge (token claims, open-mode parameters) and relied on by
 * the objects.
 */
import { isPrintable, wellFormedJson } from "./text";
import { utf8Length } from "./utf8";

/** Longest member id: a token's `sub` is bounded the same way. */
export const MAX_MEMBER_ID_LENGTH = 256;
/** Largest member data, bytes of its JSON text. */
export const MAX_MEMBER_INFO_BYTES = 1024;

/** Who a socket is: decided at the edge, kept with the socket so it survives hibernation. */
export interface MemberIdentity {
  id: string;
  /** Member data as JSON text (at most MAX_MEMBER_INFO_BYTES), or absent. */
  info?: string;
  /** False for a name the socket chose itself (open mode). */
  verified: boolean;
}

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
  const json = wellFormedJson(value);
  if (json === null) return { ok: false, message: `${source} must hold well-formed text (no lone surrogate)` };
  if (utf8Length(json) > MAX_MEMBER_INFO_BYTES) {
    return { ok: false, message: `${source} must be at most ${MAX_MEMBER_INFO_BYTES} bytes as JSON` };
  }
  return { ok: true, json };
}

/**
 * Whether `id` can name a member: 1 to MAX_MEMBER_ID_LENGTH characters of
 * well-formed text without control characters (it travels URI-encoded in a
 * header, and is shown to other members).
 */
export function isValidMemberId(id: string): boolean {
  return id.length > 0 && id.length <= MAX_MEMBER_ID_LENGTH && isPrintable(id);
}
