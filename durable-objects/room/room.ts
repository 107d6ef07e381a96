import { DurableObject } from "cloudflare:workers";
import { CloseCode, PING, PONG, type ErrorBody, type LostEvent, type RoomStats, type WelcomeEvent } from "../../protocol";
import { readLimits, type Limits } from "../../common/settings";
import { registrationFor, type RoomRegistration } from "../coordinator/registration";
import { logEvent } from "../../common/log";
import { utf8Length } from "../../common/utf8";
import { closedSocketAnswer, refusesWithClose } from "../../worker/auth/socket-refusal";
import type { LeafAddress, LeafHistory, LeafReport, LeafStart } from "../leaf/rpc";
import type { RoomLeaf } from "../leaf/leaf";
import type { RootRequests } from "../../protocol";
import { ClientFrames } from "./client-frames";
import { memberView, type RoomConnection } from "./connection";
import { deepFreeze } from "./connection-data";
import { addCounters, RoomCounters } from "./counters";
import { Delivery } from "./delivery";
import { CAN_PUBLISH_HEADER, EDGE_HEADERS, LEAF_FULL_HEADER, ROOM_NAME_HEADER, TOKEN_EXPIRES_HEADER } from "../../common/edge-requests";
import { History } from "./history";
import { HookRunner, type ConnectOutcome, type RoomHookSet } from "./hook-runner";
import type {
  ClientFrame,
  CloseInfo,
  Connection,
  ConnectDecision,
  ConnectRequest,
  JsonObject,
  PublishDecision,
  PublishRequest,
} from "./hooks";
import { historyMessages, Leaves } from "./leaves";
import { RoomMembers } from "./room-members";
import { memberFromHeaders } from "../../common/edge-requests";
import { Presence, type PresencePage } from "./presence";
import { Publishing, type PublishOptions, type PublishOutcome, type PublishRefused, type PublishResult } from "./publishing";
import { SocketState, type RatePolicy, type SocketAttachment } from "./socket-state";
import { Sweeper } from "./sweeper";

export { CAN_PUBLISH_HEADER, EDGE_HEADERS, ROOM_NAME_HEADER, TOKEN_EXPIRES_HEADER };
export type { PresencePage, PublishOptions, PublishOutcome, PublishRefused, PublishResult };

type Awaitable<T> = T | Promise<T>;

/**
 * One room: its sockets (accepted with the Hibernation API, so an idle room
 * holds no memory), its message history, and the fan-out between them.
 *
 * This class is the object's shell: it wires the parts together and turns
 * the runtime's lifecycle calls into theirs, and no handler throws into the
 * runtime.
 * - `Publishing` assigns seqs, stores each flushed frame as a history row and
 *   hands frames to
 * - `Delivery`, which keeps a cursor per socket: live frames for sockets
 *   level with the room, catch-up from history for sockets behind;
 * - `ClientFrames` handles what clients send (acks, publishes);
 * - `Presence` knows who is in the room, from the sockets' identities;
 * - `Sweeper` reaps idle sockets and gives an unused room's storage back;
 * - `Leaves`, past ROOM_SHARD_SOCKETS, spreads further sockets over leaf
 *   objects and pushes each flush to them, with `RoomMembers` counting
 *   members over all of them (docs/sharded-rooms.md).
 *
 * **Your own logic** goes in a subclass that overrides the hooks below
 * (`onConnect`, `beforePublish`, `onClientFrame`, `onClose`; docs/hooks.md),
 * bound as the `ROOMS` class in your wrangler.toml. The room detects which
 * hooks a subclass overrides once, when it starts: a hook left alone costs
 * nothing, and no hook ever runs inside the fan-out loop. `HookRunner`
 * contains them: what a hook throws or answers cannot break the room.
 *
 * @typeParam E the environment (bindings and vars) the object receives.
 * @typeParam Data what `onConnect` attaches to a socket (`connection.data`).
 *
 * @example
 * export class ChatRoom extends Room<Env, { name: string }> {
 *   protected override onConnect(request: ConnectRequest) {
 *     const name = new URL(request.request.url).searchParams.get("name");
 *     return name ? { data: { name } } : { refuse: "say who you are: ?name=" };
 *   }
 *   protected override beforePublish({ data, source }: PublishRequest<{ name: string }>) {
 *     if (typeof data !== "string" || data.length > 500) return { refuse: "a message is a string of at most 500 characters" };
 *     return { data: { text: data, from: source.kind === "socket" ? source.connection.data?.name : "server" } };
 *   }
 * }
 */
