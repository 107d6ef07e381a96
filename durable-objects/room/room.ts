import { DurableObject } from "cloudflare:workers";
import { CloseCode, PING, PONG, type LostEvent, type RoomStats, type WelcomeEvent } from "../../client-sdk/src/protocol";
import { readLimits, type Limits } from "../../worker/settings";
import { registrationFor, type RoomRegistration } from "../coordinator/registration";
import { logEvent } from "../../worker/log";
import { ClientFrames } from "./client-frames";
import { RoomCounters } from "./counters";
import { Delivery } from "./delivery";
import { CAN_PUBLISH_HEADER, EDGE_HEADERS, ROOM_NAME_HEADER, TOKEN_EXPIRES_HEADER } from "./headers";
import { History } from "./history";
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
 * - `Sweeper` reaps idle sockets and gives an unused room's storage back.
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
  readonly #instanceStartedAt = Date.now();
  #name: string | null;
  /** Whether this instance has told the directory that the room holds storage. */
  #listed = false;

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
        occupancyChanged: (connections) => {
          if (this.#name) this.#registration.occupancyChanged(this.#name, connections, this.#presence.count);
          if (connections === 0) this.#background(this.#sweeper.ensureAlarm());
        },
        left: (state) => this.#presence.leave(state, Date.now()),
        released: (ws, state) => this.#presence.refresh(ws, state),
      },
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
      },
    );
    this.#sweeper = new Sweeper(
      ctx,
      this.#delivery,
      this.#history,
      this.#counters,
      { idleTimeoutMs: limits.IDLE_TIMEOUT_SECONDS * 1000, historyMaxAgeMs: limits.HISTORY_MAX_AGE_SECONDS * 1000 },
      {
        roomName,
        heartbeat: () => {
          if (this.#name) this.#registration.heartbeat(this.#name, this.#delivery.size, this.#presence.count);
        },
        reportEmpty: () => {
          if (this.#name) this.#registration.occupancyChanged(this.#name, 0, this.#presence.count);
        },
        quiet: () => this.#counters.unreported() === null,
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
    this.#publishing = new Publishing(this.#history, this.#delivery, this.#counters, limits, (now) => {
      this.#sweeper.maybeSweep(now);
      // A room published into with nobody listening still needs its alarm, to give its storage back later.
      if (this.#delivery.size === 0) this.#background(this.#sweeper.ensureAlarm());
    });
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
  }

  // -------------------------------------------------------------------------
  // Upgrades
  // -------------------------------------------------------------------------

  /** Accepts a WebSocket upgrade forwarded by the worker (already validated there). */
  override async fetch(request: Request): Promise<Response> {
    try {
      this.#learnName(request.headers.get(ROOM_NAME_HEADER));
      await this.#list();
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
    this.#learnName(room);
    await this.#list();
    return this.#publishing.publish(dataJson, options);
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
    return closed;
  }

  /** Members in id order after `cursor`, at most `limit` (`GET /rooms/{room}/presence`). */
  async presence(limit: number, cursor: string | null): Promise<PresencePage> {
    return this.#presence.page(limit, cursor, this.#delivery.size);
  }

  async stats(): Promise<RoomStats> {
    let inFlight = 0;
    let inFlightMax = 0;
    for (const [, state] of this.#delivery.entries()) {
      inFlight += state.inFlight;
      inFlightMax = Math.max(inFlightMax, state.inFlight);
    }
    return {
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
  }

  // -------------------------------------------------------------------------

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

function parseSeqParam(value: string | null): number | null {
  if (value === null || !/^\d{1,15}$/.test(value)) return null;
  return Number(value);
}
