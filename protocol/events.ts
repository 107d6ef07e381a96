/**
 * Server -> client events. A frame is JSON text holding one event object or a
 * JSON array of event objects (a coalesced batch).
 */
import type { ErrorCode } from "./errors.js";

/** First event on every new socket: where the room stands right now. */
export interface WelcomeEvent {
  type: "welcome";
  room: string;
  /**
   * Latest seq published in the room when the socket was accepted. A socket
   * opened with `since` first receives every message after `since` up to this
   * one (from history), then live messages.
   */
  seq: number;
  /** Identity of the room's history; a different epoch means seqs restarted. */
  epoch: string;
  /** Unacknowledged bytes the room sends a socket before it waits for an ack. */
  window: number;
  /**
   * The socket's budget for client frames that are not flow control (0 = no
   * limit): publishes, and acks that release nothing. Over it the room closes
   * with 4009. Heartbeats and acks that release a frame are free.
   */
  rate: { perSecond: number; burst: number };
  /**
   * Largest message data, bytes of its JSON text (UTF-8); a publish over it
   * is refused with `too_large`. Absent from servers that do not announce it.
   */
  maxMessageBytes?: number;
}

/** One published message (type `message`). `seq` grows by exactly 1 per message within a room. */
export interface ServerMessage<T = unknown> {
  type: "message";
  seq: number;
  /**
   * The event's name, on a message that came through the Pusher front door (an HTTP event,
   * a client event): its `data` is then the event's data as the Pusher publisher sent it, a
   * string (docs/pusher.md#one-room-two-protocols).
   */
  event?: string;
  /** On such a message: the Pusher socket it was not sent to (a client event's sender, or the one its publisher excluded). */
  socket_id?: string;
  /** On a client event of a Pusher presence channel: its sender's user id. */
  user_id?: string;
  data: T;
  /** Publish time, epoch milliseconds (server clock). */
  ts: number;
  /**
   * A random number that proves receipt: an ack names a message by `seq`
   * and echoes its `tag`, which a client only knows by having read it.
   */
  tag: number;
}

/**
 * Continuity was lost: messages `from`..`to` (inclusive) will never be
 * delivered to this socket; delivery continues with `to + 1`. `reason`:
 * - "history": they aged out of the room's bounded history before this socket
 *   read them (`from` <= `to`);
 * - "epoch": the room's history itself was lost (the epoch changed, or the
 *   client named a seq from the future): the client's seqs mean nothing here
 *   and it should reload its state. `from` is 1 and `to` the room's latest
 *   seq: the messages of the new history it will not get. A room with no
 *   message yet says `from` 1, `to` 0, an empty range (`to - from + 1` = 0):
 *   nothing of the new history is missing, and the next message is 1.
 */
export interface LostEvent {
  type: "lost";
  reason: "history" | "epoch";
  from: number;
  to: number;
}

/** A member of a room: one identity (a token's `sub`), however many sockets it has open. */
export interface PresenceMember {
  id: string;
  /** Member data from the token's `info` claim (signed by the issuer), or from the socket's URL in open mode. */
  info?: unknown;
  /**
   * Sockets this member had open in the room when the event was sent: events
   * do not follow a member's further tabs (so a reload costs nobody else an
   * event), a `sync` and `GET /rooms/{room}/presence` are current.
   */
  connections: number;
  /** False when the member named itself (open mode: no token vouches for the name). */
  verified: boolean;
}

/**
 * Who is in the room. Presence events are not room messages: they have no
 * `seq`, are not in history, and a socket that reconnects gets a fresh `sync`.
 * - `sync`: the whole picture, on connect and whenever a socket fell behind on
 *   presence: `members` when the room has at most its member cap, only `count`
 *   above it;
 * - `join` / `leave`: one member came or went (a member leaves only after the
 *   room's leave delay without any socket, so a reload is not a leave);
 * - `count`: above the member cap, the number of members, at most once per
 *   count interval and only when it changed.
 */
export type PresenceEvent = (
  | { type: "presence"; action: "sync"; count: number; members?: PresenceMember[] }
  | { type: "presence"; action: "join"; count: number; member: PresenceMember }
  | { type: "presence"; action: "leave"; count: number; member: { id: string } }
  | { type: "presence"; action: "count"; count: number }
) & {
  /**
   * Receipt tag, as on messages: presence counts against the socket's window,
   * so acknowledge it with `{"type":"ack","seq":<the last seq you read>,"tag":<this tag>}`
   * (an ack for any later message also covers it).
   */
  tag: number;
};

/** Answer to a socket `publish` frame. */
export interface PublishedEvent {
  type: "published";
  /** The client's correlation id, echoed back. */
  id?: string;
  seq: number;
  /** Present when the publish's `key` was already published: `seq` is the first publish's, and nothing was sent again. */
  duplicate?: true;
}

/** A client frame was refused without closing the socket (type `error`). */
export interface ServerError {
  type: "error";
  code: ErrorCode;
  message: string;
  /** The client's correlation id when the refused frame carried one. */
  id?: string;
}

/** Type of an application frame or event: `x-` then 1-64 letters, digits or `. _ : -`. */
export type CustomType = `x-${string}`;

/** What a custom `type` must look like. */
export const CUSTOM_TYPE_PATTERN = /^x-[A-Za-z0-9._:-]{1,64}$/;

/**
 * Whether `type` names an application frame or event (CUSTOM_TYPE_PATTERN).
 *
 * @param type a frame's or event's `type`.
 * @returns true for `x-` followed by 1-64 letters, digits or `. _ : -`.
 *
 * @example
 * ```ts
 * isCustomType("x-cursor"); // true
 * isCustomType("message"); // false: a type of this protocol
 * ```
 *
 * @see docs/hooks.md#onclientframe
 */
export function isCustomType(type: unknown): type is CustomType {
  return typeof type === "string" && CUSTOM_TYPE_PATTERN.test(type);
}

/**
 * An event of the application's own, sent to one socket by the room's server
 * code (a hook of a `Room` subclass: docs/hooks.md). Its `type` starts with
 * `x-`, so it can never be mistaken for an event of this protocol; it has no
 * `seq`, is not in history and is not acknowledged.
 */
export interface CustomServerEvent {
  /** The event's type, `x-...`. */
  type: CustomType;
  [field: string]: unknown;
}

export type ServerEvent = WelcomeEvent | ServerMessage | LostEvent | PresenceEvent | PublishedEvent | ServerError | CustomServerEvent;

export type ServerEventType = ServerEvent["type"];
