/**
 * What a socket keeps through hibernation (serializeAttachment), and how the
 * edge's verdict on an upgrade becomes it.
 */
import { CAN_PUBLISH_HEADER, memberFromHeaders, TOKEN_EXPIRES_HEADER } from "../../common/edge-requests";
import type { MemberIdentity } from "../../common/members";
import type { JsonObject } from "../../protocol/json";

/** Survives hibernation; keep it well under the platform's 16 KiB. */
export interface SocketAttachment {
  id: string;
  connectedAt: number;
  /** May this socket publish frames into the room? */
  canPublish: boolean;
  /** When the socket's token expires (epoch ms); null when it was admitted without one. */
  expiresAt: number | null;
  /** Last client frame as of the last write (rewritten at most every ACTIVITY_PERSIST_MS), so idleness survives hibernation. */
  activeAt?: number;
  /** The member this socket is, when it has an identity (a token's `sub`, or a self-chosen name in open mode). */
  member?: MemberIdentity;
  /** What the room's hooks attached (onConnect, connection.setData): a JSON object of at most MAX_CONNECTION_DATA_BYTES as JSON. */
  data?: JsonObject;
}

/** The attachment's `activeAt` is rewritten at most this often: a write per frame would cost as much as the frame. */
export const ACTIVITY_PERSIST_MS = 5000;

/** A new socket's attachment from the headers the edge set on its upgrade (docs/security.md). */
export function attachmentFromEdge(headers: Headers, now: number): SocketAttachment {
  const expires = Number(headers.get(TOKEN_EXPIRES_HEADER));
  const attachment: SocketAttachment = {
    id: crypto.randomUUID(),
    connectedAt: now,
    canPublish: headers.get(CAN_PUBLISH_HEADER) !== "false",
    expiresAt: Number.isSafeInteger(expires) && expires > 0 ? expires : null,
  };
  const member = memberFromHeaders(headers);
  if (member) attachment.member = member;
  return attachment;
}