export class Room<E = Record<string, unknown>, Data extends object = JsonObject> extends DurableObject<E> {
  readonly #limits: Limits;
  readonly #rate: RatePolicy;
  readonly #history: History;
  readonly #counters: RoomCounters;
  readonly #registration: RoomRegistration;
  readonly #delivery: Delivery;
  readonly #publishing: Publishing;
  readonly #frames: ClientFrames;
  readonly #presence: Presence;
  readonly #sweeper: Sweeper;
  readonly #hooks: HookRunner<Data>;
  readonly #members: RoomMembers;
  readonly #leaves: Leaves;
  readonly #instanceStartedAt = Date.now();
  #name: string | null;
  /** Whether this instance has told the directory that the room holds storage. */
  #listed = false;
  /** Whether the room (its own sockets and its leaves') was last reported as having sockets. */
  #occupied = false;
  /** Requests this instance received, by kind: what a sharded room's root is asked (GET /rooms/{room}). */
  readonly #requests: RootRequests = { upgrades: 0, placements: 0, publishes: 0, leafSyncs: 0, leafReports: 0, leafFetches: 0, reads: 0 };

  constructor(ctx: DurableObjectState, env: E) {
    super(ctx, env);
    const limits = readLimits(env as Record<string, unknown>);
    this.#limits = limits;
    this.#rate = { perSecond: limits.CLIENT_FRAMES_PER_SECOND, burst: Math.max(1, limits.CLIENT_FRAME_BURST) };
    this.#history = new History(ctx.storage, {
      maxMessages: limits.HISTORY_MAX_MESSAGES,
      maxAgeMs: limits.HISTORY_MAX_AGE_SECONDS * 1000,
    });
    this.#counters = new RoomCounters(this.#history);
    this.#name = this.#history.meta("name");
    this.#registration = registrationFor(env as Record<string, unknown>, ctx, this.#counters);
    const roomName = (): string | null => this.#name;
    this.#delivery = new Delivery(
      this.#history,
      this.#counters,
      {
        windowBytes: limits.WINDOW_BYTES,
        graceMs: limits.SLOW_GRACE_MS,
        batch: { maxBytes: limits.BATCH_MAX_BYTES, maxEvents: limits.BATCH_MAX_EVENTS },
      },
      {
        roomName,
        occupancyChanged: () => this.#occupancyChanged(),
        left: (ws, state, cause) => {
          this.#presence.leave(state, Date.now());
          if (this.#hooks.watchesCloses) this.#background(this.#hooks.closed(ws, state, cause));
        },
        released: (ws, state) => this.#presence.refresh(ws, state),
      },
    );
    const hookSet = this.#overriddenHooks();
    this.#members = new RoomMembers(() => {
      this.#leaves.membersChanged();
      if (this.#leaves.sharded) this.#presence.countChanged();
    });
    this.#leaves = new Leaves(
      {
        // Connection hooks run where the sockets are, in this object: a room that has them keeps
        // every socket here (up to MAX_SOCKETS_PER_ROOM) rather than on leaves (docs/hooks.md).
        // So does a room of a worker that binds no LEAVES namespace.
        shardSockets:
          hookSet.onConnect || hookSet.onClientFrame || hookSet.onClose || !isNamespace((env as Record<string, unknown>).LEAVES) ? 0 : limits.ROOM_SHARD_SOCKETS,
        maxLeaves: limits.ROOM_MAX_LEAVES,
        maxSocketsPerObject: limits.MAX_SOCKETS_PER_ROOM,
        countIntervalMs: limits.PRESENCE_COUNT_INTERVAL_MS,
        retireAfterMs: limits.ROOM_LEAF_RETIRE_MS,
      },
      {
        roomName,
        namespace: () => ((env as Record<string, unknown>).LEAVES as DurableObjectNamespace<RoomLeaf> | undefined) ?? null,
        epoch: () => this.#history.issueEpoch(),
        latest: () => this.#delivery.flushedSeq,
        members: () => this.#presence.count,
        read: (from, budget) => {
          const read = historyMessages(this.#history, from, budget, this.#delivery.flushedSeq);
          this.#counters.values.historyRowsRead += read.rowsRead;
          return read;
        },
        saveDirectory: (indices) => this.#history.setMeta("leaves", JSON.stringify(indices)),
        connectionsChanged: () => this.#occupancyChanged(),
        membersReported: (index, members, full) => (full ? this.#members.replaceLeaf(index, members) : this.#members.setLeaf(index, members)),
        leafDropped: (index) => this.#members.dropLeaf(index),
        countersReported: (delta) => {
          addCounters(this.#counters.values, delta);
          this.#counters.changed();
        },
        shardedChanged: () => this.#presence.resync(),
      },
      this.#history.meta("leaves"),
    );
    this.#presence = new Presence(
      {
        leaveDelayMs: limits.PRESENCE_LEAVE_DELAY_MS,
        maxMembers: limits.PRESENCE_MAX_MEMBERS,
        countIntervalMs: limits.PRESENCE_COUNT_INTERVAL_MS,
      },
      {
        roomName,
        sockets: () => this.#delivery.entries(),
        socketCount: () => this.#delivery.size,
        send: (ws, state, text, bytes, tag) => this.#delivery.sendPresence(ws, state, text, bytes, tag),
        counted: (events) => {
          if (events === 0) return;
          this.#counters.values.presenceEvents += events;
          this.#counters.changed();
        },
        // Sharded: events carry the room's count over every object, and are counts only.
        roomCount: () => (this.#leaves.sharded ? this.#members.count : null),
        countsOnly: () => this.#leaves.sharded,
        memberChanged: (id, view) => this.#members.setLocal(id, view),
      },
    );
    // The room is live while it has sockets anywhere: on itself or on its leaves.
    const delivery = this.#delivery;
    const leaves = this.#leaves;
    const sockets = {
      get size() {
        return delivery.size + leaves.connections;
      },
      entries: () => delivery.entries(),
      close: (ws: WebSocket, code: number, reason: string) => delivery.close(ws, code, reason),
    };
    this.#sweeper = new Sweeper(
      ctx,
      sockets,
      this.#history,
      this.#counters,
      { idleTimeoutMs: limits.IDLE_TIMEOUT_SECONDS * 1000, historyMaxAgeMs: limits.HISTORY_MAX_AGE_SECONDS * 1000 },
      {
        roomName,
        heartbeat: () => {
          if (this.#name) this.#registration.heartbeat(this.#name, this.#connections(), this.#presence.count);
        },
        reportEmpty: () => {
          if (this.#name) this.#registration.occupancyChanged(this.#name, 0, this.#presence.count);
        },
        // Leaves are retired before the room's storage goes (their directory is in it).
        quiet: () => this.#counters.unreported() === null && this.#leaves.size === 0,
        reclaimed: async () => {
          this.#history.reset();
          this.#counters.reset();
          this.#delivery.reset();
          this.#publishing.reset();
          this.#listed = false;
          if (this.#name) await this.#registration.storage(this.#name, false);
        },
      },
    );
    this.#publishing = new Publishing(
      this.#history,
      this.#delivery,
      this.#counters,
      limits,
      (now) => {
        this.#sweeper.maybeSweep(now);
        // A room published into with nobody listening still needs its alarm, to give its storage back later.
        if (this.#delivery.size === 0) this.#background(this.#sweeper.ensureAlarm());
      },
      (messages) => this.#leaves.push(messages),
    );
    this.#hooks = new HookRunner<Data>(
      hookSet,
      { delivery: this.#delivery, roomName: () => this.#name ?? "", maxEventBytes: limits.MAX_MESSAGE_BYTES },
      { maxMessageBytes: limits.MAX_MESSAGE_BYTES, count: (reason) => this.#counters.refused(reason) },
    );
    this.#frames = new ClientFrames(
      this.#delivery,
      this.#publishing,
      this.#counters,
      limits,
      this.#rate,
      {
        roomName: () => this.#name ?? "",
        persistAttachment: (ws, state) => ws.serializeAttachment(state.attachment),
      },
      this.#hooks,
    );
    // Heartbeats are answered by the runtime, so a pinging client never wakes the room.
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(PING, PONG));
    const now = Date.now();
    // The runtime also lists sockets still closing (a stalled peer never finishes
    // the close handshake); those are not members of the room any more. A room
    // only hibernates once every cursor was level, so sockets rejoin level, and
    // presence is rebuilt from their identities without telling anyone.
    for (const ws of ctx.getWebSockets()) {
      const attachment = ws.deserializeAttachment() as SocketAttachment | null;
      if (attachment && ws.readyState === WebSocket.OPEN) {
        if (attachment.data) deepFreeze(attachment.data);
        const state = new SocketState(attachment, this.#delivery.flushedSeq);
        this.#delivery.join(ws, state, now);
        this.#presence.restore(state);
      }
    }
    // Leaves found in the directory: each is asked for its sockets and members.
    this.#leaves.wake();
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
   */
  protected onClientFrame(connection: Connection<Data>, frame: ClientFrame): Awaitable<void> {
    return undefined;
  }

  /**
   * A socket left the room, however it went (`info.by`: client, room or
   * network), hibernation in between included; `connection.data` is still
   * there. Runs once per socket that was admitted, after its waiting frames,
   * outside every loop of the room; a throw is logged.
   */
  protected onClose(connection: Connection<Data>, info: CloseInfo): Awaitable<void> {
    return undefined;
  }

  /** The room's name (from its first request; null only before any arrived). */
  protected get roomName(): string | null {
    return this.#name;
  }

  /** Every socket in the room, as hook connections (for a hook that must find one by id or member). */
  protected *connections(): IterableIterator<Connection<Data>> {
    for (const [ws, state] of this.#delivery.entries()) yield this.#hooks.connection(ws, state);
  }

  /**
   * Publishes a message of the room's own (from a hook: "x joined", a
   * reaction to a custom frame). It does not pass beforePublish: the room
   * trusts itself. `data` must be JSON of at most MAX_MESSAGE_BYTES (a
   * TypeError or RangeError otherwise).
   */
  protected async publishMessage(data: unknown): Promise<PublishResult> {
    const dataJson = JSON.stringify(data) as string | undefined;
    if (dataJson === undefined) throw new TypeError("a message must be a JSON value");
    const bytes = utf8Length(dataJson);
    if (bytes > this.#limits.MAX_MESSAGE_BYTES) throw new RangeError(`message is ${bytes} bytes as JSON, over ${this.#limits.MAX_MESSAGE_BYTES}`);
    await this.#list();
    return this.#publishing.publish(dataJson);
  }

  // -------------------------------------------------------------------------
  // Upgrades
  // -------------------------------------------------------------------------

  /** Accepts a WebSocket upgrade forwarded by the worker (already validated there). */
  override async fetch(request: Request): Promise<Response> {
    try {
      this.#learnName(request.headers.get(ROOM_NAME_HEADER));
      await this.#list();
      // Past ROOM_SHARD_SOCKETS of its own, the room hands the edge a placement on its leaves.
      const placement = await this.#leaves.place(this.#delivery.size, request.headers.get(LEAF_FULL_HEADER));
      if (placement) {
        this.#requests.placements += 1;
        return placement;
      }
      this.#requests.upgrades += 1;
      const url = new URL(request.url);
      const since = parseSeqParam(url.searchParams.get("since"));
      const epoch = url.searchParams.get("epoch");

      if (this.#delivery.size >= this.#limits.MAX_SOCKETS_PER_ROOM) return this.#roomFull();
      const expires = Number(request.headers.get(TOKEN_EXPIRES_HEADER));
      const attachment: SocketAttachment = {
        id: crypto.randomUUID(),
        connectedAt: Date.now(),
        canPublish: request.headers.get(CAN_PUBLISH_HEADER) !== "false",
        expiresAt: Number.isSafeInteger(expires) && expires > 0 ? expires : null,
      };
      const member = memberFromHeaders(request.headers);
      if (member) attachment.member = member;
      if (this.#hooks.admitsSockets) {
        const admitted = await this.#admit(request, attachment);
        if (admitted) return admitted;
        if (this.#delivery.size >= this.#limits.MAX_SOCKETS_PER_ROOM) return this.#roomFull();
      }
      const pair = new WebSocketPair();
      const client = pair[0];
      const server = pair[1];
      const now = Date.now();
      this.ctx.acceptWebSocket(server);
      server.serializeAttachment(attachment);

      const latest = this.#delivery.flushedSeq;
      const welcome: WelcomeEvent = {
        type: "welcome",
        room: this.#name ?? "",
        seq: latest,
        epoch: this.#history.issueEpoch(),
        window: this.#limits.WINDOW_BYTES,
        rate: this.#rate,
      };
      server.send(JSON.stringify(welcome));
      // A resume starts behind at `since` and is driven by its acks; one from
      // another history (or from the future) starts level, told what it lost.
      let start = latest;
      if (since !== null) {
        if ((epoch !== null && epoch !== this.#history.epoch) || since > latest) {
          const lost: LostEvent = { type: "lost", reason: "epoch", from: 1, to: latest };
          server.send(JSON.stringify(lost));
        } else {
          start = since;
        }
      }
      const state = new SocketState(attachment, start);
      this.#delivery.join(server, state, now);
      // A failed send during catch-up forgets the socket; it is not a member then.
      if (this.#delivery.get(server) === state) this.#presence.join(server, state);
      await this.#sweeper.ensureAlarm();
      return new Response(null, { status: 101, webSocket: client });
    } catch (error) {
      logEvent("error", { room: this.#name, where: "upgrade", error: String(error) });
      return Response.json({ error: "internal", message: "could not accept the socket" }, { status: 500 });
    }
  }

  // -------------------------------------------------------------------------
  // Publishing (RPC from the worker and the coordinator)
  // -------------------------------------------------------------------------

  /**
   * Publishes one message. `dataJson` is the message's data as JSON text,
   * already validated by the caller; it is embedded in the event as is.
   * With beforePublish overridden the hook sees it first (a retried
   * idempotency key is answered as a duplicate without asking it again), and
   * may transform or refuse it: then the answer is `{ refused }`.
   */
  async publish(room: string, dataJson: string, options: PublishOptions = {}): Promise<PublishOutcome> {
    this.#requests.publishes += 1;
    this.#learnName(room);
    await this.#list();
    if (!this.#hooks.checksPublishes) return this.#publishing.publish(dataJson, options);
    const key = options.idempotencyKey;
    const seen = key === undefined ? null : this.#publishing.duplicateOf(key);
    if (seen !== null) return { seq: seen, recipients: 0, duplicate: true };
    const checked = await this.#hooks.checkPublish(dataJson, undefined, { kind: options.source ?? "http" });
    if (!checked.ok) return { refused: checked.refusal };
    return this.#publishing.publish(checked.dataJson, options);
  }

  // -------------------------------------------------------------------------
  // Leaves (RPC from the room's leaf objects; docs/sharded-rooms.md)
  // -------------------------------------------------------------------------

  /** A leaf that does not know where the room stands: where it is level, and the room's epoch and member count. */
  async leafSync(address: LeafAddress): Promise<LeafStart> {
    this.#requests.leafSyncs += 1;
    this.#learnName(address.room);
    return this.#leaves.sync(address.index);
  }

  /** A leaf's sockets or members changed while no push carried its report. Returns the room's member count. */
  async leafReport(address: LeafAddress, report: LeafReport): Promise<number> {
    this.#requests.leafReports += 1;
    this.#learnName(address.room);
    return this.#leaves.report(address.index, report);
  }

  /** Messages from `from` on, about `budget` bytes, for a leaf's ring. */
  async leafHistory(address: LeafAddress, from: number, budget: number): Promise<LeafHistory> {
    this.#requests.leafFetches += 1;
    this.#learnName(address.room);
    return this.#leaves.history(from, Math.min(budget, LEAF_HISTORY_MAX_BYTES));
  }

  /** Aborts leaf `index` as a crash would (fault tests on the local server). */
  async abortLeaf(index: number): Promise<boolean> {
    return this.#leaves.abortLeaf(index);
  }

  // -------------------------------------------------------------------------
  // Socket lifecycle (Hibernation API)
  // -------------------------------------------------------------------------

  override async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    // A socket the room no longer tracks was closed (or forgotten) by the room: frames the
    // peer sent before it saw the close were answered by the close, and must not be acted on.
    const state = this.#delivery.get(ws);
    if (!state) return;
    await this.#frames.handle(ws, state, message);
  }

  override async webSocketClose(ws: WebSocket, code: number, reason: string): Promise<void> {
    this.#delivery.peerClosed(ws, code, reason);
  }

  override async webSocketError(ws: WebSocket, error: unknown): Promise<void> {
    const state = this.#delivery.failed(ws, error);
    logEvent("socket_error", { room: this.#name, socket: state?.attachment.id ?? null, error: String(error) });
  }

  override async alarm(): Promise<void> {
    try {
      await this.#sweeper.alarm();
    } catch (error) {
      logEvent("error", { room: this.#name, where: "alarm", error: String(error) });
    }
  }

  // -------------------------------------------------------------------------
  // Operations
  // -------------------------------------------------------------------------

  /** Closes every socket with `code` (1012 by default) so clients reconnect and resume. */
  async shutdown(code: number = CloseCode.SERVICE_RESTART, reason = "service restart"): Promise<number> {
    this.#counters.persistNow();
    let closed = 0;
    for (const ws of this.ctx.getWebSockets()) {
      this.#delivery.close(ws, code, reason);
      closed += 1;
    }
    return closed + (await this.#leaves.shutdown(code, reason));
  }

  /** Members in id order after `cursor`, at most `limit` (`GET /rooms/{room}/presence`). */
  async presence(limit: number, cursor: string | null): Promise<PresencePage> {
    this.#requests.reads += 1;
    if (this.#leaves.sharded) return this.#members.page(limit, cursor, this.#connections());
    return this.#presence.page(limit, cursor, this.#delivery.size);
  }

  async stats(): Promise<RoomStats> {
    this.#requests.reads += 1;
    let inFlight = 0;
    let inFlightMax = 0;
    for (const [, state] of this.#delivery.entries()) {
      inFlight += state.inFlight;
      inFlightMax = Math.max(inFlightMax, state.inFlight);
    }
    const stats: RoomStats = {
      room: this.#name,
      epoch: this.#history.epoch,
      connections: this.#delivery.size,
      members: this.#presence.count,
      seq: this.#history.seq,
      historyOldest: this.#history.oldest(),
      behind: this.#delivery.behind,
      ...this.#counters.values,
      windowBytesInFlight: inFlight,
      windowBytesMax: inFlightMax,
      windowCap: this.#limits.WINDOW_BYTES,
      instanceStartedAt: this.#instanceStartedAt,
    };
    if (!this.#leaves.sharded) return stats;
    // Sharded: totals over the root and every leaf, asked now, with each leaf beside them.
    const { leaves } = await this.#leaves.snapshot();
    stats.rootConnections = this.#delivery.size;
    stats.refusals = { ...stats.refusals };
    for (const leaf of leaves) {
      // Counts a leaf has not reported yet are the room's too.
      if (leaf.unreported) addCounters(stats, leaf.unreported);
      stats.connections += leaf.connections;
      stats.behind += leaf.behind;
      stats.windowBytesInFlight += leaf.windowBytesInFlight;
      stats.windowBytesMax = Math.max(stats.windowBytesMax, leaf.windowBytesMax);
    }
    stats.leaves = leaves.map(({ unreported: _, ...leaf }) => leaf);
    stats.rootRequests = { ...this.#requests };
    stats.leafPushes = this.#leaves.pushes;
    return stats;
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

  /** Asks onConnect about a socket; null admits it (with `attachment` completed), a Response refuses it. */
  async #admit(request: Request, attachment: SocketAttachment): Promise<Response | null> {
    const outcome = await this.#hooks.connect({
      id: attachment.id,
      room: this.#name ?? "",
      member: memberView(attachment.member),
      canPublish: attachment.canPublish,
      request,
    });
    if (outcome.ok) {
      if (outcome.data !== undefined) attachment.data = outcome.data;
      if (outcome.canPublish === false) attachment.canPublish = false;
      return null;
    }
    return this.#refuseConnect(request, outcome);
  }

  /**
   * A socket onConnect refused (or failed on): closed at once with the code,
   * so browsers see it, or answered with the status when it asked for
   * `X-Refusal: http` (as the edge refuses tokens: docs/security.md).
   */
  #refuseConnect(request: Request, outcome: Extract<ConnectOutcome, { ok: false }>): Response {
    const answer = CONNECT_REFUSALS[outcome.code];
    if (outcome.code !== "internal") {
      logEvent("refusal", { room: this.#name, reason: "connect_refused", code: outcome.code, close: answer.close });
    }
    if (refusesWithClose(request)) return closedSocketAnswer(request, answer.close, outcome.message);
    const body: ErrorBody = { error: answer.error, message: outcome.message };
    const headers: Record<string, string> = answer.status === 503 ? { "Retry-After": "5" } : {};
    return Response.json(body, { status: answer.status, headers });
  }

  #roomFull(): Response {
    logEvent("refusal", { room: this.#name, reason: "room_full", connections: this.#delivery.size });
    this.#counters.refused("room_full");
    return Response.json(
      { error: "room_full", message: `the room holds its maximum of ${this.#limits.MAX_SOCKETS_PER_ROOM} sockets` },
      { status: 503, headers: { "Retry-After": "10" } },
    );
  }

  /** Sockets of the room: its own and its leaves'. */
  #connections(): number {
    return this.#delivery.size + this.#leaves.connections;
  }

  /** The registry hears when the room goes from no sockets anywhere to some, and back. */
  #occupancyChanged(): void {
    const connections = this.#connections();
    const occupied = connections > 0;
    if (occupied === this.#occupied) return;
    this.#occupied = occupied;
    if (this.#name) this.#registration.occupancyChanged(this.#name, connections, this.#presence.count);
    if (!occupied) this.#background(this.#sweeper.ensureAlarm());
  }

  #learnName(name: string | null): void {
    if (!name || this.#name === name) return;
    this.#name = name;
    this.#history.setMeta("name", name);
  }

  /**
   * Before this instance writes: the directory learns that the room holds
   * storage, so the worker will show it to those who look (it shows nothing
   * for rooms it does not know, to create nothing). Once per instance, which
   * also heals a report that was lost.
   */
  async #list(): Promise<void> {
    if (this.#listed || !this.#name) return;
    this.#listed = true;
    await this.#registration.storage(this.#name, true);
  }

  /** Work that must not hold up the caller, and whose failure is logged rather than thrown. */
  #background(work: Promise<unknown>): void {
    this.ctx.waitUntil(
      work.catch((error: unknown) => logEvent("error", { room: this.#name, where: "background", error: String(error) })),
    );
  }
}

/** How a refused connect is answered: close code, or (with X-Refusal: http) status and error code. */
const CONNECT_REFUSALS: Readonly<Record<ConnectOutcome extends infer O ? (O extends { ok: false; code: infer C } ? C & string : never) : never, { close: number; status: 401 | 403 | 500 | 503; error: ErrorBody["error"] }>> = {
  forbidden: { close: CloseCode.FORBIDDEN, status: 403, error: "forbidden" },
  unauthorized: { close: CloseCode.UNAUTHORIZED, status: 401, error: "unauthorized" },
  try_again_later: { close: CloseCode.TRY_AGAIN_LATER, status: 503, error: "room_full" },
  internal: { close: CloseCode.INTERNAL_ERROR, status: 500, error: "internal" },
};
/** Largest answer to one leaf's history request. */
const LEAF_HISTORY_MAX_BYTES = 4 * 1024 * 1024;

function isNamespace(value: unknown): value is DurableObjectNamespace {
  return typeof (value as DurableObjectNamespace | undefined)?.idFromName === "function";
}

function parseSeqParam(value: string | null): number | null {
  if (value === null || !/^\d{1,15}$/.test(value)) return null;
  return Number(value);
}
