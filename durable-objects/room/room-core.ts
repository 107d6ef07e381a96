import { resumePointOf, type PresencePage, type RoomCounterValues, type RoomStats, type RootRequests } from "../../protocol";
import { LEAF_FULL_HEADER } from "../../common/edge-requests";
import { followerAt, type FollowerKind } from "../../common/followers";
import { isCacheChannelRoom, isPrivatePusherRoom } from "../../protocol/pusher";
import { logEvent } from "../../common/log";
import { accessSettings, historyRules, readLimits, type Limits } from "../../common/settings";
import { MEMORY_HISTORY_MAX_BYTES, retentionFor, type Retention } from "../../common/retention";
import { utf8Length } from "../../common/utf8";
import { bodyHash } from "../../common/body-hash";
import { registrationFor, type RoomRegistration } from "../coordinator/registration";
import { attachmentFromEdge, type SocketAttachment } from "../engine/attachment";
import { MEMORY_ONLY, RoomCounters, type StoredCounters } from "../engine/counters";
import type { Cursor } from "../engine/cursor";
import type { LeaveCause } from "../engine/delivery";
import type { Message } from "../engine/message";
import type { Roster } from "../engine/presence";
import type { PublishOutcome, PublishResult, RetryKey } from "../engine/publish-outcome";
import type { PublishOrigin } from "../engine/frame-hooks";
import { SocketEngine, type EngineHost } from "../engine/socket-engine";
import { highestMark, SocketMark, type MarkedAttachment } from "../engine/socket-mark";
import type { SocketState } from "../engine/socket-state";
import type { Stream } from "../engine/stream";
import type { RoomLeaf } from "../leaf/leaf";
import type { LeafHistory, LeafMember, LeafReport, LeafStart, LostRange } from "../leaf/rpc";
import { deepFreeze } from "./connection-data";
import { History } from "./history";
import { historyPage, type PageAnswer, type PageQuery } from "./history-pages";
import { admit } from "./admission";
import { HookRunner, type RoomHookSet } from "./hook-runner";
import type { Connection, JsonObject } from "./hooks";
import { IdempotencyKeys } from "./idempotency-keys";
import { answerHoldOf, type AnswerHold } from "./fault-hold";
import { keyedPublish, PublishKeys, type KeyedPublish } from "./publish-keys";
import { historyMessages, Leaves, type LeavesHost } from "./leaves";
import { MemoryHistory } from "./memory-history";
import { MetaStore } from "./meta-store";
import { Publishing, type FlushListener, type PublishOptions } from "./publishing";
import type { RoomHistory } from "./room-history";
import { RoomMembers } from "./room-members";
import { roomStats } from "./room-stats";
import { StorageReclaim, type ReclaimHost } from "./storage-reclaim";
import { Webhooks } from "./webhooks";
import { webhookTarget } from "./webhook-target";

/** Largest answer to one leaf's history request. */
const LEAF_HISTORY_MAX_BYTES = 4 * 1024 * 1024;
const COUNTERS_KEY = "counters";
const LEAVES_KEY = "leaves";
const NAME_KEY = "name";

/**
 * A room's parts and the one object they all talk to. The room's storage
 * (MetaStore, History, IdempotencyKeys), its counters, the socket engine with
 * the room's one stream, the publish path, the hooks, the leaves of a sharded
 * room and the room's registration all hang here; each part reaches the
 * others through this object's methods (it is the engine's host, the flush's
 * listener, the leaves' host and the reclaim's host), never through closures
 * captured while the room was being built.
 */
