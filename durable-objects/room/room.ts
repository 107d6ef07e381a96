import { CloseCode, type CustomClientFrame, type PresencePage, type RoomStats } from "../../protocol";
import { logEvent } from "../../common/log";
import type { PublishOutcome, PublishResult } from "../engine/publish-outcome";
import { SocketObject } from "../engine/socket-object";
import type { FollowAnswer, FollowerHistory, FollowerReport, FollowStart, RootRpc } from "../followers/contracts";
import type { RoomHookSet } from "./hooks/hook-runner";
import type {
  CloseInfo,
  Connection,
  ConnectDecision,
  ConnectRequest,
  JsonObject,
  PublishDecision,
  PublishRequest,
} from "./hooks/hooks";
import type { PageAnswer, PageQuery } from "./storage/history-pages";
import type { PublishOptions } from "./publishing";
import { RoomCore } from "./room-core";
import type { GiveBackAnswer, RoomRpc } from "../coordinator/room-contract";

export type { PublishOptions } from "./publishing";
export type { PublishOutcome, PublishRefused, PublishResult } from "../engine/publish-outcome";
export type { GiveBackAnswer } from "../coordinator/room-contract";

/** What an instance that knows no name for its room answers (room-core.ts `unnamed`): it ends itself, and a retry finds the room. */
const RESTARTING = "the room is restarting; retry";

type Awaitable<T> = T | Promise<T>;

/**
 * One room: its sockets (accepted with the Hibernation API, so an idle room
 * holds no memory), its message history, and the fan-out between them.
 *
 * This class is the object's face: the hooks a subclass overrides, the RPC
 * methods the worker, the coordinator and the room's leaves call, and the
 * runtime's lifecycle calls, each handed to the room's parts
 * (room-core.ts; docs/architecture.md draws them). No handler throws into the
 * runtime.
 *
 * **Your own logic** goes in a subclass that overrides the hooks below
 * (`onConnect`, `beforePublish`, `onClientFrame`, `onClose`; docs/hooks.md),
 * bound as the `ROOMS` class in your wrangler.toml. The room detects which
 * hooks a subclass overrides once, when it starts: a hook left alone costs
 * nothing, and no hook ever runs inside the fan-out loop. What a hook throws
 * or answers cannot break the room (hook-runner.ts).
 *
 * @typeParam E the environment (bindings and vars) the object receives.
 * @typeParam Data what `onConnect` attaches to a socket (`connection.data`).
 *
 * @example
 * ```ts
 * import { Room, type FanoutEnv, type ConnectRequest, type ConnectDecision, type PublishRequest, type PublishDecision } from "edge-fanout";
 *
 * // Bound as ROOMS in wrangler.toml, and exported from the worker.
 * export class ChatRoom extends Room<FanoutEnv, { name: string }> {
 *   protected override onConnect({ request }: ConnectRequest): ConnectDecision<{ name: string }> {
 *     const name = new URL(request.url).searchParams.get("name");
 *     return name ? { data: { name } } : { refuse: "say who you are: ?name=" };
 *   }
 *   protected override beforePublish({ data, source }: PublishRequest<{ name: string }>): PublishDecision {
 *     if (typeof data !== "string" || data.length > 500) return { refuse: "a message is a string of at most 500 characters" };
 *     return { data: { text: data, from: source.kind === "socket" ? source.connection.data?.name : "server" } };
 *   }
 * }
 * ```
 *
 * @see docs/hooks.md
 * @see docs/library.md
 */
export class Room<E = Record<string, unknown>, Data extends object = JsonObject> extends SocketObject<E> implements RootRpc, RoomRpc {
  readonly #core: RoomCore<Data>;

