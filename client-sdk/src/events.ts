import type { RoomMember, RoomPresence } from "./presence.js";
import type { CustomServerEvent, ErrorCode, PresenceEvent } from "../../protocol/index.js";
import { RoomEvent } from "./typed-target.js";

/**
 * Connection lifecycle of a room client: "connecting" until the first
 * welcome, "open", "reconnecting" between a drop and the next welcome, and
 * "closed" for good.
 */
export type ConnectionState = "connecting" | "open" | "reconnecting" | "closed";

/**
 * A message published in the room, delivered once and in `seq` order (the `message` event).
 *
 * @example
 * ```ts
 * room.addEventListener("message", (e: RoomMessageEvent<Chat>) => render(e.seq, e.data, new Date(e.ts)));
 * ```
 *
 * @see client-sdk/README.md#events
 */
export class RoomMessageEvent<T = unknown> extends RoomEvent {
  constructor(
    /** Position in the room's history; grows by exactly 1 per message. */
    readonly seq: number,
    /** The message's data, as published (or as the room's `beforePublish` hook made it). */
    readonly data: T,
    /** Publish time, epoch milliseconds (server clock). */
    readonly ts: number,
  ) {
    super("message");
  }
}

/**
 * Why the connection changed state, for an application to switch on; the
 * close code and its reason text travel beside it (`RoomStateEvent.code`,
 * `.reason`).
 * - "welcome": the room welcomed the connection (state "open");
 * - "server_closed": the server closed the socket with `code`, and the
 *   protocol's table (`CLOSE_CODES`) decided between reconnecting and stopping;
 * - "auth_refused": the server refused the token, with 4001 (missing, invalid
 *   or expired) or 4003 (not for this room, or an origin not allowed), as a
 *   close or as an HTTP 401/403 to the upgrade. A token function gets another
 *   try after a 4001, until the third in a row without a welcome; anything
 *   else stops;
 * - "network": the connection dropped or could not be made, without a close
 *   from the server (`code` 1006, or none when no socket could be created);
 * - "no_welcome": the socket opened but the room did not welcome it within
 *   `connectTimeoutMs`;
 * - "no_pong": a heartbeat went unanswered for `pongTimeoutMs`, so the
 *   connection counts as dead;
 * - "token_failed": the token function threw, gave no usable token, or did not
 *   answer within `connectTimeoutMs`;
 * - "out_of_order": a message skipped a seq, so the client resumes after the
 *   last one it delivered;
 * - "client_closed": the application called `close()` (`code` and `reason` are
 *   what it passed).
 */
export type StateCause =
  | "welcome"
  | "server_closed"
  | "auth_refused"
  | "network"
  | "no_welcome"
  | "no_pong"
  | "token_failed"
  | "out_of_order"
  | "client_closed";

/**
 * The connection changed state, for the reason `cause` names (the `state` event).
 *
 * @example
 * ```ts
 * room.addEventListener("state", (e) => {
 *   if (e.cause === "auth_refused" && e.state === "closed") showSignIn(); // the token was refused for good
 * });
 * ```
 *
 * @see client-sdk/README.md#why-the-state-changed
 */
export class RoomStateEvent extends RoomEvent {
  constructor(
    /** The state now. */
    readonly state: ConnectionState,
    /** The state before. */
    readonly previous: ConnectionState,
    /** Why it changed. */
    readonly cause: StateCause,
    /** Close code of the socket that ended, when one ended with a code (for "client_closed", the code `close()` was given). */
    readonly code?: number,
    /** The close's reason text: the server's words, or what `close()` was given. */
    readonly reason?: string,
  ) {
    super("state");
  }
}

/**
 * Messages `from`..`to` (inclusive) will never be delivered. The application
 * should reload whatever state it derives from the stream.
 * - "history": they aged out of the room's history before they could be resent;
 * - "epoch": the room's history was lost and its seqs restarted; delivery
 *   continues from the room's current position.
 *
 * @example
 * ```ts
 * room.addEventListener("lost", (e) => reloadFromServer(e.from, e.to));
 * ```
 *
 * @see client-sdk/README.md#events
 */
