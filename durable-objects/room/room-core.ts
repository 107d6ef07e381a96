import { resumePointOf, type PresencePage, type RoomCounterValues, type RoomStats, type RootRequests } from "../../protocol";
import { bodyHash } from "../../common/body-hash";
import { LEAF_FULL_HEADER } from "../../common/edge-requests";
import { logEvent } from "../../common/log";
import { retentionFor, type Retention } from "../../common/retention";
import { accessSettings, historyRules, readLimits, type Limits } from "../../common/settings";
import { utf8Length } from "../../common/utf8";
import { isCacheChannelRoom, isPrivatePusherRoom } from "../../protocol/pusher";
import { registrationFor, type RoomRegistration } from "../coordinator/registration";
import { attachmentFromEdge, type SocketAttachment } from "../engine/attachment";
import type { RoomCounters } from "../engine/counters";
import type { Cursor } from "../engine/cursor";
import type { LeaveCause } from "../engine/delivery";
import type { PublishOrigin } from "../engine/frame-hooks";
import type { Message } from "../engine/message";
import type { PublishOutcome, PublishResult, RetryKey } from "../engine/publish-outcome";
import { SocketEngine, type EngineHost } from "../engine/socket-engine";
import { SocketMark, type MarkedAttachment } from "../engine/socket-mark";
import type { SocketState } from "../engine/socket-state";
import type { Stream } from "../engine/stream";
import { answerHoldOf, type AnswerHold } from "./fault-hold";
import { admit } from "./hooks/admission";
import { deepFreeze } from "./hooks/connection-data";
import { HookRunner, type RoomHookSet } from "./hooks/hook-runner";
import type { Connection, JsonObject } from "./hooks/hooks";
import { Publishing, type FlushListener, type PublishOptions } from "./publishing";
import { RoomFollowers, type RootEvents } from "./room-followers";
import { RoomMembers } from "./room-members";
import { ownStats, roomStats } from "./room-stats";
import { historyPage, type PageAnswer, type PageQuery } from "./storage/history-pages";
import { MetaStore } from "./storage/meta-store";
import { keyedPublish, type KeyedPublish } from "./storage/publish-keys";
import { RoomStorage, storedRoomName } from "./storage/room-storage";
import type { GiveBackAnswer } from "../coordinator/room-contract";
import { StorageReclaim, type ReclaimHost } from "./storage/storage-reclaim";
import { webhookTarget } from "./webhooks/webhook-target";
import { Webhooks, type WebhooksHost } from "./webhooks/webhooks";

const NO_WEBHOOKS = null;
/** Present while the room holds storage its shard's directory does not list (a report that failed). */
const UNLISTED_KEY = "unlisted";
/** How much later than its history bound from now a room asks to be asked, when it lists itself before a write. */
const LIST_MARGIN_MS = 1000;
/** A room its shard's directory could not list is listed again from its alarm after this long, if no write did it first. */
const LIST_RETRY_MS = 60_000;
/**
 * A room whose last socket just left keeps its storage at least this long, so
 * that a page reload resumes under the same epoch even when nothing was published.
 */
const EMPTIED_HOLD_MS = 10_000;
/** An instance that ends itself waits this long first, for the answer it is giving to leave. */
const END_DELAY_MS = 100;

/**
 * A room's parts, wired: its storage (RoomStorage: meta, history, keys,
 * counters), the socket engine with the room's one stream, the publish path,
 * the hooks, the followers that hold the rest of its sockets (RoomFollowers)
 * and the room's registration. The room's face (room.ts) calls the part it
 * needs; this object answers what takes several parts: upgrades, publishes,
 * reads, and the engine's, the flush's and the reclaim's questions.
 */
