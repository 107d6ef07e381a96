import { DurableObject } from "cloudflare:workers";
import {
  CloseCode,
  PING,
  PONG,
  parseClientFrame,
  type DroppedEvent,
  type LostEvent,
  type RoomStats,
  type ReplayedEvent,
  type WelcomeEvent,
} from "../../client-sdk/src/protocol";
import { readLimits, type Limits } from "../config";
import { registrationFor, type RoomRegistration } from "../coordinator/registration";
import { logEvent } from "../log";
import { RoomCounters } from "./counters";
import { History, type StoredMessage } from "./history";
import { SocketState, type RatePolicy, type SocketAttachment, type SlowPolicy } from "./socket-state";
import { utf8Length } from "./utf8";

/** Header the worker uses to tell the room its own name on an upgrade. */
export const ROOM_NAME_HEADER = "x-room-name";
/** Header the worker uses to pass socket permissions decided at the edge. */
export const CAN_PUBLISH_HEADER = "x-can-publish";
/** Header the worker uses to pass the expiry (epoch ms) of the token a socket was admitted with. */
export const TOKEN_EXPIRES_HEADER = "x-token-expires";

export interface PublishResult {
  seq: number;
  /** Sockets the message was sent to (not dropped). */
  recipients: number;
  /** True when the idempotency key was already published; nothing was sent again. */
  duplicate: boolean;
}

export interface PublishOptions {
  idempotencyKey?: string;
}


interface PendingMessage extends StoredMessage {
  bytes: number;
}

interface Flush {
  promise: Promise<Map<number, number>>;
  resolve: (recipients: Map<number, number>) => void;
}

/**
 * One room: its sockets (accepted with the Hibernation API, so an idle room
 * holds no memory), its message history, and the fan-out between them.
 *
 * A message's path: `publish()` stores it (assigning `seq`) and queues it;
 * `#flush()` coalesces everything queued into as few frames as the batch
 * limits allow, serializes each frame once, and offers it to every socket
 * through that socket's window (`SocketState.admit`).
 */
