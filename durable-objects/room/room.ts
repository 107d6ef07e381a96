import { DurableObject } from "cloudflare:workers";
import { CloseCode, PING, PONG, type LostEvent, type RoomStats, type WelcomeEvent } from "../../client-sdk/src/protocol";
import { readLimits, type Limits } from "../../worker/settings";
import { registrationFor, type RoomRegistration } from "../coordinator/registration";
import { logEvent } from "../../worker/log";
import type { LeafAddress, LeafHistory, LeafReport, LeafStart } from "../leaf/rpc";
import type { RoomLeaf } from "../leaf/leaf";
import type { RootRequests } from "../../client-sdk/src/protocol";
import { ClientFrames } from "./client-frames";
import { addCounters, RoomCounters } from "./counters";
import { Delivery } from "./delivery";
import { CAN_PUBLISH_HEADER, EDGE_HEADERS, LEAF_FULL_HEADER, ROOM_NAME_HEADER, TOKEN_EXPIRES_HEADER } from "./headers";
import { History } from "./history";
import { historyMessages, Leaves } from "./leaves";
import { RoomMembers } from "./room-members";
import { memberFromHeaders } from "./member";
import { Presence, type PresencePage } from "./presence";
import { Publishing, type PublishOptions, type PublishResult } from "./publishing";
import { SocketState, type RatePolicy, type SocketAttachment } from "./socket-state";
import { Sweeper } from "./sweeper";

export { CAN_PUBLISH_HEADER, EDGE_HEADERS, ROOM_NAME_HEADER, TOKEN_EXPIRES_HEADER };
export type { PresencePage, PublishOptions, PublishResult };

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
 */
export class Room extends DurableObject<Record<string, unknown>> {
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

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env);
    const limits = readLimits(env);
    this.#limits = limits;
    this.#rate = { perSecond: limits.CLIENT_FRAMES_PER_SECOND, burst: Math.max(1, limits.CLIENT_FRAME_BURST) };
    this.#history = new History(ctx.storage, {
      maxMessages: limits.HISTORY_MAX_MESSAGES,
      maxAgeMs: limits.HISTORY_MAX_AGE_SECONDS * 1000,
    });
    this.#counters = new RoomCounters(this.#history);
    this.#name = this.#history.meta("name");
    this.#registration = registrationFor(env, ctx, this.#counters);
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
        left: (state) => this.#presence.leave(state, Date.now()),
        released: (ws, state) => this.#presence.refresh(ws, state),
      },
    );
    this.#members = new RoomMembers(() => {
      this.#leaves.membersChanged();
      if (this.#leaves.sharded) this.#presence.countChanged();
    });
    this.#leaves = new Leaves(
      {
        shardSockets: limits.ROOM_SHARD_SOCKETS,
        maxLeaves: limits.ROOM_MAX_LEAVES,
        maxSocketsPerObject: limits.MAX_SOCKETS_PER_ROOM,
        countIntervalMs: limits.PRESENCE_COUNT_INTERVAL_MS,
        retireAfterMs: limits.ROOM_LEAF_RETIRE_MS,
      },
      {
        roomName,
        namespace: () => (env.LEAVES as DurableObjectNamespace<RoomLeaf> | undefined) ?? null,
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
    this.#frames = new ClientFrames(this.#delivery, this.#publishing, this.#counters, limits, this.#rate, {
      roomName: () => this.#name ?? "",
      persistAttachment: (ws, state) => ws.serializeAttachment(state.attachment),
    });
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
        const state = new SocketState(attachment, this.#delivery.flushedSeq);
        this.#delivery.join(ws, state, now);
        this.#presence.restore(state);
      }
    }
    // Leaves found in the directory: each is asked for its sockets and members.
    this.#leaves.wake();
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

      if (this.#delivery.size >= this.#limits.MAX_SOCKETS_PER_ROOM) {
        logEvent("refusal", { room: this.#name, reason: "room_full", connections: this.#delivery.size });
        this.#counters.refused("room_full");
        return Response.json(
          { error: "room_full", message: `the room holds its maximum of ${this.#limits.MAX_SOCKETS_PER_ROOM} sockets` },
          { status: 503, headers: { "Retry-After": "10" } },
        );
      }
      const expires = Number(request.headers.get(TOKEN_EXPIRES_HEADER));
      const pair = new WebSocketPair();
      const client = pair[0];
      const server = pair[1];
      const now = Date.now();
      const attachment: SocketAttachment = {
        id: crypto.randomUUID(),
        connectedAt: now,
        canPublish: request.headers.get(CAN_PUBLISH_HEADER) !== "false",
        expiresAt: Number.isSafeInteger(expires) && expires > 0 ? expires : null,
      };
      const member = memberFromHeaders(request.headers);
      if (member) attachment.member = member;
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
   */
  async publish(room: string, dataJson: string, options: PublishOptions = {}): Promise<PublishResult> {
    this.#requests.publishes += 1;
    this.#learnName(room);
    await this.#list();
    return this.#publishing.publish(dataJson, options);
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
    this.#delivery.leave(ws);
    // The Hibernation API does not answer the peer's close frame; without this the
    // client waits in CLOSING and reports 1006. Reserved codes cannot be sent back.
    const reply = code === 1005 || code === 1006 || code === 1015 ? CloseCode.NORMAL : code;
    if (ws.readyState === WebSocket.CLOSED) return;
    try {
      ws.close(reply, reason);
    } catch {
      // Already closed: nothing to reciprocate.
    }
  }

  override async webSocketError(ws: WebSocket, error: unknown): Promise<void> {
    const state = this.#delivery.leave(ws);
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

/** Largest answer to one leaf's history request. */
const LEAF_HISTORY_MAX_BYTES = 4 * 1024 * 1024;

function parseSeqParam(value: string | null): number | null {
  if (value === null || !/^\d{1,15}$/.test(value)) return null;
  return Number(value);
}
