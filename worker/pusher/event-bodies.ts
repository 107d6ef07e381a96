import type { ErrorCode } from "../../protocol";
import { parsePusherChannel, PUSHER_LIMITS, SOCKET_ID_PATTERN, type PusherBatchBody, type PusherChannel, type PusherTriggerBody } from "../../protocol/pusher";
import { utf8Length } from "../../common/utf8";
import { parseAttributes, type EventAttribute } from "./channel-attributes";

/** One event to publish, checked: into each of its channels' rooms. */
export interface EventRequest {
  name: string;
  /** The event's data, a string, as the room stores it: JSON text of that string. */
  dataJson: string;
  channels: PusherChannel[];
  /** The connection it is not sent to. */
  socketId: string | null;
  /** What the answer says of each channel (`info=`). */
  info: ReadonlySet<EventAttribute>;
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; status: 400 | 403 | 413; error: ErrorCode; message: string };

const refuse = (status: 400 | 403 | 413, error: ErrorCode, message: string): Parsed<never> => ({ ok: false, status, error, message });

/** A body's fields as they arrived: named as the protocol names them, nothing about them checked yet. */
type Unchecked<T> = { [K in keyof T]?: unknown } & Record<string, unknown>;

function objectOf(text: string): Parsed<Record<string, unknown>> {
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch {
    return refuse(400, "bad_json", "the body must be JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return refuse(400, "bad_request", "the body must be a JSON object");
  return { ok: true, value: value as Record<string, unknown> };
}

/**
 * One event as Pusher's API takes it (docs/pusher.md#the-http-api): `name`
 * (at most 200 characters; `client-` names are the clients' own, and
 * `pusher:` names the protocol's: 403), `data` (a string of at most 10 KB:
 * 413 past it, or past MAX_MESSAGE_BYTES as stored), `channel`, or `channels`
 * when `many` (at most 100), `socket_id`, `info`. Fields it does not know are
 * ignored, as Pusher ignores them.
 */
function parseEvent(event: Unchecked<PusherTriggerBody>, many: boolean, maxMessageBytes: number, where: string): Parsed<EventRequest> {
  const name = event.name;
  if (typeof name !== "string" || name === "") return refuse(400, "bad_request", `${where}name must be a non-empty string`);
  if (name.length > PUSHER_LIMITS.maxEventNameLength) return refuse(400, "bad_request", `${where}name is over ${PUSHER_LIMITS.maxEventNameLength} characters`);
  if (name.startsWith("client-")) return refuse(403, "forbidden", `${where}client- events are sent by clients on their channels, not over the HTTP API`);
  if (name.startsWith("pusher:") || name.startsWith("pusher_internal:")) return refuse(403, "forbidden", `${where}pusher: and pusher_internal: event names belong to the protocol`);

  const data = event.data;
  if (typeof data !== "string") return refuse(400, "bad_request", `${where}data must be a string (encode an object as JSON text, as the server SDKs do)`);
  if (utf8Length(data) > PUSHER_LIMITS.maxEventDataBytes) return refuse(413, "too_large", `${where}data is over ${PUSHER_LIMITS.maxEventDataBytes} bytes`);
  const dataJson = JSON.stringify(data);
  if (utf8Length(dataJson) > maxMessageBytes) return refuse(413, "too_large", `${where}data is over ${maxMessageBytes} bytes as stored (MAX_MESSAGE_BYTES)`);

  let names: unknown[];
  if (event.channel !== undefined && event.channels !== undefined) return refuse(400, "bad_request", `${where}give channel or channels, not both`);
  if (event.channels !== undefined) {
    if (!many) return refuse(400, "bad_request", `${where}an event of a batch names one channel: channel, not channels`);
    if (!Array.isArray(event.channels) || event.channels.length === 0) return refuse(400, "bad_request", `${where}channels must be a non-empty array of channel names`);
    if (event.channels.length > PUSHER_LIMITS.maxTriggerChannels) return refuse(400, "bad_request", `${where}channels names at most ${PUSHER_LIMITS.maxTriggerChannels} channels`);
    names = event.channels as unknown[];
  } else if (event.channel !== undefined) {
    names = [event.channel];
  } else {
    return refuse(400, "bad_request", `${where}channel (or channels) is required`);
  }
  const channels: PusherChannel[] = [];
  const seen = new Set<string>();
  for (const channelName of names) {
    const channel = typeof channelName === "string" ? parsePusherChannel(channelName) : null;
    if (!channel) return refuse(400, "bad_request", `${where}invalid channel name ${JSON.stringify(channelName).slice(0, 200)}: 1-164 characters of A-Z a-z 0-9 _ - = @ , . ;`);
    if (seen.has(channel.name)) continue;
    seen.add(channel.name);
    channels.push(channel);
  }
  // An encrypted channel's data is sealed with that channel's own key: it cannot be one event of several channels.
  if (channels.length > 1 && channels.some((c) => c.kind === "encrypted")) return refuse(400, "bad_request", `${where}an event for a private-encrypted- channel goes to that channel alone`);

  const socketId = event.socket_id;
  if (socketId !== undefined && (typeof socketId !== "string" || !SOCKET_ID_PATTERN.test(socketId))) {
    return refuse(400, "bad_request", `${where}socket_id must be a socket id such as 1234.5678`);
  }
  const info = parseAttributes(event.info, ["user_count", "subscription_count"]);
  if (!info.ok) return refuse(400, "bad_request", `${where}${info.message}`);
  return { ok: true, value: { name, dataJson, channels, socketId: socketId ?? null, info: info.value as ReadonlySet<EventAttribute> } };
}

/** The body of `POST /apps/{app_id}/events`. */
export function parseTrigger(text: string, maxMessageBytes: number): Parsed<EventRequest> {
  const body = objectOf(text);
  if (!body.ok) return body;
  return parseEvent(body.value, true, maxMessageBytes, "");
}

/** The body of `POST /apps/{app_id}/batch_events`: `{"batch": [...]}`, at most PUSHER_LIMITS.maxBatchEvents events (413 past it). */
export function parseBatch(text: string, maxMessageBytes: number): Parsed<EventRequest[]> {
  const body = objectOf(text);
  if (!body.ok) return body;
  const batch = (body.value as Unchecked<PusherBatchBody>).batch;
  if (!Array.isArray(batch) || batch.length === 0) return refuse(400, "bad_request", "batch must be a non-empty array of events");
  if (batch.length > PUSHER_LIMITS.maxBatchEvents) return refuse(413, "too_large", `a batch holds at most ${PUSHER_LIMITS.maxBatchEvents} events; it has ${batch.length}`);
  const events: EventRequest[] = [];
  for (const [i, event] of batch.entries()) {
    if (typeof event !== "object" || event === null || Array.isArray(event)) return refuse(400, "bad_request", `batch[${i}] must be an event object`);
    const parsed = parseEvent(event as Unchecked<PusherTriggerBody>, false, maxMessageBytes, `batch[${i}]: `);
    if (!parsed.ok) return parsed;
    events.push(parsed.value);
  }
  return { ok: true, value: events };
}