export class Room extends DurableObject<Record<string, unknown>> {
  readonly #limits: Limits;
  readonly #policy: SlowPolicy;
  readonly #rate: RatePolicy;
  readonly #history: History;
  readonly #sockets = new Map<WebSocket, SocketState>();
  readonly #registration: RoomRegistration;
  readonly #instanceStartedAt = Date.now();
  #name: string | null;
  /** Highest seq already handed to the sockets; new sockets start after it. */
  #flushedSeq: number;
  #pending: PendingMessage[] = [];
  #flush: Flush | null = null;
  #lastSweep = Date.now();
  /** Whether the sweep alarm is known to be set: spares a storage call on every upgrade. */
  #alarmArmed = false;
  readonly #counters: RoomCounters;

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env);
    this.#limits = readLimits(env);
    this.#policy = {
      windowBytes: this.#limits.WINDOW_BYTES,
      dropsBeforeClose: Math.max(1, this.#limits.SLOW_DROPS_BEFORE_CLOSE),
      graceMs: this.#limits.SLOW_GRACE_MS,
    };
    this.#rate = { perSecond: this.#limits.CLIENT_FRAMES_PER_SECOND, burst: Math.max(1, this.#limits.CLIENT_FRAME_BURST) };
    this.#history = new History(ctx.storage.sql, {
      maxMessages: this.#limits.HISTORY_MAX_MESSAGES,
      maxAgeMs: this.#limits.HISTORY_MAX_AGE_SECONDS * 1000,
    });
    this.#flushedSeq = this.#history.seq;
    this.#counters = new RoomCounters(this.#history);
    this.#name = this.#history.meta("name");
    this.#registration = registrationFor(env, ctx, this.#counters);
    // Heartbeats are answered by the runtime, so a pinging client never wakes the room.
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(PING, PONG));
    const now = Date.now();
    // The runtime also lists sockets still closing (a stalled peer never finishes
    // the close handshake); those are not members of the room any more.
    for (const ws of ctx.getWebSockets()) {
      const attachment = ws.deserializeAttachment() as SocketAttachment | null;
      if (attachment && ws.readyState === WebSocket.OPEN) this.#sockets.set(ws, new SocketState(attachment, now));
    }
  }

  // -------------------------------------------------------------------------
  // Upgrades
  // -------------------------------------------------------------------------

  /** Accepts a WebSocket upgrade forwarded by the worker (already validated there). */
  override async fetch(request: Request): Promise<Response> {
    try {
      this.#learnName(request.headers.get(ROOM_NAME_HEADER));
      const url = new URL(request.url);
      const since = parseSeqParam(url.searchParams.get("since"));
      const epoch = url.searchParams.get("epoch");

      if (this.#sockets.size >= this.#limits.MAX_SOCKETS_PER_ROOM) {
        logEvent("refusal", { room: this.#name, reason: "room_full", connections: this.#sockets.size });
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
      const attachment: SocketAttachment = {
        id: crypto.randomUUID(),
        connectedAt: Date.now(),
        canPublish: request.headers.get(CAN_PUBLISH_HEADER) !== "false",
        expiresAt: Number.isSafeInteger(expires) && expires > 0 ? expires : null,
      };
      this.ctx.acceptWebSocket(server);
      server.serializeAttachment(attachment);
      const state = new SocketState(attachment, attachment.connectedAt);
      this.#track(server, state);

      const welcome: WelcomeEvent = {
        type: "welcome",
        room: this.#name ?? "",
        seq: this.#flushedSeq,
        epoch: this.#history.issueEpoch(),
        window: this.#limits.WINDOW_BYTES,
        rate: this.#rate,
      };
      server.send(JSON.stringify(welcome));
      if (since !== null) this.#resume(server, state, since, epoch);
      await this.#ensureSweepAlarm();
      return new Response(null, { status: 101, webSocket: client });
    } catch (error) {
      logEvent("error", { room: this.#name, where: "upgrade", error: String(error) });
      return Response.json({ error: "internal", message: "could not accept the socket" }, { status: 500 });
    }
  }

  /** Sends what a client resuming after `since` missed, or tells it what it cannot get back. */
  #resume(ws: WebSocket, state: SocketState, since: number, epoch: string | null): void {
    const latest = this.#flushedSeq;
    if ((epoch !== null && epoch !== this.#history.epoch) || since > latest) {
      this.#sendControl(ws, { type: "lost", reason: "epoch", from: 1, to: latest } satisfies LostEvent);
      return;
    }
    if (since === latest) return;
    this.#replay(ws, state, since + 1, latest);
  }

  /**
   * Re-sends `from`..`to` from history within the socket's window, reporting
   * what has aged out as lost, and ends with a `replayed` event saying how far
   * it got.
   */
  #replay(ws: WebSocket, state: SocketState, from: number, to: number): void {
    const end = Math.min(to, this.#flushedSeq);
    const oldest = this.#history.oldest();
    let next = from;
    if (next <= end && (oldest === null || oldest > next)) {
      const lostTo = oldest === null ? end : Math.min(end, oldest - 1);
      this.#sendControl(ws, { type: "lost", reason: "history", from: next, to: lostTo } satisfies LostEvent);
      next = lostTo + 1;
    }
    let truncated = false;
    while (next <= end) {
      const rows = this.#history.range(next, end, this.#limits.BATCH_MAX_EVENTS);
      if (rows.length === 0) break;
      // Replays honour the window too, or replay requests would be a way around it:
      // a frame takes what fits in the space left (one message at least on an idle socket).
      const window = this.#limits.WINDOW_BYTES || Number.POSITIVE_INFINITY;
      const budget = Math.min(this.#limits.BATCH_MAX_BYTES, window - state.inFlight);
      let take = 0;
      let bytes = 1;
      for (const row of rows) {
        const size = utf8Length(row.event) + 1;
        if (bytes + size > budget && !(take === 0 && state.inFlight === 0)) break;
        bytes += size;
        take += 1;
      }
      if (take === 0) {
        truncated = true;
        break;
      }
      const batch = rows.slice(0, take);
      const frame = take === 1 ? (batch[0] as StoredMessage).event : `[${batch.map((r) => r.event).join(",")}]`;
      const lastSeq = (batch[take - 1] as StoredMessage).seq;
      const frameBytes = utf8Length(frame);
      if (!this.#sendFrame(ws, state, frame, frameBytes, lastSeq)) return;
      this.#countSent(1, frameBytes, take);
      next = lastSeq + 1;
    }
    const done: ReplayedEvent = { type: "replayed", from, to: next - 1, truncated };
    this.#sendControl(ws, done);
    this.#counters.changed();
  }

  // -------------------------------------------------------------------------
  // Publishing and fan-out
  // -------------------------------------------------------------------------

  /**
   * Publishes one message. `dataJson` is the message's data as JSON text,
   * already validated by the caller; it is embedded in the event as is.
   */
  async publish(room: string, dataJson: string, options: PublishOptions = {}): Promise<PublishResult> {
    this.#learnName(room);
    const key = options.idempotencyKey;
    if (key !== undefined) {
      const seen = this.#history.seenKey(key);
      if (seen !== null) return { seq: seen, recipients: 0, duplicate: true };
    }
    const now = Date.now();
    const stored = this.#history.append(dataJson, now);
    this.#counters.values.published += 1;
    if (key !== undefined) this.#history.rememberKey(key, stored.seq, now);
    this.#pending.push({ ...stored, bytes: utf8Length(stored.event) });
    const recipients = await this.#scheduleFlush();
    return { seq: stored.seq, recipients: recipients.get(stored.seq) ?? 0, duplicate: false };
  }

  /**
   * Flushes on the next turn of the event loop (or after FLUSH_DELAY_MS), so
   * that publishes arriving while a fan-out runs are coalesced into the next
   * frame instead of each paying a frame per socket. An idle room flushes a
   * lone message at once: nothing else is queued ahead of the timer.
   */
  #scheduleFlush(): Promise<Map<number, number>> {
    if (this.#flush) return this.#flush.promise;
    let resolve!: (recipients: Map<number, number>) => void;
    const promise = new Promise<Map<number, number>>((r) => (resolve = r));
    const flush: Flush = { promise, resolve };
    this.#flush = flush;
    setTimeout(() => {
      this.#flush = null;
      flush.resolve(this.#flushPending());
    }, this.#limits.FLUSH_DELAY_MS);
    return promise;
  }

  /** Sends everything pending; returns, per seq, how many sockets it was sent to. */
  #flushPending(): Map<number, number> {
    const recipients = new Map<number, number>();
    const pending = this.#pending;
    this.#pending = [];
    const now = Date.now();
    let start = 0;
    while (start < pending.length) {
      // Cut the next frame at the batch limits; a message larger than the byte limit goes alone.
      let end = start;
      let bytes = 0;
      while (
        end < pending.length &&
        end - start < this.#limits.BATCH_MAX_EVENTS &&
        (end === start || bytes + (pending[end] as PendingMessage).bytes + 1 <= this.#limits.BATCH_MAX_BYTES)
      ) {
        bytes += (pending[end] as PendingMessage).bytes + 1;
        end += 1;
      }
      const batch = pending.slice(start, end);
      const frame = batch.length === 1 ? (batch[0] as PendingMessage).event : `[${batch.map((m) => m.event).join(",")}]`;
      const frameBytes = batch.length === 1 ? (batch[0] as PendingMessage).bytes : bytes + 1;
      const lastSeq = (batch[batch.length - 1] as PendingMessage).seq;
      const sentTo = this.#fanOut(frame, frameBytes, lastSeq, batch.length, now);
      for (const message of batch) recipients.set(message.seq, sentTo);
      this.#flushedSeq = lastSeq;
      start = end;
    }
    if (now - this.#lastSweep >= (this.#limits.IDLE_TIMEOUT_SECONDS * 1000) / 2) this.#sweep(now);
    this.#counters.changed();
    return recipients;
  }

  /** Offers one serialized frame to every socket through its window; returns how many got it. */
  #fanOut(frame: string, bytes: number, lastSeq: number, events: number, now: number): number {
    let sentTo = 0;
    let droppedFor = 0;
    for (const [ws, state] of this.#sockets) {
      const verdict = state.admit(bytes, lastSeq, events, now, this.#policy);
      if (verdict === "send") {
        if (this.#sendFrame(ws, state, frame, bytes, lastSeq)) sentTo += 1;
      } else {
        droppedFor += 1;
        if (verdict === "kick") this.#kick(ws, state);
      }
    }
    // Counted once per frame, not per socket.
    this.#countSent(sentTo, bytes, events);
    this.#counters.values.drops += droppedFor * events;
    return sentTo;
  }

  /** Sends a message frame through the socket's window; a socket that throws is forgotten, not fatal. */
  #sendFrame(ws: WebSocket, state: SocketState, frame: string, bytes: number, lastSeq: number): boolean {
    try {
      ws.send(frame);
    } catch (error) {
      this.#forget(ws, "send_failed", error);
      return false;
    }
    state.sent(bytes, lastSeq);
    return true;
  }

  /** Adds `sockets` sends of one frame of `bytes` carrying `events` messages to the counters. */
  #countSent(sockets: number, bytes: number, events: number): void {
    const counters = this.#counters.values;
    counters.framesSent += sockets;
    counters.bytesSent += sockets * bytes;
    counters.deliveries += sockets * events;
  }

  /** Sends a small control event; these are not counted against the window. */
  #sendControl(ws: WebSocket, event: object): void {
    try {
      ws.send(JSON.stringify(event));
    } catch (error) {
      this.#forget(ws, "send_failed", error);
    }
  }

  #kick(ws: WebSocket, state: SocketState): void {
    this.#counters.values.kicks += 1;
    logEvent("kick", {
      room: this.#name,
      socket: state.attachment.id,
      reason: "slow_consumer",
      inFlight: state.inFlight,
      dropped: state.dropped,
    });
    this.#close(ws, CloseCode.SLOW_CONSUMER, "slow consumer: resume with since");
  }

  // -------------------------------------------------------------------------
  // Client frames
  // -------------------------------------------------------------------------

  override async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    // A socket the room no longer tracks was closed (or forgotten) by the room: frames the
    // peer sent before it saw the close were answered by the close, and must not be acted on.
    const state = this.#sockets.get(ws);
    if (!state) return;
    try {
      const now = Date.now();
      state.lastActivity = now;
      if (state.attachment.expiresAt !== null && now >= state.attachment.expiresAt) {
        this.#counters.refused("token_expired");
        this.#close(ws, CloseCode.UNAUTHORIZED, "token expired");
        return;
      }
      if (!state.takeFrameToken(now, this.#rate)) {
        logEvent("kick", { room: this.#name, socket: state.attachment.id, reason: "rate_limited" });
        this.#counters.refused("rate_limited");
        this.#close(ws, CloseCode.RATE_LIMITED, `over ${this.#rate.perSecond} frames per second`);
        return;
      }
      if (typeof message !== "string") {
        this.#counters.refused("bad_frame");
        this.#close(ws, CloseCode.BAD_FRAME, "binary frames are not supported");
        return;
      }
      if (message.length * 3 > this.#limits.MAX_FRAME_BYTES && utf8Length(message) > this.#limits.MAX_FRAME_BYTES) {
        this.#counters.refused("too_big");
        this.#close(ws, CloseCode.MESSAGE_TOO_BIG, `frame over ${this.#limits.MAX_FRAME_BYTES} bytes`);
        return;
      }
      if (message === PING) {
        this.#sendControlText(ws, PONG);
        return;
      }
      const parsed = parseClientFrame(message);
      if (!parsed.ok) {
        this.#counters.refused("bad_frame");
        this.#close(ws, CloseCode.BAD_FRAME, parsed.error);
        return;
      }
      const frame = parsed.value;
      switch (frame.type) {
        case "ack": {
          state.ack(frame.seq);
          // The client is reading again: tell it what it missed meanwhile.
          const dropped = state.takeDropped();
          if (dropped) this.#sendControl(ws, { type: "dropped", ...dropped } satisfies DroppedEvent);
          return;
        }
        case "replay":
          this.#replay(ws, state, frame.from, frame.to ?? this.#flushedSeq);
          return;
        case "publish": {
          if (!state.attachment.canPublish) {
            this.#sendControl(ws, { type: "error", code: "forbidden", message: "this socket may not publish", id: frame.id });
            return;
          }
          const dataJson = JSON.stringify(frame.data);
          const result = await this.publish(this.#name ?? "", dataJson);
          this.#sendControl(ws, { type: "published", id: frame.id, seq: result.seq });
          return;
        }
      }
    } catch (error) {
      logEvent("error", { room: this.#name, socket: state.attachment.id, where: "message", error: String(error) });
      this.#close(ws, CloseCode.INTERNAL_ERROR, "internal error");
    }
  }

  override async webSocketClose(ws: WebSocket, code: number, reason: string): Promise<void> {
    this.#untrack(ws);
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
    const state = this.#sockets.get(ws);
    this.#untrack(ws);
    logEvent("socket_error", { room: this.#name, socket: state?.attachment.id ?? null, error: String(error) });
  }

  // -------------------------------------------------------------------------
  // Reaping sockets whose peer vanished
  // -------------------------------------------------------------------------

  /**
   * The sweep runs from an alarm (which wakes the room briefly and does not
   * keep it awake) and opportunistically during fan-outs. A socket is idle
   * when neither the runtime's last heartbeat answer nor any client frame is
   * newer than the idle timeout.
   */
  override async alarm(): Promise<void> {
    this.#alarmArmed = false;
    this.#sweep(Date.now());
    if (this.#name && this.#sockets.size > 0) this.#registration.heartbeat(this.#name, this.#sockets.size);
    await this.#ensureSweepAlarm();
  }

  #sweep(now: number): void {
    this.#lastSweep = now;
    const timeoutMs = this.#limits.IDLE_TIMEOUT_SECONDS * 1000 || Number.POSITIVE_INFINITY;
    for (const [ws, state] of this.#sockets) {
      const expiresAt = state.attachment.expiresAt;
      if (expiresAt !== null && now >= expiresAt) {
        logEvent("kick", { room: this.#name, socket: state.attachment.id, reason: "token_expired" });
        this.#counters.refused("token_expired");
        this.#close(ws, CloseCode.UNAUTHORIZED, "token expired");
        continue;
      }
      const heartbeat = this.ctx.getWebSocketAutoResponseTimestamp(ws)?.getTime() ?? 0;
      const last = Math.max(heartbeat, state.lastActivity, state.attachment.connectedAt);
      if (now - last > timeoutMs) {
        logEvent("kick", { room: this.#name, socket: state.attachment.id, reason: "idle_timeout" });
        this.#counters.refused("idle_timeout");
        this.#close(ws, CloseCode.IDLE_TIMEOUT, "no heartbeat");
      }
    }
  }

  async #ensureSweepAlarm(): Promise<void> {
    if (this.#alarmArmed || this.#sockets.size === 0 || this.#limits.IDLE_TIMEOUT_SECONDS === 0) return;
    if ((await this.ctx.storage.getAlarm()) === null) {
      await this.ctx.storage.setAlarm(Date.now() + this.#limits.IDLE_TIMEOUT_SECONDS * 1000);
    }
    this.#alarmArmed = true;
  }

  // -------------------------------------------------------------------------
  // Operations
  // -------------------------------------------------------------------------

  /** Closes every socket with `code` (1012 by default) so clients reconnect and resume. */
  async shutdown(code: number = CloseCode.SERVICE_RESTART, reason = "service restart"): Promise<number> {
    this.#counters.persistNow();
    let closed = 0;
    for (const ws of this.ctx.getWebSockets()) {
      this.#close(ws, code, reason);
      closed += 1;
    }
    return closed;
  }

  async stats(): Promise<RoomStats> {
    let inFlight = 0;
    let inFlightMax = 0;
    for (const state of this.#sockets.values()) {
      inFlight += state.inFlight;
      inFlightMax = Math.max(inFlightMax, state.inFlight);
    }
    return {
      room: this.#name,
      epoch: this.#history.epoch,
      connections: this.#sockets.size,
      seq: this.#history.seq,
      historyOldest: this.#history.oldest(),
      ...this.#counters.values,
      windowBytesInFlight: inFlight,
      windowBytesMax: inFlightMax,
      windowCap: this.#limits.WINDOW_BYTES,
      instanceStartedAt: this.#instanceStartedAt,
    };
  }

  // -------------------------------------------------------------------------
  // Internals
  // -------------------------------------------------------------------------

  #learnName(name: string | null): void {
    if (!name || this.#name === name) return;
    this.#name = name;
    this.#history.setMeta("name", name);
  }

  /** Every socket enters the room here, so the registry hears of the first one. */
  #track(ws: WebSocket, state: SocketState): void {
    this.#sockets.set(ws, state);
    if (this.#sockets.size === 1 && this.#name) this.#registration.occupancyChanged(this.#name, 1);
  }

  /** Every socket leaves the room here, so the registry hears of the last one. */
  #untrack(ws: WebSocket): void {
    if (!this.#sockets.delete(ws)) return;
    if (this.#sockets.size === 0 && this.#name) this.#registration.occupancyChanged(this.#name, 0);
  }

  #sendControlText(ws: WebSocket, text: string): void {
    try {
      ws.send(text);
    } catch (error) {
      this.#forget(ws, "send_failed", error);
    }
  }

  #close(ws: WebSocket, code: number, reason: string): void {
    this.#untrack(ws);
    try {
      ws.close(code, reason.slice(0, 120));
    } catch {
      // Already closing or closed.
    }
  }

  #forget(ws: WebSocket, why: string, error: unknown): void {
    const state = this.#sockets.get(ws);
    this.#untrack(ws);
    logEvent("socket_dropped", { room: this.#name, socket: state?.attachment.id ?? null, why, error: String(error) });
    try {
      ws.close(CloseCode.INTERNAL_ERROR, why);
    } catch {
      // The socket is already gone.
    }
  }
}

function parseSeqParam(value: string | null): number | null {
  if (value === null || !/^\d{1,15}$/.test(value)) return null;
  return Number(value);
}