  constructor(ctx: DurableObjectState, env: E) {
    super(ctx, env);
    this.#core = new RoomCore<Data>(ctx, env as Record<string, unknown>, this.#overriddenHooks());
    this.runSockets(this.#core.engine);
  }

  // -------------------------------------------------------------------------
  // Hooks: override these in a subclass (docs/hooks.md)
  // -------------------------------------------------------------------------

  /**
   * A socket asks to join the room; the edge has already checked its token
   * and origin. Return nothing to admit it, `{ data }` to admit it with data
   * attached (a JSON object of at most 4 KiB as JSON; it survives
   * hibernation as `connection.data`), `{ canPublish: false }` to make it
   * listen-only, or `{ refuse, code }` to turn it away: it is closed at once
   * with 4003 (`forbidden`, the default), 4001 (`unauthorized`) or 1013
   * (`try_again_later`), or answered 403/401/503 when it sent
   * `X-Refusal: http`. A throw refuses it with 1011 (500).
   *
   * @param request the socket's id, member, right to publish and upgrade request.
   * @returns nothing to admit the socket as it is, a `ConnectAccept`, or a `ConnectRefusal`.
   *
   * @example
   * ```ts
   * class TeamRoom extends Room {
   *   protected override onConnect({ member }: ConnectRequest): ConnectDecision {
   *     if (!member?.verified) return { refuse: "sign in first", code: "unauthorized" };
   *     return { data: { joinedAs: member.id } };
   *   }
   * }
   * ```
   *
   * @see docs/hooks.md#onconnect
   */
  protected onConnect(request: ConnectRequest): Awaitable<ConnectDecision<Data>> {
    return undefined;
  }

  /**
   * A message is about to be published, from a socket, over HTTP or by a
   * broadcast; it has no seq yet. Return nothing to publish it as sent,
   * `{ data }` to publish something else instead (at most MAX_MESSAGE_BYTES
   * as JSON, or it is refused as `too_large`), or `{ refuse, code }` to refuse
   * it (`bad_request`, the default: 400; `forbidden`: 403; `rate_limited`:
   * 429). HTTP publishers get the status and `{"error","message"}`, socket
   * publishers an `error` event with the publish's `id`; a throw is an
   * `internal` refusal (500). Runs once per message, never per socket; a
   * socket's publishes pass it one at a time, in order.
   *
   * @param request the message's data, room and source.
   * @returns nothing to publish the message as sent, a `PublishTransform`, or a `PublishRefusal`.
   *
   * @example
   * ```ts
   * class ChatRoom extends Room {
   *   protected override beforePublish({ data }: PublishRequest): PublishDecision {
   *     if (typeof data !== "string" || data.trim() === "") return { refuse: "a chat message is a non-empty string" };
   *     return { data: data.trim() };
   *   }
   * }
   * ```
   *
   * @see docs/hooks.md#beforepublish
   */
  protected beforePublish(request: PublishRequest<Data>): Awaitable<PublishDecision> {
    return undefined;
  }

  /**
   * A socket sent a frame of the application's own, `{"type":"x-...", ...}`
   * (without this hook such a frame closes the socket with 4000, like any
   * unknown type). Answer with `connection.send({ type: "x-..." })`, publish
   * with `this.publishMessage(...)`, or close it. Each costs the socket a
   * frame token, like a publish; a throw answers the socket with an
   * `internal` error event (with the frame's `id`) and keeps it open.
   *
   * @param connection the socket that sent the frame.
   * @param frame the frame as parsed; its `type` starts with `x-`.
   *
   * @example
   * ```ts
   * class GameRoom extends Room {
   *   protected override onClientFrame(connection: Connection, frame: CustomClientFrame): void {
   *     if (frame.type === "x-ping") connection.send({ type: "x-pong", at: Date.now() });
   *   }
   * }
   * ```
   *
   * @see docs/hooks.md#onclientframe
   */
  protected onClientFrame(connection: Connection<Data>, frame: CustomClientFrame): Awaitable<void> {
    return undefined;
  }

  /**
   * A socket left the room, however it went (`info.by`: client, room or
   * network), hibernation in between included; `connection.data` is still
   * there. Runs once per socket that was admitted, after its waiting frames,
   * outside every loop of the room; a throw is logged.
   *
   * @param connection the socket that left (`open` is false).
   * @param info its close code and reason, and who closed it.
   *
   * @example
   * ```ts
   * class LobbyRoom extends Room<FanoutEnv, { name: string }> {
   *   protected override async onClose(connection: Connection<{ name: string }>, info: CloseInfo): Promise<void> {
   *     if (info.by === "client" && connection.data) await this.publishMessage({ left: connection.data.name });
   *   }
   * }
   * ```
   *
   * @see docs/hooks.md#onclose
   */
  protected onClose(connection: Connection<Data>, info: CloseInfo): Awaitable<void> {
    return undefined;
  }

  /** The room's name (the object's name: rooms are addressed by it). */
  protected get roomName(): string {
    return this.#core.room;
  }

  /**
   * Every socket in the room, as hook connections (for a hook that must find one by id or member).
   *
   * @returns the room's open sockets, each as a `Connection`.
   */
  protected connections(): IterableIterator<Connection<Data>> {
    return this.#core.connections();
  }

  /**
   * Publishes a message of the room's own (from a hook: "x joined", a
   * reaction to a custom frame). It does not pass beforePublish: the room
   * trusts itself. `data` must be JSON of at most MAX_MESSAGE_BYTES (a
   * TypeError or RangeError otherwise).
   *
   * @param data the message's data, a JSON value.
   * @returns the message's seq and how many sockets it was sent to.
   * @see docs/hooks.md#what-a-hook-works-with
   */
  protected publishMessage(data: unknown): Promise<PublishResult> {
    return this.#core.publishOwn(data);
  }

  // -------------------------------------------------------------------------
  // Requests
  // -------------------------------------------------------------------------

  /** Accepts a WebSocket upgrade forwarded by the worker (already validated there). */
  override async fetch(request: Request): Promise<Response> {
    if (this.#core.unnamed) {
      this.#core.endSoon();
      return Response.json({ error: "over_capacity", message: RESTARTING }, { status: 503, headers: { "Retry-After": "1" } });
    }
    try {
      return await this.#core.upgrade(request);
    } catch (error) {
      logEvent("error", { room: this.#core.room, where: "upgrade", error: String(error) });
      return Response.json({ error: "internal", message: "could not accept the socket" }, { status: 500 });
    }
  }

  /**
   * Publishes one message (RPC from the worker and the coordinator).
   * `dataJson` is the message's data as JSON text, already validated by the
   * caller; it is embedded in the event as is. With beforePublish overridden
   * the hook sees it first (a retried idempotency key is answered as a
   * duplicate without asking it again), and may transform or refuse it: then
   * the answer is `{ refused }`.
   *
   * @param dataJson the message's data as JSON text.
   * @param [options={}] the publisher's idempotency key and who publishes (an HTTP publish when absent).
   * @returns the message's seq and recipients (or `duplicate: true`), or `{ refused }`.
   */
  async publish(dataJson: string, options: PublishOptions = {}): Promise<PublishOutcome> {
    if (this.#core.unnamed) {
      this.#core.endSoon();
      return { refused: { error: "over_capacity", message: RESTARTING } };
    }
    return this.#core.publish(dataJson, options);
  }

  /** A leaf that does not know where the room stands: where it is level, and the room's epoch and member count. */
  async followerSync(index: number): Promise<FollowStart> {
    return this.#core.followers.sync(index);
  }

  /** A hub of multiplexed connections follows the room (or is refused: a room with connection hooks holds its own sockets). */
  async follow(index: number): Promise<FollowAnswer> {
    return this.#core.followers.follow(index);
  }

  /** A leaf's sockets or members changed while no push carried its report. Returns the room's member count. */
  async followerReport(index: number, report: FollowerReport): Promise<number> {
    return this.#core.followers.report(index, report);
  }

  /** Messages from `from` on, about `budget` bytes, for a leaf's ring. */
  async followerHistory(from: number, budget: number): Promise<FollowerHistory> {
    return this.#core.followers.history(from, budget);
  }

  /** A Pusher hub's subscriber to this cache channel found no last event (Pusher's `cache_miss` webhook). */
  async cacheMiss(): Promise<void> {
    this.#core.webhooks?.cacheMissed();
  }

  /** Aborts leaf `index` as a crash would (fault tests on the local server). */
  async abortLeaf(index: number): Promise<boolean> {
    return this.#core.followers.set.abortLeaf(index);
  }

  /**
   * The room's coordinator shard asks whether the room's storage can go: it
   * goes if nothing can still ask for it (no socket, history aged out), or the
   * answer says when to ask again (docs/security.md#room-names-and-storage).
   */
  async giveBack(): Promise<GiveBackAnswer> {
    return this.#core.giveBack();
  }

  /**
   * Closes every socket with `code` so clients reconnect and resume.
   *
   * @param [code=1012] the close code (SERVICE_RESTART).
   * @param [reason="service restart"] the close reason.
   * @returns how many sockets it closed.
   */
  async shutdown(code: number = CloseCode.SERVICE_RESTART, reason = "service restart"): Promise<number> {
    return this.#core.shutdown(code, reason);
  }

  /** Members in id order after `cursor`, at most `limit` (`GET /rooms/{room}/presence`). */
  async presence(limit: number, cursor: string | null): Promise<PresencePage> {
    return this.#core.presencePage(limit, cursor);
  }

  /** A page of the room's history (`GET /rooms/{room}/messages`): the answer's JSON text, or a refusal. */
  async messages(query: PageQuery): Promise<PageAnswer> {
    return this.#core.historyPage(query);
  }

  /** `GET /rooms/{room}`. */
  async stats(): Promise<RoomStats> {
    return this.#core.stats();
  }

  /** The runtime's alarm: the room's sweep and webhooks; an instance with no name for its room has nothing to do and ends. */
  override async alarm(): Promise<void> {
    if (this.#core.unnamed) {
      this.#core.endSoon();
      return;
    }
    await super.alarm();
  }

  // -------------------------------------------------------------------------

  /**
   * The hooks this object's class overrides, bound to it. Decided once per
   * instance by comparing with the base class, so a hook left alone is never
   * called: the paths it would sit on do no work for it.
   */
  #overriddenHooks(): RoomHookSet<Data> {
    const base = Room.prototype as Room<E, Data>;
    const hooks: RoomHookSet<Data> = {};
    if (this.onConnect !== base.onConnect) hooks.onConnect = (request) => this.onConnect(request);
    if (this.beforePublish !== base.beforePublish) hooks.beforePublish = (request) => this.beforePublish(request);
    if (this.onClientFrame !== base.onClientFrame) hooks.onClientFrame = (connection, frame) => this.onClientFrame(connection, frame);
    if (this.onClose !== base.onClose) hooks.onClose = (connection, info) => this.onClose(connection, info);
    return hooks;
  }
}