export class RoomCore<Data extends object = JsonObject> implements EngineHost, FlushListener, LeavesHost, ReclaimHost {
  readonly #ctx: DurableObjectState;
  readonly #env: Record<string, unknown>;
  readonly limits: Limits;
  readonly #room: string;
  /** This room's history bounds, from its name (HISTORY_RULES, else the HISTORY_MAX_* vars). */
  readonly retention: Retention;
  readonly #meta: MetaStore;
  /** The room's messages: in SQLite, or in memory for an ephemeral room (`"store": false`). */
  readonly #history: RoomHistory;
  /** An ephemeral room's seq and epoch, in a socket's attachment, so they outlive hibernation (null: a room that stores). */
  readonly #mark: SocketMark | null;
  readonly #keys: IdempotencyKeys;
  readonly #publishKeys: PublishKeys;
  readonly counters: RoomCounters;
  /** Null except in the local server's fault tests (fault-hold.ts). */
  readonly #answerHold: AnswerHold | null;
  readonly #registration: RoomRegistration;
  readonly engine: SocketEngine;
  readonly #stream: Stream;
  readonly #runner: HookRunner<Data>;
  readonly #publishing: Publishing;
  readonly #members: RoomMembers;
  readonly #leaves: Leaves;
  readonly #reclaim: StorageReclaim;
  /** The room's webhooks; null when the room has no webhook target (nothing is recorded: webhook-target.ts). */
  readonly #webhooks: Webhooks | null;
  readonly #instanceStartedAt = Date.now();
  /** Whether the room is a Pusher cache channel's: its last message goes to the hubs that start following it. */
  readonly #cacheChannel: boolean;
  /** Whether the room is a channel's that Pusher keeps private: open mode never opens it. */
  readonly #privatePusherRoom: boolean;
  /** Whether this instance has told the directory that the room holds storage. */
  #listed = false;
  /** Whether a roster update for the room's own sockets is queued. */
  #rosterQueued = false;
  /** Whether the room (its own sockets and its leaves') was last reported as having sockets. */
  #occupied = false;
  /** Requests this instance received, by kind: what a sharded room's root is asked (GET /rooms/{room}). */
  readonly requests: RootRequests = { upgrades: 0, placements: 0, publishes: 0, leafSyncs: 0, leafReports: 0, leafFetches: 0, reads: 0 };