export class RoomCore<Data extends object = JsonObject> implements EngineHost, FlushListener, ReclaimHost, RootEvents {
  readonly #ctx: DurableObjectState;
  readonly #env: Record<string, unknown>;
  readonly limits: Limits;
  readonly #room: string;
  /** This room's history bounds, from its name (HISTORY_RULES, else the HISTORY_MAX_* vars). */
  readonly retention: Retention;
  readonly storage: RoomStorage;
  readonly counters: RoomCounters;
  /** Null except in the local server's fault tests (fault-hold.ts). */
  readonly #answerHold: AnswerHold | null;
  readonly #registration: RoomRegistration;
  readonly engine: SocketEngine;
  readonly #stream: Stream;
  /** An ephemeral room's seq and epoch, in a socket's attachment, so they outlive hibernation (null: a room that stores). */
  readonly #mark: SocketMark | null;
  readonly hooks: HookRunner<Data>;
  readonly #publishing: Publishing;
  readonly #members: RoomMembers;
  /** The objects that follow the room (leaves, hubs), and their calls on it. */
  readonly followers: RoomFollowers;
  readonly #reclaim: StorageReclaim;
  /** The room's webhooks; null when the room has no webhook target (nothing is recorded: webhook-target.ts). */
  readonly webhooks: Webhooks | null;
  readonly #instanceStartedAt = Date.now();
  /** Whether the room is a channel's that Pusher keeps private: open mode never opens it. */
  readonly #privatePusherRoom: boolean;
  /** Whether this instance has told the directory that the room holds storage. */
  #listed = false;
  /** When to list the room again from the alarm, its directory report having failed (0: not needed). */
  #listRetryAt = 0;
  /** Whether this instance is ending itself (endSoon). */
  #ending = false;
  /** Whether this instance told the room's shard when to ask for its storage since it last had sockets. */
  #dueTold = false;
  /** Upgrades and publishes in flight: the storage does not go under them. */
  #writes = 0;
  /** When this instance's last socket left (0: none did). */
  #emptiedAt = 0;
  /** Whether the room (its own sockets and its followers') was last reported as having sockets. */
  #occupied = false;
  /** Requests this instance received, by kind: what a sharded room's root is asked (GET /rooms/{room}). */
  readonly requests: RootRequests = { upgrades: 0, placements: 0, publishes: 0, leafSyncs: 0, leafReports: 0, leafFetches: 0, reads: 0 };

