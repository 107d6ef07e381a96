import type { RoomMember, RoomPresence } from "./presence.js";
import type { CustomServerEvent, ErrorCode, PresenceEvent } from "../../protocol/index.js";
import { RoomEvent } from "./typed-target.js";

/** Connection lifecycle of a room client. */
export type ConnectionState = "connecting" | "open" | "reconnecting" | "closed";

/** A message published in the room, delivered once and in `seq` order. */
export class RoomMessageEvent<T = unknown> extends RoomEvent {
  constructor(
    /** Position in the room's history; grows by exactly 1 per message. */
    readonly seq: number,
    readonly data: T,
    /** Publish time, epoch milliseconds (server clock). */
    readonly ts: number,
  ) {
    super("message");
  }
}

/** The connection changed state. */
export class RoomStateEvent extends RoomEvent {
  constructor(
    readonly state: ConnectionState,
    readonly previous: ConnectionState,
    /** Close code of the socket that ended, when the change was caused by one. */
    readonly code?: number,
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
 */
export class RoomLostEvent extends RoomEvent {
  constructor(
    readonly reason: "history" | "epoch",
    readonly from: number,
    readonly to: number,
  ) {
    super("lost");
  }
}

/**
 * Something went wrong without ending the client: the server refused a frame,
 * the socket reported an error, or a frame could not be parsed.
 */
export class RoomErrorEvent extends RoomEvent {
  constructor(
    /**
     * A protocol error code, "transport" for socket-level failures, or
     * "token" when the token function threw or gave no token (the client
     * retries with backoff).
     */
    readonly code: ErrorCode | "transport" | "token",
    readonly message: string,
  ) {
    super("error");
  }
}

/**
 * Who is in the room changed: `sync` (a fresh picture, on every connection),
 * `join` and `leave` (one member, in `member`), `count` (above the room's
 * member cap, only the count). `presence` is the picture after the change.
 */
export class RoomPresenceEvent<I = unknown> extends RoomEvent {
  constructor(
    readonly action: PresenceEvent["action"],
    readonly member: RoomMember<I> | undefined,
    readonly presence: RoomPresence<I>,
  ) {
    super("presence");
  }
}

/**
 * An event of the room's own application (`{"type":"x-...", ...}`), sent to
 * this socket by the room's server code (a hook: docs/hooks.md). Not a
 * message: no seq, not in history, not replayed after a reconnect.
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
  message: RoomMessageEvent<T>;
  presence: RoomPresenceEvent<I>;
  state: RoomStateEvent;
  lost: RoomLostEvent;
  error: RoomErrorEvent;
  custom: RoomCustomEvent;
}

/** Raised by `publish` when the server refuses it or its outcome is unknown. */
export class PublishError extends Error {
  constructor(
    readonly code: ErrorCode | "closed" | "unconfirmed",
    message: string,
  ) {
    super(message);
    this.name = "PublishError";
  }
}
