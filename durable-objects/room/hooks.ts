/**
 * The types of a room's hooks: what a `Room` subclass receives when it
 * overrides `onConnect`, `beforePublish`, `onClientFrame` or `onClose`, and
 * what it may answer. docs/hooks.md tells the whole story; in short:
 *
 * - Hooks run outside the fan-out: `beforePublish` once per message before
 *   its seq is assigned, the others once per socket event. A room that
 *   overrides none does no hook work at all.
 * - Whatever a hook returns or throws, the room's invariants hold: seqs grow
 *   by one per stored message, history and windows are the room's alone, and
 *   only `x-` events can be sent to a socket.
 * - A hook that throws is answered as an `internal` error of that one
 *   request (a 500, an `error` event, a refused socket) and logged; the room
 *   goes on serving everyone else.
 * - Objects hibernate, so a subclass's fields do not outlive an idle minute:
 *   keep per-socket state in `connection.data` (it survives hibernation) and
 *   per-room state in `this.ctx.storage`.
 *
 * @see docs/hooks.md
 */
import type { CustomServerEvent, CustomClientFrame, JsonObject } from "../../protocol";

export type { JsonObject, JsonValue } from "../../protocol";

/** Who a socket is in the room's presence, as the edge decided it (a token's `sub` and `info`, or an open-mode name). */
export interface MemberView {
  /** The member's id: the token's `sub`, or the open-mode name. Several sockets may share it. */
  readonly id: string;
  /** Member data: the token's `info` claim, or `?info=` in open mode; undefined when there is none. */
  readonly info: unknown;
  /** False for a name the socket chose itself (open mode): never base access on it. */
  readonly verified: boolean;
}

// ---------------------------------------------------------------------------
// Connections
// ---------------------------------------------------------------------------

/** Close codes a hook may close a socket with: they all mean something to clients (docs/protocol.md#close-codes). */
export type HookCloseCode = 1000 | 1013 | 4001 | 4003;

/**
 * One socket of the room, as hooks see it. A view, made for each hook call:
 * keep its `id`, not the object, to find the socket again later.
 *
 * @example
 * ```ts
 * class QuizRoom extends Room<FanoutEnv, { score: number }> {
 *   protected override onClientFrame(connection: Connection<{ score: number }>, frame: CustomClientFrame): void {
 *     if (frame.type !== "x-answer") return;
 *     const score = (connection.data?.score ?? 0) + 1;
 *     connection.setData({ score });
 *     connection.send({ type: "x-score", score });
 *   }
 * }
 * ```
 *
 * @see docs/hooks.md#what-a-hook-works-with
 */
export interface Connection<Data extends object = JsonObject> {
  /** The socket's id (a UUID), stable for its whole life, hibernation included. */
  readonly id: string;
  /** The room's name. */
  readonly room: string;
  /** Who the socket is in presence, or null for a socket without an identity. */
  readonly member: MemberView | null;
  /** Whether this socket may publish (its token's `pub`, narrowed by onConnect). */
  readonly canPublish: boolean;
  /** When the socket was accepted (epoch ms). */
  readonly connectedAt: number;
  /**
   * What onConnect (or `setData`) attached, as JSON brought it back (frozen:
   * change it with `setData`); null when nothing was attached. It survives
   * hibernation.
   */
  readonly data: Readonly<Data> | null;
  /** False once the socket has left the room (always false in `onClose`). */
  readonly open: boolean;
  /**
   * Replaces the socket's data; it is written to the socket's attachment, so
   * it survives hibernation. Throws a TypeError for data that is not a JSON
   * object, a RangeError above MAX_CONNECTION_DATA_BYTES (4 KiB) as JSON.
   *
   * @param data the new data, or null to drop it.
   */
  setData(data: Data | null): void;
  /**
   * Sends the socket an event of the application's own. Its `type` must
   * start with `x-` (CUSTOM_TYPE_PATTERN; TypeError otherwise) and it must fit
   * in MAX_MESSAGE_BYTES as JSON (RangeError otherwise). Such events are not
   * messages: no seq, no history, no window, and nothing resends them after a
   * reconnect; for what every socket must see, publish a message.
   *
   * @param event the event, `{ type: "x-...", ... }`.
   * @returns false when the socket is no longer open.
   */
  send(event: CustomServerEvent): boolean;
  /**
   * Closes the socket; `onClose` follows. 1000 and 4003 tell clients not to
   * reconnect, 4001 to come back with a new token, 1013 to retry later.
   *
   * @param [code=1000] the close code.
   * @param [reason=""] words for the client, cut to 123 bytes.
   */
  close(code?: HookCloseCode, reason?: string): void;
}

// ---------------------------------------------------------------------------
// onConnect
// ---------------------------------------------------------------------------

/** A socket asking to join the room: what `onConnect` decides on. */
export interface ConnectRequest {
  /** The id the socket will have (Connection.id). */
  readonly id: string;
  /** The room's name. */
  readonly room: string;
  /** Who the socket is in presence, as the edge decided from its token (or open-mode name). */
  readonly member: MemberView | null;
  /** Whether the edge lets the socket publish (the token's `pub`; always true without TOKEN_SECRET). */
  readonly canPublish: boolean;
  /**
   * The upgrade request as the worker forwarded it: its URL (the room's
   * path and query parameters, `since` and `token` included) and the
   * client's headers (cookies, user agent). Access control already ran at
   * the edge.
   */
  readonly request: Request;
}