export class RoomLostEvent extends RoomEvent {
  constructor(
    /** Why they will never arrive: "history" or "epoch". */
    readonly reason: "history" | "epoch",
    /** The first seq lost. */
    readonly from: number,
    /** The last seq lost. */
    readonly to: number,
  ) {
    super("lost");
  }
}

/**
 * Something went wrong without ending the client: the server refused a frame,
 * the socket reported an error, or a frame could not be parsed.
 *
 * @example
 * ```ts
 * room.addEventListener("error", (e) => console.warn(e.code, e.message));
 * ```
 *
 * @see client-sdk/README.md#events
 */
export class RoomErrorEvent extends RoomEvent {
  constructor(
    /**
     * A protocol error code, "transport" for socket-level failures, or
     * "token" when the token function threw or gave no token (the client
     * retries with backoff).
     */
    readonly code: ErrorCode | "transport" | "token",
    /** What went wrong, in words for people. */
    readonly message: string,
  ) {
    super("error");
  }
}

/**
 * Who is in the room changed: `sync` (a fresh picture, on every connection),
 * `join` and `leave` (one member, in `member`), `count` (above the room's
 * member cap, only the count). `presence` is the picture after the change.
 *
 * @example
 * ```ts
 * room.addEventListener("presence", (e) => {
 *   if (e.action === "join") console.log(e.member?.id, "joined;", e.presence.count, "here");
 * });
 * ```
 *
 * @see client-sdk/README.md#presence
 */
export class RoomPresenceEvent<I = unknown> extends RoomEvent {
  constructor(
    /** What changed: "sync", "join", "leave" or "count". */
    readonly action: PresenceEvent["action"],
    /** The member that joined or left (for a leave, as it was last known); undefined for "sync" and "count". */
    readonly member: RoomMember<I> | undefined,
    /** Who is in the room after the change. */
    readonly presence: RoomPresence<I>,
  ) {
    super("presence");
  }
}

/**
 * An event of the room's own application (`{"type":"x-...", ...}`), sent to
 * this socket by the room's server code (a hook: docs/hooks.md). Not a
 * message: no seq, not in history, not replayed after a reconnect.
 *
 * @example
 * ```ts
 * room.addEventListener("custom", (e) => {
 *   if (e.event.type === "x-score") console.log("score", e.event.score);
 * });
 * ```
 *
 * @see client-sdk/README.md#frames-of-your-own
 */
export class RoomCustomEvent extends RoomEvent {
  constructor(
    /** The event as the room sent it; `event.type` starts with `x-`. */
    readonly event: CustomServerEvent,
  ) {
    super("custom");
  }
}

/** Events a `RoomClient` dispatches, by type. */
export interface RoomClientEventMap<T, I = unknown> {
  /** A message, once and in order. */
  message: RoomMessageEvent<T>;
  /** Who is in the room changed. */
  presence: RoomPresenceEvent<I>;
  /** The connection changed state. */
  state: RoomStateEvent;
  /** Messages that will never arrive. */
  lost: RoomLostEvent;
  /** Something went wrong without ending the client. */
  error: RoomErrorEvent;
  /** An event of the room's own application. */
  custom: RoomCustomEvent;
}

/**
 * Raised by `publish` when the server refuses it, when the client refuses it
 * before sending (data over the room's `maxMessageBytes` is "too_large", data
 * with no JSON text "bad_request"), or when its outcome is unknown.
 *
 * @example
 * ```ts
 * room.publish({ text: "hi" }).catch((error: unknown) => {
 *   if (error instanceof PublishError && error.code === "rate_limited") slowDown();
 * });
 * ```
 *
 * @see client-sdk/README.md#events
 */
export class PublishError extends Error {
  constructor(
    /** Why: the server's error code, "closed" (the client or subscription ended) or "unconfirmed" (the outcome is unknown). */
    readonly code: ErrorCode | "closed" | "unconfirmed",
    message: string,
  ) {
    super(message);
    this.name = "PublishError";
  }
}
