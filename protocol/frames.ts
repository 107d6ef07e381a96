/**
 * Client -> server frames (JSON objects with a `type`, besides the text
 * `ping`), and the parsers both directions share, so a malformed frame gets
 * the same answer everywhere.
 */
import { isCustomType, type CustomType, type ServerEvent } from "./events.js";

/**
 * "I have read up to message `seq`, whose tag was `tag`": releases the window
 * bytes of every frame sent to this socket whose messages are all <= `seq`.
 * Name the last message of a frame you received (the highest seq so far).
 */
export interface AckFrame {
  type: "ack";
  seq: number;
  tag: number;
}

/** Publish `data` into the room from the socket (when the room allows it). */
export interface PublishFrame {
  type: "publish";
  data: unknown;
  id?: string;
  /**
   * An idempotency key: a publish sent again with the same key (after a reconnect, say) is
   * answered with the first one's seq and not published twice. 1-128 visible ASCII characters.
   */
  key?: string;
}

/**
 * A frame of the application's own (`{"type":"x-...", ...}`), handled by the
 * room's `onClientFrame` hook. A room without that hook closes the socket
 * with 4000, as for any unknown type. It costs a frame token, like a publish.
 */
export interface CustomClientFrame {
  /** The frame's type, `x-...`. */
  type: CustomType;
  /** Echoed in the `error` event when the room's hook fails on this frame. */
  id?: string;
  [field: string]: unknown;
}

export type ClientFrame = AckFrame | PublishFrame | CustomClientFrame;

/** Largest message tag: tags are unsigned 32-bit integers. */
export const MAX_TAG = 0xffff_ffff;
/** Longest correlation id a frame may carry. */
export const MAX_FRAME_ID_LENGTH = 128;
/**
 * Idempotency keys (a publish frame's `key`, the `Idempotency-Key` header of HTTP publishes
 * and broadcasts): 1-128 visible ASCII characters, no spaces.
 */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,128}$/;

export function isIdempotencyKey(value: unknown): value is string {
  return typeof value === "string" && IDEMPOTENCY_KEY_PATTERN.test(value);
}

export type ParseResult<T> = { ok: true; value: T } | { ok: false; error: string };

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The JSON object a client frame's text holds, or why it holds none (a frame of either kind of socket). */
export function frameObject(text: string): ParseResult<Record<string, unknown>> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, error: "frame is not JSON" };
  }
  if (!isObject(value)) return { ok: false, error: "frame must be a JSON object" };
  return { ok: true, value };
}

function isSeq(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

function isTag(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= MAX_TAG;
}

function isFrameId(v: unknown): boolean {
  return v === undefined || (typeof v === "string" && v.length <= MAX_FRAME_ID_LENGTH);
}

/** Parses one client frame (anything but the heartbeat text). */
export function parseClientFrame(text: string): ParseResult<ClientFrame> {
  const object = frameObject(text);
  if (!object.ok) return object;
  const value = object.value;
  switch (value.type) {
    case "ack":
      if (!isSeq(value.seq)) return { ok: false, error: "ack.seq must be a non-negative integer" };
      if (!isTag(value.tag)) return { ok: false, error: "ack.tag must be the tag of the message named by seq" };
      return { ok: true, value: { type: "ack", seq: value.seq, tag: value.tag } };
    case "publish": {
      if (!("data" in value) || value.data === undefined) return { ok: false, error: "publish.data is required" };
      if (!isFrameId(value.id)) return { ok: false, error: `publish.id must be a string of at most ${MAX_FRAME_ID_LENGTH} characters` };
      if (value.key !== undefined && !isIdempotencyKey(value.key)) return { ok: false, error: "publish.key must be 1-128 visible ASCII characters" };
      const frame: PublishFrame = { type: "publish", data: value.data };
      if (typeof value.id === "string") frame.id = value.id;
      if (typeof value.key === "string") frame.key = value.key;
      return { ok: true, value: frame };
    }
    default:
      if (isCustomType(value.type)) {
        if (!isFrameId(value.id)) return { ok: false, error: `id must be a string of at most ${MAX_FRAME_ID_LENGTH} characters` };
        return { ok: true, value: value as CustomClientFrame };
      }
      return { ok: false, error: `unknown frame type ${JSON.stringify(String(value.type))}` };
  }
}

/** Parses one server frame into its events (a frame is one event or an array of them). */
export function parseServerFrame(text: string): ParseResult<ServerEvent[]> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, error: "frame is not JSON" };
  }
  const items = Array.isArray(value) ? value : [value];
  for (const item of items) {
    if (!isObject(item) || typeof item.type !== "string") {
      return { ok: false, error: "every event must be an object with a type" };
    }
  }
  return { ok: true, value: items as ServerEvent[] };
}