/**
 * How a refused socket hears about it. The socket is accepted and closed at
 * once with the close code (a browser sees only 1006 for an HTTP refusal);
 * a client that sent `X-Refusal: http` gets the status and a JSON body.
 * - `forbidden`: close 4003, or 403 `forbidden`: do not come back;
 * - `unauthorized`: close 4001, or 401 `unauthorized`: come back with a new token;
 * - `try_again_later`: close 1013, or 503 `room_full` with Retry-After: retry with backoff.
 */
export type ConnectRefusalCode = "forbidden" | "unauthorized" | "try_again_later";

/** Admits the socket, attaching `data` to it and optionally taking away its right to publish. */
export interface ConnectAccept<Data extends object = JsonObject> {
  /** Attached to the socket for its whole life (a JSON object, at most MAX_CONNECTION_DATA_BYTES as JSON). */
  data?: Data;
  /**
   * False makes the socket listen-only. True cannot grant what the edge refused
   * (a token without `pub`); absent, the edge's decision stands.
   */
  canPublish?: boolean;
}

/** Refuses the socket; `refuse` is the reason it is told (at most 123 bytes of it fit a close frame). */
export interface ConnectRefusal {
  /** Why, in words for the client: the close reason, or the HTTP body's `message`. */
  refuse: string;
  /**
   * How the client hears the refusal (see ConnectRefusalCode).
   * @default "forbidden"
   */
  code?: ConnectRefusalCode;
}

/** What `onConnect` may answer: nothing (admit as is), an admission with data, or a refusal. */
export type ConnectDecision<Data extends object = JsonObject> = void | ConnectAccept<Data> | ConnectRefusal;

// ---------------------------------------------------------------------------
// beforePublish
// ---------------------------------------------------------------------------

/** Where a message comes from. */
export type PublishSource<Data extends object = JsonObject> =
  /** A socket of this room (a `publish` frame). */
  | { readonly kind: "socket"; readonly connection: Connection<Data> }
  /** `POST /rooms/{room}/publish`, with the publish key when one is set. */
  | { readonly kind: "http" }
  /** `POST /broadcast`, delivered to this room by a coordinator shard. */
  | { readonly kind: "broadcast" }
  /**
   * A socket on a leaf object of a sharded room (docs/sharded-rooms.md). Its
   * connection lives in the leaf, so there is none here; a room with
   * connection hooks never shards, so its sockets are always `"socket"`.
   */
  | { readonly kind: "leaf" }
  /**
   * A multiplexed connection (`GET /ws`, docs/multiplexing.md), which lives on
   * a hub object: there is no connection here either.
   */
  | { readonly kind: "multiplexed" }
  /**
   * The Pusher front door (docs/pusher.md): an event triggered over its HTTP API, or a
   * client event of a Pusher connection (`event` names it; a Pusher connection lives on a
   * hub, so there is no connection here).
   */
  | { readonly kind: "pusher"; readonly event: string };

/** A message about to be published: `beforePublish` sees it before it has a seq. */
export interface PublishRequest<Data extends object = JsonObject> {
  /** The room's name. */
  readonly room: string;
  /** The message's data, parsed from its JSON. Changing it changes nothing: return `{ data }` to publish something else. */
  readonly data: unknown;
  /** Who publishes: a socket of this room (with its connection), HTTP, a broadcast, a leaf, a hub or the Pusher front door. */
  readonly source: PublishSource<Data>;
}

/**
 * Why a message was refused, as its publisher hears it: HTTP publishers as
 * the status with `{"error": code, "message"}`, socket publishers as an
 * `error` event with that code and the publish's `id`.
 * - `bad_request` (400): the message is not valid for this room;
 * - `forbidden` (403): this publisher may not publish this;
 * - `rate_limited` (429): the application's own quota is spent.
 */
export type PublishRefusalCode = "bad_request" | "forbidden" | "rate_limited";

/** Publishes `data` instead of what was sent (a JSON value of at most MAX_MESSAGE_BYTES as JSON, else 413 `too_large`). */
export interface PublishTransform {
  /** What to publish instead. */
  data: unknown;
}

/** Refuses the message; `refuse` is the message its publisher is told. */
export interface PublishRefusal {
  /** Why, in words for the publisher: the body's or the `error` event's `message`. */
  refuse: string;
  /**
   * How the publisher hears the refusal (see PublishRefusalCode).
   * @default "bad_request"
   */
  code?: PublishRefusalCode;
}

/** What `beforePublish` may answer: nothing (publish as sent), a transform, or a refusal. */
export type PublishDecision = void | PublishTransform | PublishRefusal;

// ---------------------------------------------------------------------------
// onClientFrame and onClose
// ---------------------------------------------------------------------------


/** How a socket ended, as `onClose` hears it. */
export interface CloseInfo {
  /** The close code (1006 when the connection failed without a close). */
  readonly code: number;
  /** The close's reason text (for a failed connection, the error's words). */
  readonly reason: string;
  /**
   * `client`: the client closed it; `room`: the room did (idle sweep, slow
   * consumer, rate limit, token expiry, shutdown, a hook's `close`);
   * `network`: the connection failed without a close.
   */
  readonly by: "client" | "room" | "network";
}