  constructor(ctx: DurableObjectState, env: Record<string, unknown>, hookSet: RoomHookSet<Data>) {
    this.#ctx = ctx;
    this.#env = env;
    const limits = readLimits(env);
    this.limits = limits;
    const sql = ctx.storage.sql;
    this.#meta = new MetaStore(sql);
    // Every room is addressed by its name, and the runtime gives a named object its name, except
    // one that its alarm starts after a restart (workerd 2026-04-26): that one has the name the
    // room stored with its first write.
    this.#room = ctx.id.name ?? this.#meta.get(NAME_KEY) ?? "";
    if (this.#room === "") logEvent("error", { where: "room", problem: "the object has no name: rooms must be addressed with idFromName" });
    this.retention = retentionFor(this.#room, historyRules(env), limits);
    this.#cacheChannel = isCacheChannelRoom(this.#room);
    this.#privatePusherRoom = isPrivatePusherRoom(this.#room);
    const maxAgeMs = this.retention.maxAgeSeconds * 1000;
    this.#history = this.retention.store
      ? new History(ctx.storage, this.#meta, { maxMessages: this.retention.maxMessages, maxAgeMs })
      : // Woken from hibernation, an ephemeral room carries on where its sockets say it stood.
        new MemoryHistory(
          { maxMessages: this.retention.maxMessages, maxAgeMs, maxBytes: MEMORY_HISTORY_MAX_BYTES },
          highestMark(ctx.getWebSockets().map((ws) => ws.deserializeAttachment() as SocketAttachment | null)),
        );
    this.#keys = new IdempotencyKeys(sql, maxAgeMs);
    const meta = this.#meta;
    // An ephemeral room writes no row for its counters either (one every few seconds while busy):
    // they live in memory, reported to the registry as every room's are.
    this.counters = new RoomCounters(
      this.#history.durable
        ? {
            load: () => {
              const stored = meta.get(COUNTERS_KEY);
              return stored ? (JSON.parse(stored) as StoredCounters) : null;
            },
            save: (stored) => meta.set(COUNTERS_KEY, JSON.stringify(stored)),
          }
        : MEMORY_ONLY,
    );
    this.#publishKeys = new PublishKeys(this.#history, limits.PUBLISH_DEDUPE_SECONDS * 1000, (rows) => this.counters.rowsRead(rows));
    this.#answerHold = answerHoldOf(env, ctx.storage);
    this.#registration = registrationFor(env, ctx, this.counters);
    this.engine = new SocketEngine(ctx, limits, this.counters, this);
    const delivery = this.engine.delivery;
    this.#mark = this.#history.durable ? null : new SocketMark(delivery);
    this.#runner = new HookRunner<Data>(
      hookSet,
      { delivery, roomName: () => this.#room, maxEventBytes: limits.MAX_MESSAGE_BYTES },
      { maxMessageBytes: limits.MAX_MESSAGE_BYTES, count: (reason) => this.counters.refused(reason) },
    );
    this.#stream = this.engine.openStream(this.#room, this.#history, {
      // The room's own members join its roster, which its sockets see once it spans several objects.
      memberChanged: (id, view) => this.#members.setLocal(id, view),
    });
    this.#members = new RoomMembers(() => this.#membersChanged(), {
      joined: (id, info, verified) => this.#webhooks?.memberJoined(id, info, verified),
      left: (id) => this.#webhooks?.memberLeft(id),
    });
    this.#leaves = new Leaves(
      {
        // Connection hooks run where the sockets are, in this object: a room that has them keeps
        // every socket here (up to MAX_SOCKETS_PER_ROOM) rather than on leaves (docs/hooks.md).
        // So does a room of a worker that binds no LEAVES namespace.
        shardSockets: hookSet.onConnect || hookSet.onClientFrame || hookSet.onClose || !isNamespace(env.LEAVES) ? 0 : limits.ROOM_SHARD_SOCKETS,
        maxLeaves: limits.ROOM_MAX_LEAVES,
        maxSocketsPerObject: limits.MAX_SOCKETS_PER_ROOM,
        countIntervalMs: limits.PRESENCE_COUNT_INTERVAL_MS,
        retireAfterMs: limits.ROOM_LEAF_RETIRE_MS,
      },
      this,
      this.#meta.get(LEAVES_KEY),
      this.#history.seq,
    );
    this.#publishing = new Publishing({ history: this.#history, keys: this.#keys, publishKeys: this.#publishKeys }, delivery, this.#stream, this.counters, limits, this);
    this.#reclaim = new StorageReclaim(this, maxAgeMs);
    // Before the sockets are restored: the webhooks read what the receiver was told, and the restored members confirm it.
    const target = webhookTarget(this.#room, env);
    this.#webhooks = target
      ? new Webhooks(ctx.storage, { target, limits, sharded: this.#leaves.size > 0 }, this.counters, {
          roomName: () => this.#room,
          // Asked inside a flush, whose transaction stores the epoch with its first message.
          epoch: () => this.#history.epoch,
          memberCount: () => this.#members.count,
          wantAlarm: () => this.#background(this.engine.sweeper.ensureAlarm()),
        })
      : null;
    // A room only hibernates once every cursor was level, so its sockets rejoin level.
    this.engine.restore((attachment) => {
      if (attachment.data) deepFreeze(attachment.data);
      return [{ stream: this.#stream, seq: this.#stream.flushedSeq }];
    });
    // Leaves found in the directory: each is asked for its sockets and members.
    this.#leaves.wake();
    // Members or the room recorded and not here after the restore (a restart), events waiting: the alarm ends the wait.
    if ((this.#webhooks?.alarmWanted(Date.now()) ?? null) !== null) this.#background(this.engine.sweeper.ensureAlarm());
  }

  get room(): string {
    return this.#room;
  }

  get hooks(): HookRunner<Data> {
    return this.#runner;
  }

  /** Every socket of the room on this object, as hook connections. */
  *connections(): IterableIterator<Connection<Data>> {
    for (const socket of this.engine.delivery.sockets()) yield this.#runner.connection(socket);
  }

  // -------------------------------------------------------------------------
  // Upgrades and publishes
  // -------------------------------------------------------------------------

  /** A WebSocket upgrade the edge forwarded (already validated there): a socket here, a placement on the leaves, or a refusal. */
  async upgrade(request: Request): Promise<Response> {
    await this.#list();
    // Past ROOM_SHARD_SOCKETS of its own, the room hands the edge a placement on its leaves.
    const placement = await this.#leaves.place(this.engine.size, request.headers.get(LEAF_FULL_HEADER));
    if (placement) {
      this.requests.placements += 1;
      return placement;
    }
    this.requests.upgrades += 1;
    if (this.engine.size >= this.limits.MAX_SOCKETS_PER_ROOM) return this.#roomFull();
    const attachment: MarkedAttachment = attachmentFromEdge(request.headers, Date.now());
    // An ephemeral room's sockets carry where it stands, so that it outlives hibernation.
    if (this.#mark) attachment.mark = { seq: this.#stream.flushedSeq, epoch: this.#history.epoch };
    if (this.#runner.admitsSockets) {
      const refused = await admit(this.#runner, this.#room, request, attachment);
      if (refused) return refused;
      if (this.engine.size >= this.limits.MAX_SOCKETS_PER_ROOM) return this.#roomFull();
    }
    return this.engine.accept(this.#stream, {
      attachment,
      resume: resumePointOf(new URL(request.url).searchParams),
      epoch: this.#history.issueEpoch(),
    });
  }

  /** Publishes one message (RPC from the worker, a coordinator shard, or a leaf), through beforePublish when the room has it. */
  async publish(dataJson: string, options: PublishOptions): Promise<PublishOutcome> {
    this.requests.publishes += 1;
    // A broadcast in open mode reaches every room but those of channels Pusher keeps private (docs/pusher.md#isolation).
    if (options.source === "broadcast" && this.#privatePusherRoom && accessSettings(this.#env).publishKey === null) {
      this.counters.refused("forbidden");
      return { refused: { error: "forbidden", message: "a private Pusher channel's room takes broadcasts only where a publish key guards them" } };
    }
    await this.#list();
    // A key names the data as it arrived, before any hook: a socket's on a leaf is in the sockets' space.
    const retry =
      options.retryKey === undefined || options.source === "broadcast"
        ? undefined
        : keyedPublish(options.source === "leaf" ? "s" : "h", options.retryKey, bodyHash(dataJson));
    const outcome = await this.#checkedPublish(dataJson, options, retry);
    if (this.#answerHold && (options.source ?? "http") === "http" && "seq" in outcome && !outcome.duplicate) await this.#answerHold(this.#room, outcome.seq);
    return outcome;
  }

  async #checkedPublish(dataJson: string, options: PublishOptions, retry: KeyedPublish | undefined): Promise<PublishOutcome> {
    if (!this.#runner.checksPublishes) return this.#publishing.publish(dataJson, options, retry);
    // A retried key is answered without asking the hook again.
    const key = options.idempotencyKey;
    const seen = key === undefined ? null : this.#publishing.duplicateOf(key);
    if (seen !== null) return { seq: seen, recipients: 0, duplicate: true };
    const prior = retry ? this.#publishing.prior(retry) : null;
    if (prior) return prior;
    const source = options.source ?? "http";
    const origin: PublishOrigin = source === "pusher" ? { kind: "pusher", event: options.fields?.event ?? "message" } : { kind: source };
    const checked = await this.#runner.checkPublish(dataJson, undefined, origin);
    if (!checked.ok) return { refused: checked.refusal };
    return this.#publishing.publish(checked.dataJson, options, retry);
  }

  /** A message of the room's own (a hook's `publishMessage`): it does not pass beforePublish. */
  async publishOwn(data: unknown): Promise<PublishResult> {
    const dataJson = JSON.stringify(data) as string | undefined;
    if (dataJson === undefined) throw new TypeError("a message must be a JSON value");
    const bytes = utf8Length(dataJson);
    if (bytes > this.limits.MAX_MESSAGE_BYTES) throw new RangeError(`message is ${bytes} bytes as JSON, over ${this.limits.MAX_MESSAGE_BYTES}`);
    await this.#list();
    return this.#publishing.publish(dataJson);
  }

  // -------------------------------------------------------------------------
  // Leaves (RPC from the room's leaf objects; docs/sharded-rooms.md)
  // -------------------------------------------------------------------------

  leafSync(index: number): LeafStart {
    this.requests.leafSyncs += 1;
    return this.#leaves.sync(index);
  }

  /**
   * A hub of multiplexed connections follows the room for its subscribers
   * (docs/multiplexing.md). A room whose class has connection hooks keeps its
   * sockets in its own object, where the hooks run: it refuses.
   */
  async follow(index: number): Promise<{ start: LeafStart } | { refused: string }> {
    if (this.#runner.admitsSockets || this.#runner.handlesClientFrames || this.#runner.watchesCloses) {
      return { refused: "this room admits its sockets with hooks of its own: open /rooms/{room}/ws for it" };
    }
    const kind = followerAt(index).kind;
    if (kind === "leaf" || !this.hubs(kind)) return { refused: `the service binds no namespace for ${kind} hubs` };
    this.requests.leafSyncs += 1;
    // Following writes the room's directory of followers: its name is stored first, so that an
    // instance its alarm starts after a restart knows which room it is.
    await this.#list();
    const start = this.#leaves.sync(index);
    if (this.#cacheChannel && start.seq > 0) {
      const [last] = this.read(start.seq, 1).messages;
      if (last?.seq === start.seq) start.last = last;
    }
    return { start };
  }

  leafReport(index: number, report: LeafReport): number {
    this.requests.leafReports += 1;
    return this.#leaves.report(index, report);
  }

  leafHistory(from: number, budget: number): LeafHistory {
    this.requests.leafFetches += 1;
    return this.#leaves.history(from, Math.min(budget, LEAF_HISTORY_MAX_BYTES));
  }

  /** A subscriber to this Pusher cache channel found no last event: recorded for Pusher's `cache_miss` webhook (docs/pusher.md#webhooks). */
  cacheMiss(): void {
    this.#webhooks?.cacheMissed();
  }

  abortLeaf(index: number): Promise<boolean> {
    return this.#leaves.abortLeaf(index);
  }

  // -------------------------------------------------------------------------
  // Operations
  // -------------------------------------------------------------------------

  async shutdown(code: number, reason: string): Promise<number> {
    this.counters.persistNow();
    return this.engine.shutdown(code, reason) + (await this.#leaves.shutdown(code, reason));
  }

  presencePage(limit: number, cursor: string | null): PresencePage {
    this.requests.reads += 1;
    // The room's members over its own sockets and every follower's (leaves, hubs).
    return this.#members.page(limit, cursor, this.#connections());
  }

  /** A page of the room's history (`GET /rooms/{room}/messages`); reads only, so a room that holds nothing stays without storage. */
  historyPage(query: PageQuery): PageAnswer {
    this.requests.reads += 1;
    const answer = historyPage(this.#history, this.#room, query);
    if (answer.ok) this.counters.rowsRead(answer.rowsRead);
    return answer;
  }

  async stats(): Promise<RoomStats> {
    this.requests.reads += 1;
    const window = this.engine.delivery.windowFigures();
    const own: RoomStats = {
      room: this.#room,
      epoch: this.#history.epoch,
      connections: this.engine.size,
      members: this.engine.presence(this.#stream).count,
      seq: this.#history.seq,
      historyOldest: this.#history.oldest(),
      retention: { ...this.retention },
      behind: this.engine.delivery.behind,
      ...this.counters.snapshot(),
      windowBytesInFlight: window.inFlight,
      windowBytesMax: window.max,
      windowCap: this.limits.WINDOW_BYTES,
      instanceStartedAt: this.#instanceStartedAt,
    };
    if (this.#webhooks) own.webhooks = this.#webhooks.stats();
    if (!this.#leaves.sharded) return own;
    return roomStats(own, await this.#leaves.snapshot(), { ...this.requests }, this.#leaves.pushes);
  }

  // -------------------------------------------------------------------------
  // The engine's host
  // -------------------------------------------------------------------------

  name(): string {
    return this.#room;
  }

  /** A socket of this room publishes (beforePublish already ran in the client-frame path). */
  publishFrom(_cursor: Cursor, dataJson: string, retry?: RetryKey): Promise<PublishOutcome> {
    return this.#publishing.publish(dataJson, {}, retry && keyedPublish("s", retry.key, retry.bodyHash));
  }

  /** A socket's keyed publish that was published before, answered before the hooks run. */
  retried(retry: RetryKey): PublishOutcome | null {
    return this.#publishing.prior(keyedPublish("s", retry.key, retry.bodyHash));
  }

  occupancyChanged(): void {
    const connections = this.#connections();
    this.#webhooks?.connections(connections);
    const occupied = connections > 0;
    if (occupied === this.#occupied) return;
    this.#occupied = occupied;
    this.#registration.occupancyChanged(this.#room, connections, this.#memberCount());
    if (!occupied) this.#background(this.engine.sweeper.ensureAlarm());
  }

  left(socket: SocketState, cause: LeaveCause): void {
    // The mark moves to another socket before this one's attachment is gone.
    if (this.#mark?.left(socket)) this.#markMoved();
    if (this.#runner.watchesCloses) this.#background(this.#runner.closed(socket, cause));
  }

  heartbeat(): void {
    this.#registration.heartbeat(this.#room, this.#connections(), this.#memberCount());
  }

  otherSockets(): number {
    return this.#leaves.connections;
  }

  alarmWanted(now: number, live: boolean): number | null {
    const webhooks = this.#webhooks?.alarmWanted(now) ?? null;
    // A room whose webhooks still need its storage does not plan to give it back: their own alarm comes first.
    const reclaim = live || this.#webhooks?.holdsStorage ? null : this.#reclaim.alarmAt(now);
    if (webhooks === null) return reclaim;
    return reclaim === null ? webhooks : Math.min(webhooks, reclaim);
  }

  async onAlarm(now: number, live: boolean): Promise<void> {
    if (this.#webhooks) await this.#webhooks.onAlarm(now);
    if (!live && !this.#webhooks?.holdsStorage) await this.#reclaim.onAlarm(now);
  }

  // -------------------------------------------------------------------------
  // The flush's listener
  // -------------------------------------------------------------------------

  storing(messages: readonly Message[]): void {
    // An ephemeral room stores no message, so it sends no message.published either (docs/webhooks.md).
    if (this.#history.durable) this.#webhooks?.storing(messages);
  }

  flushed(messages: readonly Message[]): number {
    this.#webhooks?.stored();
    this.#markMoved();
    return this.#leaves.push(messages);
  }

  afterFlush(now: number): void {
    this.engine.sweeper.maybeSweep(now);
    // A room published into with nobody listening still needs its alarm, to give its storage back later.
    if (this.engine.size === 0 && this.engine.sweeper.alarmNeeded()) this.#background(this.engine.sweeper.ensureAlarm());
  }

  // -------------------------------------------------------------------------
  // The leaves' host
  // -------------------------------------------------------------------------

  roomName(): string {
    return this.#room;
  }

  namespace(): DurableObjectNamespace<RoomLeaf> | null {
    return (this.#env.LEAVES as DurableObjectNamespace<RoomLeaf> | undefined) ?? null;
  }

  hubs(kind: Exclude<FollowerKind, "leaf">): DurableObjectNamespace | null {
    const namespace = kind === "hub" ? this.#env.HUBS : this.#env.PUSHER_HUBS;
    return isNamespace(namespace) ? namespace : null;
  }

  epoch(): string {
    return this.#history.issueEpoch();
  }

  latest(): number {
    return this.#stream.flushedSeq;
  }

  members(): number {
    return this.#memberCount();
  }

  roster(): Roster {
    return this.#members.roster(this.limits.PRESENCE_MAX_MEMBERS);
  }

  read(from: number, budget: number): { messages: Message[]; lost: LostRange | null } {
    const read = historyMessages(this.#history, from, budget, this.#stream.flushedSeq);
    this.counters.rowsRead(read.rowsRead);
    return read;
  }

  saveDirectory(indices: readonly number[]): void {
    this.#meta.set(LEAVES_KEY, JSON.stringify(indices));
  }

  connectionsChanged(): void {
    this.occupancyChanged();
  }

  membersReported(index: number, members: readonly LeafMember[], full: boolean): void {
    // The report's sockets are counted already: the room is occupied before its members join (webhooks say it in that order).
    this.#webhooks?.connections(this.#connections());
    if (full) this.#members.replaceLeaf(index, members);
    else this.#members.setLeaf(index, members);
  }

  leafDropped(index: number): void {
    this.#members.dropLeaf(index);
  }

  countersReported(delta: RoomCounterValues): void {
    this.counters.add(delta);
  }

  shardedChanged(sharded: boolean): void {
    this.engine.presence(this.#stream).share(sharded ? this.roster() : null);
  }

  // -------------------------------------------------------------------------
  // The reclaim's host
  // -------------------------------------------------------------------------

  storageExists(): boolean {
    return (this.#history.durable && this.#history.exists) || this.#meta.exists || this.#keys.exists || (this.#webhooks?.storageExists ?? false);
  }

  latestTs(): number {
    return this.#history.latestTs;
  }

  newestKeyTs(): number {
    return this.#keys.newestTs();
  }

  heldUntil(): number {
    return this.#webhooks?.heldUntil() ?? 0;
  }

  quiet(): boolean {
    // Leaves are retired before the room's storage goes (their directory is in it); webhook events
    // and the record of what the receiver was told are in it too.
    return this.counters.unreported() === null && this.#leaves.size === 0 && !this.#webhooks?.holdsStorage;
  }

  reportEmpty(): void {
    this.#registration.occupancyChanged(this.#room, 0, this.#memberCount());
  }

  async reclaim(): Promise<void> {
    await this.#ctx.storage.deleteAlarm();
    await this.#ctx.storage.deleteAll();
    this.engine.sweeper.forgetAlarm();
    this.#meta.reset();
    this.#history.reset();
    this.#keys.reset();
    this.#publishKeys.reset();
    this.counters.reset();
    this.#stream.reset();
    this.#publishing.reset();
    this.#webhooks?.reset();
    this.#listed = false;
    await this.#registration.storage(this.#room, false);
  }

  // -------------------------------------------------------------------------

  #roomFull(): Response {
    logEvent("refusal", { room: this.#room, reason: "room_full", connections: this.engine.size });
    this.counters.refused("room_full");
    return Response.json(
      { error: "room_full", message: `the room holds its maximum of ${this.limits.MAX_SOCKETS_PER_ROOM} sockets` },
      { status: 503, headers: { "Retry-After": "10" } },
    );
  }

  /** An ephemeral room moved on (or its mark's holder left): the mark says where it stands now. */
  #markMoved(): void {
    this.#mark?.write({ seq: this.#history.seq, epoch: this.#history.epoch });
  }

  /** Sockets of the room: its own and its leaves'. */
  #connections(): number {
    return this.engine.size + this.#leaves.connections;
  }

  /** Members of the room, over every object of it. */
  #memberCount(): number {
    return this.engine.presence(this.#stream).count;
  }

  /**
   * The room's roster changed (a member came or went here or on another
   * object): the other objects hear of it with their next push, the room's
   * own sockets a turn later (a change that started with one of them has
   * been shown to it by then, as its own join or leave).
   */
  #membersChanged(): void {
    if (!this.#leaves.sharded) return;
    const roster = this.roster();
    this.#leaves.membersChanged(roster.members !== null);
    if (this.#rosterQueued) return;
    this.#rosterQueued = true;
    queueMicrotask(() => {
      this.#rosterQueued = false;
      if (this.#leaves.sharded) this.engine.presence(this.#stream).share(this.roster());
    });
  }

  /**
   * Before this instance writes: the directory learns that the room holds
   * storage, so the worker will show it to those who look (it shows nothing
   * for rooms it does not know, to create nothing). Once per instance, which
   * also heals a report that was lost.
   */
  async #list(): Promise<void> {
    if (this.#listed) return;
    this.#listed = true;
    // Kept for an instance its alarm starts without a name (constructor); read once per instance.
    if (this.#room !== "" && this.#meta.get(NAME_KEY) !== this.#room) this.#meta.set(NAME_KEY, this.#room);
    await this.#registration.storage(this.#room, true);
  }

  /** Work that must not hold up the caller, and whose failure is logged rather than thrown. */
  #background(work: Promise<unknown>): void {
    this.#ctx.waitUntil(work.catch((error: unknown) => logEvent("error", { room: this.#room, where: "background", error: String(error) })));
  }
}

function isNamespace(value: unknown): value is DurableObjectNamespace {
  return typeof (value as DurableObjectNamespace | undefined)?.idFromName === "function";
}