  constructor(ctx: DurableObjectState, env: Record<string, unknown>, hookSet: RoomHookSet<Data>) {
    this.#ctx = ctx;
    this.#env = env;
    const limits = readLimits(env);
    this.limits = limits;
    const meta = new MetaStore(ctx.storage.sql);
    // Every room is addressed by its name, and the runtime gives an instance its name, except one
    // it starts for an alarm (workerd 2026-04-26; locally, also a request that reaches the object
    // while that instance, or the runtime's record of it, lives): that one has the name the room
    // stored with its first write. With no storage there is no name to read, and nothing that
    // needs one: the instance was started for an alarm the storage no longer holds, and ends
    // itself at its first call (`unnamed`, room.ts).
    this.#room = ctx.id.name ?? storedRoomName(meta) ?? "";
    this.retention = retentionFor(this.#room, historyRules(env), limits);
    this.#privatePusherRoom = isPrivatePusherRoom(this.#room);
    // Woken from hibernation, an ephemeral room carries on where its sockets say it stood.
    this.storage = new RoomStorage(ctx.storage, meta, this.retention, limits, () => ctx.getWebSockets().map((ws) => ws.deserializeAttachment() as SocketAttachment | null));
    const { history, counters } = this.storage;
    this.counters = counters;
    this.#answerHold = answerHoldOf(env, ctx.storage);
    this.#registration = registrationFor(env, ctx, counters);
    this.engine = new SocketEngine(ctx, limits, counters, this);
    const delivery = this.engine.delivery;
    this.#mark = history.durable ? null : new SocketMark(delivery);
    this.hooks = new HookRunner<Data>(
      hookSet,
      { delivery, roomName: () => this.#room, maxEventBytes: limits.MAX_MESSAGE_BYTES },
      { maxMessageBytes: limits.MAX_MESSAGE_BYTES, count: (reason) => counters.refused(reason) },
    );
    // The room's own members join its roster, which its sockets see once it spans several objects.
    this.#stream = this.engine.openStream(this.#room, history, { memberChanged: (id, view) => this.#members.setLocal(id, view) });
    this.#members = new RoomMembers(() => this.followers.rosterChanged(), {
      joined: (id, info, verified) => this.webhooks?.memberJoined(id, info, verified),
      left: (id) => this.webhooks?.memberLeft(id),
    });
    const parts = { room: this.#room, env, limits, meta, history, engine: this.engine, stream: this.#stream, members: this.#members, counters, requests: this.requests };
    // Connection hooks run where the sockets are: a room that has them holds every socket itself (docs/hooks.md).
    const holdsOwnSockets = !!(hookSet.onConnect || hookSet.onClientFrame || hookSet.onClose);
    this.followers = new RoomFollowers(parts, this, { holdsOwnSockets, cacheChannel: isCacheChannelRoom(this.#room) });
    this.#publishing = new Publishing(this.storage, delivery, this.#stream, counters, limits, this);
    this.#reclaim = new StorageReclaim(this, this.storage, this.retention.maxAgeSeconds * 1000);
    // Before the sockets are restored: the webhooks read what the receiver was told, and the restored members confirm it.
    const target = webhookTarget(this.#room, env);
    this.webhooks = target ? new Webhooks(ctx.storage, { target, limits, sharded: this.followers.set.size > 0 }, counters, this.#webhooksHost()) : NO_WEBHOOKS;
    // A room only hibernates once every cursor was level, so its sockets rejoin level.
    this.engine.restore((attachment) => {
      if (attachment.data) deepFreeze(attachment.data);
      return [{ stream: this.#stream, seq: this.#stream.flushedSeq }];
    });
    // Followers found in the directory: each is asked for its sockets and members.
    this.followers.set.wake();
    // Members or the room recorded and not here after the restore (a restart), events waiting: the alarm ends the wait.
    if ((this.webhooks?.alarmWanted(Date.now()) ?? null) !== null) this.#background(this.engine.sweeper.ensureAlarm());
  }

  get room(): string {
    return this.#room;
  }

  /** The instance knows no name for its room (see the constructor): it serves nothing and ends itself. */
  get unnamed(): boolean {
    return this.#room === "";
  }

  /**
   * Ends this instance once the current call has answered, so that the next
   * call, which names the room, starts it afresh. Locally an instance the
   * runtime started without its name hands the same namelessness to every
   * later start of the object until the runtime forgets it (about a minute
   * after its last call); ending it ends that too.
   */
  endSoon(): void {
    if (this.#ending) return;
    this.#ending = true;
    this.#ctx.waitUntil(
      new Promise((resolve) => setTimeout(resolve, END_DELAY_MS)).then(() => {
        // A socket or a write that arrived meanwhile stores the name again (list): the instance stays.
        this.#ending = this.unnamed || (this.engine.size === 0 && this.#writes === 0 && !this.storageExists());
        if (this.#ending) this.#ctx.abort("a room instance without its name ends itself");
      }),
    );
  }

  /** Every socket of the room on this object, as hook connections. */
  *connections(): IterableIterator<Connection<Data>> {
    for (const socket of this.engine.delivery.sockets()) yield this.hooks.connection(socket);
  }

  // -------------------------------------------------------------------------
  // Upgrades and publishes
  // -------------------------------------------------------------------------

  /** A WebSocket upgrade the edge forwarded (already validated there): a socket here, a placement on the leaves, or a refusal. */
  async upgrade(request: Request): Promise<Response> {
    this.#writes += 1;
    try {
      return await this.#upgrade(request);
    } finally {
      this.#writes -= 1;
    }
  }

  async #upgrade(request: Request): Promise<Response> {
    await this.list();
    // Past ROOM_SHARD_SOCKETS of its own, the room hands the edge a placement on its leaves.
    const placement = await this.followers.set.place(this.engine.size, request.headers.get(LEAF_FULL_HEADER));
    if (placement) {
      this.requests.placements += 1;
      return placement;
    }
    this.requests.upgrades += 1;
    if (this.engine.size >= this.limits.MAX_SOCKETS_PER_ROOM) return this.#roomFull();
    const attachment: MarkedAttachment = attachmentFromEdge(request.headers, Date.now());
    // An ephemeral room's sockets carry where it stands, so that it outlives hibernation.
    if (this.#mark) attachment.mark = { seq: this.#stream.flushedSeq, epoch: this.storage.history.epoch };
    if (this.hooks.admitsSockets) {
      const refused = await admit(this.hooks, this.#room, request, attachment);
      if (refused) return refused;
      if (this.engine.size >= this.limits.MAX_SOCKETS_PER_ROOM) return this.#roomFull();
    }
    return this.engine.accept(this.#stream, {
      attachment,
      resume: resumePointOf(new URL(request.url).searchParams),
      epoch: this.storage.history.issueEpoch(),
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
    this.#writes += 1;
    try {
      return await this.#publish(dataJson, options);
    } finally {
      this.#writes -= 1;
    }
  }

  async #publish(dataJson: string, options: PublishOptions): Promise<PublishOutcome> {
    await this.list();
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
    if (!this.hooks.checksPublishes) return this.#publishing.publish(dataJson, options, retry);
    // A retried key is answered without asking the hook again.
    const key = options.idempotencyKey;
    const seen = key === undefined ? null : this.#publishing.duplicateOf(key);
    if (seen !== null) return { seq: seen, recipients: 0, duplicate: true };
    const prior = retry ? this.#publishing.prior(retry) : null;
    if (prior) return prior;
    const source = options.source ?? "http";
    const origin: PublishOrigin = source === "pusher" ? { kind: "pusher", event: options.fields?.event ?? "message" } : { kind: source };
    const checked = await this.hooks.checkPublish(dataJson, undefined, origin);
    if (!checked.ok) return { refused: checked.refusal };
    return this.#publishing.publish(checked.dataJson, options, retry);
  }

  /** A message of the room's own (a hook's `publishMessage`): it does not pass beforePublish. */
  async publishOwn(data: unknown): Promise<PublishResult> {
    const dataJson = JSON.stringify(data) as string | undefined;
    if (dataJson === undefined) throw new TypeError("a message must be a JSON value");
    const bytes = utf8Length(dataJson);
    if (bytes > this.limits.MAX_MESSAGE_BYTES) throw new RangeError(`message is ${bytes} bytes as JSON, over ${this.limits.MAX_MESSAGE_BYTES}`);
    this.#writes += 1;
    try {
      await this.list();
      return await this.#publishing.publish(dataJson);
    } finally {
      this.#writes -= 1;
    }
  }

  // -------------------------------------------------------------------------
  // Storage (RPC from the room's coordinator shard)
  // -------------------------------------------------------------------------

  /** The room's shard asks whether its storage can go (storage-reclaim.ts): it goes, or the room says when to ask again. */
  async giveBack(): Promise<GiveBackAnswer> {
    const answer = await this.#reclaim.giveBack(Date.now());
    // An instance started without its name must not outlive the storage that named it (endSoon).
    if (answer.gone && this.#ctx.id.name === undefined) this.endSoon();
    return answer;
  }

  // -------------------------------------------------------------------------
  // Operations
  // -------------------------------------------------------------------------

  async shutdown(code: number, reason: string): Promise<number> {
    this.counters.persistNow();
    return this.engine.shutdown(code, reason) + (await this.followers.set.shutdown(code, reason));
  }

  presencePage(limit: number, cursor: string | null): PresencePage {
    this.requests.reads += 1;
    // The room's members over its own sockets and every follower's (leaves, hubs).
    return this.#members.page(limit, cursor, this.#connections());
  }

  /** A page of the room's history (`GET /rooms/{room}/messages`); reads only, so a room that holds nothing stays without storage. */
  historyPage(query: PageQuery): PageAnswer {
    this.requests.reads += 1;
    const answer = historyPage(this.storage.history, this.#room, query);
    if (answer.ok) this.counters.rowsRead(answer.rowsRead);
    return answer;
  }

  async stats(): Promise<RoomStats> {
    this.requests.reads += 1;
    const own = ownStats({ room: this.#room, history: this.storage.history, engine: this.engine, stream: this.#stream, retention: this.retention, counters: this.counters, limits: this.limits }, this.#instanceStartedAt);
    if (this.webhooks) own.webhooks = this.webhooks.stats();
    if (!this.followers.set.sharded) return own;
    return roomStats(own, await this.followers.set.snapshot(), { ...this.requests }, this.followers.set.pushes);
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
    this.webhooks?.connections(connections);
    const occupied = connections > 0;
    if (occupied === this.#occupied) return;
    this.#occupied = occupied;
    if (!occupied) this.#emptiedAt = Date.now();
    // Emptied, a room that holds storage tells its shard, in the same report, when to ask for it.
    const due = occupied ? null : this.#reclaim.dueAt();
    this.#dueTold = due !== null;
    this.#registration.occupancyChanged(this.#room, connections, this.#memberCount(), due ?? undefined);
    if (!occupied) this.#background(this.engine.sweeper.ensureAlarm());
  }

  left(socket: SocketState, cause: LeaveCause): void {
    // The mark moves to another socket before this one's attachment is gone.
    if (this.#mark?.left(socket)) this.#markMoved();
    if (this.hooks.watchesCloses) this.#background(this.hooks.closed(socket, cause));
  }

  heartbeat(): void {
    this.#registration.heartbeat(this.#room, this.#connections(), this.#memberCount());
  }

  otherSockets(): number {
    return this.followers.set.connections;
  }

  alarmWanted(now: number): number | null {
    const webhooks = this.webhooks?.alarmWanted(now) ?? null;
    const list = this.#listRetryAt === 0 ? null : this.#listRetryAt;
    if (webhooks === null) return list;
    return list === null ? webhooks : Math.min(webhooks, list);
  }

  async onAlarm(now: number): Promise<void> {
    // An alarm finds no socket in an instance that never had one: they went with a restart or a
    // crash, and their clients may be reconnecting (EMPTIED_HOLD_MS).
    if (this.#emptiedAt === 0 && this.#connections() === 0) this.#emptiedAt = now;
    const held = this.webhooks?.holdsStorage ?? false;
    if (this.webhooks) await this.webhooks.onAlarm(now);
    // Its webhook events sent, or its sockets gone without a word (a restart, a crash): the room
    // tells its shard when to ask for its storage.
    const due = held || !this.#dueTold ? this.#reclaim.dueAt() : null;
    if (due !== null) {
      this.#registration.storageDue(this.#room, due);
      this.#dueTold = true;
    }
    // Not listed by the instance that wrote (its report failed): listed now, whichever instance this is.
    if (!this.#listed && this.storage.meta.get(UNLISTED_KEY) !== null) await this.list();
  }

  // -------------------------------------------------------------------------
  // The flush's listener
  // -------------------------------------------------------------------------

  storing(messages: readonly Message[]): void {
    // An ephemeral room stores no message, so it sends no message.published either (docs/webhooks.md).
    if (this.storage.history.durable) this.webhooks?.storing(messages);
  }

  flushed(messages: readonly Message[]): number {
    this.webhooks?.stored();
    this.#markMoved();
    return this.followers.set.push(messages);
  }

  afterFlush(now: number): void {
    this.engine.sweeper.maybeSweep(now);
  }

  // -------------------------------------------------------------------------
  // The followers' events (and list(), below)
  // -------------------------------------------------------------------------

  membersArriving(): void {
    this.webhooks?.connections(this.#connections());
  }

  // -------------------------------------------------------------------------
  // The reclaim's host
  // -------------------------------------------------------------------------

  storageExists(): boolean {
    return this.storage.exists || (this.webhooks?.storageExists ?? false);
  }

  heldUntil(): number {
    return Math.max(this.webhooks?.heldUntil() ?? 0, this.#emptiedAt === 0 ? 0 : this.#emptiedAt + EMPTIED_HOLD_MS);
  }

  inUse(): boolean {
    // Webhook events and the record of what the receiver was told are in the storage.
    return this.#connections() > 0 || (this.webhooks?.holdsStorage ?? false);
  }

  busy(): boolean {
    // Followers are retired before the room's storage goes (their directory is in it); a write in
    // flight (its listing awaited, its flush to come) lands first.
    return this.followers.set.size > 0 || this.#writes > 0;
  }

  unreported(): RoomCounterValues | null {
    return this.counters.unreported();
  }

  async reclaim(): Promise<void> {
    await this.#ctx.storage.deleteAlarm();
    await this.#ctx.storage.deleteAll();
    this.engine.sweeper.forgetAlarm();
    this.storage.reset();
    this.#stream.reset();
    this.#publishing.reset();
    this.webhooks?.reset();
    this.#listed = false;
    this.#listRetryAt = 0;
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
    this.#mark?.write({ seq: this.storage.history.seq, epoch: this.storage.history.epoch });
  }

  /** Sockets of the room: its own and its leaves'. */
  #connections(): number {
    return this.engine.size + this.followers.set.connections;
  }

  /** Members of the room, over every object of it. */
  #memberCount(): number {
    return this.followers.members();
  }

  /** What the webhooks ask of the room. */
  #webhooksHost(): WebhooksHost {
    return {
      roomName: () => this.#room,
      // Asked inside a flush, whose transaction stores the epoch with its first message.
      epoch: () => this.storage.history.epoch,
      memberCount: () => this.#members.count,
      wantAlarm: () => this.#background(this.engine.sweeper.ensureAlarm()),
    };
  }

  /**
   * Before this instance writes: the directory learns that the room holds
   * storage, so the worker will show it to those who look (it shows nothing
   * for rooms it does not know, to create nothing), and the shard will ask
   * the room for its storage once its history could have aged out. Once per
   * instance, which also heals a report that was lost; a report that fails
   * is made again by the next write, or from the alarm.
   */
  async list(): Promise<void> {
    if (this.#listed || this.#room === "") return;
    this.#listed = true;
    // Kept for an instance the runtime starts without its name (constructor); read once per instance.
    this.storage.keepName(this.#room);
    // The write this precedes lands within a flush or so: a second more spares a question asked just before its time.
    const due = Math.max(this.#reclaim.dueAt() ?? 0, Date.now() + this.retention.maxAgeSeconds * 1000 + LIST_MARGIN_MS);
    if (await this.#registration.storage(this.#room, due)) {
      this.#listRetryAt = 0;
      if (this.storage.meta.get(UNLISTED_KEY) !== null) this.storage.meta.delete(UNLISTED_KEY);
      return;
    }
    // Unlisted, nobody would ask for the storage: noted in it, for the alarm to list it.
    this.#listed = false;
    this.storage.meta.set(UNLISTED_KEY, "1");
    this.#listRetryAt = Date.now() + LIST_RETRY_MS;
    this.#background(this.engine.sweeper.ensureAlarm());
  }

  /** Work that must not hold up the caller, and whose failure is logged rather than thrown. */
  #background(work: Promise<unknown>): void {
    this.#ctx.waitUntil(work.catch((error: unknown) => logEvent("error", { room: this.#room, where: "background", error: String(error) })));
  }
}
