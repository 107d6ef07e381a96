import { isIdempotencyKey, isValidRoomName, type ErrorCode } from "../../protocol";
import type { CoordinatorConfig } from "../../common/coordinator-config";
import { LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT } from "./policy";
import type { RegistryQuery } from "../../durable-objects/coordinator/registry";

/**
 * Validation of GET /rooms and POST /broadcast input, kept apart from the
 * routes so every refusal is decided (and tested) in one place.
 */

export type Parsed<T> = { ok: true; value: T } | { ok: false; status: 400 | 413; error: ErrorCode; message: string };

const refuse = (status: 400 | 413, error: ErrorCode, message: string): Parsed<never> => ({ ok: false, status, error, message });

/** Which rooms a broadcast is for. */
export type BroadcastTarget = { kind: "rooms"; rooms: string[] } | { kind: "prefix"; prefix: string };

export interface BroadcastRequest {
  target: BroadcastTarget;
  dataJson: string;
}

const utf8 = new TextEncoder();

/**
 * Parses a broadcast body: `{"data", "rooms": [...]}`, `{"data", "prefix"}`
 * or `{"data"}` (every live room, i.e. the empty prefix).
 */
export function parseBroadcastBody(text: string, config: CoordinatorConfig): Parsed<BroadcastRequest> {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return refuse(400, "bad_json", "the body must be JSON");
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return refuse(400, "bad_request", 'the body must be a JSON object: {"data": ..., "rooms"?: [...], "prefix"?: "..."}');
  }
  const fields = body as Record<string, unknown>;
  if (!("data" in fields) || fields.data === undefined) return refuse(400, "bad_request", "data is required");
  const unknown = Object.keys(fields).filter((k) => k !== "data" && k !== "rooms" && k !== "prefix");
  if (unknown.length > 0) return refuse(400, "bad_request", `unknown field ${JSON.stringify(unknown[0])}`);
  if (fields.rooms !== undefined && fields.prefix !== undefined) {
    return refuse(400, "bad_request", "give rooms or prefix, not both");
  }
  const dataJson = JSON.stringify(fields.data);
  if (utf8.encode(dataJson).byteLength > config.maxMessageBytes) {
    return refuse(413, "too_large", `data over ${config.maxMessageBytes} bytes`);
  }

  if (fields.rooms !== undefined) {
    const rooms = fields.rooms;
    if (!Array.isArray(rooms) || rooms.length === 0) return refuse(400, "bad_request", "rooms must be a non-empty array of room names");
    if (rooms.length > config.broadcastMaxRooms) {
      return refuse(413, "too_large", `rooms lists at most ${config.broadcastMaxRooms} names; use a prefix for more`);
    }
    const bad = rooms.find((r) => typeof r !== "string" || !isValidRoomName(r));
    if (bad !== undefined) {
      return refuse(400, "bad_room", `invalid room name ${JSON.stringify(bad)}: 1-64 characters, letters, digits and . _ : ~ - (not first)`);
    }
    return { ok: true, value: { target: { kind: "rooms", rooms: [...new Set(rooms as string[])] }, dataJson } };
  }

  const prefix = fields.prefix ?? "";
  if (typeof prefix !== "string" || (prefix !== "" && !isValidRoomName(prefix))) {
    return refuse(400, "bad_request", "prefix must be the start of a room name (up to 64 characters)");
  }
  return { ok: true, value: { target: { kind: "prefix", prefix }, dataJson } };
}

/** Validates an Idempotency-Key header (a broadcast's or an HTTP publish's); absent is null. */
export function parseIdempotencyKey(header: string | undefined): Parsed<string | null> {
  if (header === undefined) return { ok: true, value: null };
  if (!isIdempotencyKey(header)) {
    return refuse(400, "bad_request", "Idempotency-Key must be 1-128 visible ASCII characters");
  }
  return { ok: true, value: header };
}

/** Parses GET /rooms?prefix=&limit=&cursor= into a registry query. */
export function parseListQuery(params: { prefix?: string; limit?: string; cursor?: string }): Parsed<RegistryQuery> {
  const prefix = params.prefix ?? "";
  if (prefix !== "" && !isValidRoomName(prefix)) {
    return refuse(400, "bad_request", "prefix must be the start of a room name (up to 64 characters)");
  }
  let limit = LIST_DEFAULT_LIMIT;
  if (params.limit !== undefined) {
    if (!/^\d{1,5}$/.test(params.limit) || Number(params.limit) < 1 || Number(params.limit) > LIST_MAX_LIMIT) {
      return refuse(400, "bad_request", `limit must be an integer from 1 to ${LIST_MAX_LIMIT}`);
    }
    limit = Number(params.limit);
  }
  let after: string | null = null;
  if (params.cursor !== undefined && params.cursor !== "") {
    after = decodeCursor(params.cursor);
    if (after === null) return refuse(400, "bad_request", "cursor is not one this service returned");
  }
  return { ok: true, value: { prefix, after, limit } };
}

const CURSOR_TAG = "r1:";

/** An opaque cursor for the page after `room`. */
export function encodeCursor(room: string): string {
  return btoa(CURSOR_TAG + room).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The room a cursor continues after, or null when it is not a cursor from encodeCursor. */
export function decodeCursor(cursor: string): string | null {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(cursor)) return null;
  let text: string;
  try {
    text = atob(cursor.replace(/-/g, "+").replace(/_/g, "/"));
  } catch {
    return null;
  }
  if (!text.startsWith(CURSOR_TAG)) return null;
  const room = text.slice(CURSOR_TAG.length);
  return isValidRoomName(room) ? room : null;
}
