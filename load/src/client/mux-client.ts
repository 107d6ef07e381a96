import { WebSocket } from "ws";
import {
  MULTIPLEX_PATH,
  PING,
  PONG,
  parseServerFrame,
  shouldReconnect,
  type ErrorCode,
  type MultiplexEvent,
  type RoomAckFrame,
  type SubscribeFrame,
} from "../../../protocol";
import { ClientLedger } from "../stats/ledger";
import { classifyConnectError } from "../stats/failures";
import { MAX_CLOSE_RECORDS, publisherSendTime, type ClientStats } from "./load-client";
import { fullJitterDelay, type WorkerConfig } from "./messages";
import type { ConnectOutcome, SimulatedClient } from "./simulated";

/** Refusals a subscribe is sent again after: the budget refills, or the root could not be reached this once. */
const RETRIED: ReadonlySet<ErrorCode> = new Set(["rate_limited", "internal"]);
/** Attempts of one room's subscribe on one socket before it counts as refused for good. */
const MAX_SUBSCRIBE_ATTEMPTS = 5;

/** What one subscribe storm of one connection came to. */
export interface SubscribeOutcome {
  asked: number;
  subscribed: number;
  /** The socket closed before every room had an answer. */
  closed: boolean;
}

/**
 * One simulated multiplexed connection (`GET /ws`): one socket that follows
 * `rooms`, with a ledger per subscription, so every delivery is matched by
 * (room, seq) and a loss, duplicate or reordering in one room is never
 * covered by another room's messages. It behaves as a client should: a text
 * heartbeat, an ack when a quarter of the connection's window is
 * unacknowledged (naming the newest message read, with its room: one window
 * covers the connection, and that ack releases every frame sent before it, of
 * every room), and after a reconnect, every room subscribed again with
 * `since` and `epoch` from its own ledger.
 */
export class MuxLoadClient implements SimulatedClient {
  private ws: WebSocket | undefined;
  private connecting = false;
  private window = 0;
  private unackedBytes = 0;
  /** The newest message read and not yet acknowledged. */
  private toAck: RoomAckFrame | null = null;
  private lastSentAt = 0;
  private stalled = false;
  private stopped = false;
  private everWelcomed = false;
  /** Told to follow its rooms (at once, or by a subscribe storm): from then on a new socket subscribes them all. */
  private following: boolean;
  private permanentlyClosed = false;
  private attempt = 0;
  private droppedAt: number | undefined;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private closeRecorded = false;
  private readonly ledgers = new Map<string, ClientLedger>();
  /** Rooms subscribed on the current socket. */
  private readonly live = new Set<string>();
  /** Rooms asked for on the current socket and not answered yet, with their attempts. */
  private readonly pending = new Map<string, number>();
  private readonly retryTimers = new Set<ReturnType<typeof setTimeout>>();
  private settleSubscribing: ((outcome: SubscribeOutcome) => void) | undefined;
  private subscribingSince = 0;

  constructor(
    readonly index: number,
    readonly rooms: readonly string[],
    readonly group: "fast" | "slow",
    private readonly localAddress: string | undefined,
    private readonly config: WorkerConfig,
    private readonly stats: ClientStats,
  ) {
    for (const room of rooms) this.ledgers.set(room, new ClientLedger(config.deadlineMs, config.expectedMessages));
    this.following = config.subscribeOnOpen;
  }

  get isOpen(): boolean {
    return this.ws !== undefined && this.ws.readyState === WebSocket.OPEN;
  }

  get isConnecting(): boolean {
    return this.connecting;
  }

  get isReconnecting(): boolean {
    return this.reconnectTimer !== undefined || (this.connecting && this.everWelcomed);
  }

  get expectedToKeepUp(): boolean {
    return this.everWelcomed && this.following && !this.stalled && !this.permanentlyClosed;
  }

  get waitingToComeBack(): boolean {
    return this.droppedAt !== undefined;
  }

  /** Rooms subscribed on the current socket. */
  get liveSubscriptions(): number {
    return this.live.size;
  }

  *subscriptions(): Iterable<readonly [string, ClientLedger]> {
    yield* this.ledgers;
  }

  /**
   * Opens the socket; resolves once the connection's welcome arrived and, when
   * it follows its rooms already (or comes back after a drop), once every room
   * has its answer.
   */
  connect(): Promise<ConnectOutcome> {
    return new Promise((resolve) => {
      const search = new URLSearchParams(this.config.wsParams).toString();
      const started = performance.now();
      const reconnecting = this.everWelcomed;
      let settled = false;
      let welcomedHere = false;
      const finish = (outcome: ConnectOutcome): void => {
        if (settled) return;
        settled = true;
        this.connecting = false;
        if (!outcome.ok) this.stats.countFailure(outcome.cause, reconnecting);
        resolve(outcome);
      };

      this.connecting = true;
      let ws: WebSocket;
      try {
        ws = new WebSocket(this.config.wsOrigin + MULTIPLEX_PATH + (search ? `?${search}` : ""), {
          perMessageDeflate: false,
          handshakeTimeout: this.config.handshakeTimeoutMs,
          skipUTF8Validation: true,
          followRedirects: false,
          ...(this.localAddress ? { localAddress: this.localAddress } : {}),
        });
      } catch (error) {
        finish({ ok: false, cause: classifyConnectError(error) });
        return;
      }
      this.ws = ws;

      ws.on("unexpected-response", (_req, res) => {
        res.resume();
        finish({ ok: false, cause: classifyConnectError(undefined, res.statusCode) });
        ws.terminate();
      });
      ws.on("upgrade", () => {
        this.stats.handshakes++;
        this.stats.handshakeMs.add(performance.now() - started);
      });
      ws.on("message", (data: Buffer, isBinary: boolean) => {
        if (isBinary || ws !== this.ws) return;
        const welcomed = this.onFrame(data);
        if (!welcomed || settled) return;
        welcomedHere = true;
        this.stats.welcomeMs.add(performance.now() - started);
        this.lastSentAt = Date.now();
        this.attempt = 0;
        if (!this.following) return finish({ ok: true });
        // A refused subscribe leaves the connection open with its other rooms: it is counted apart, not as a failed connection.
        void this.subscribeAll().then((outcome) => finish(outcome.closed ? { ok: false, cause: "closed while subscribing" } : { ok: true }));
      });
      ws.on("error", (error: Error) => {
        if (!settled) finish({ ok: false, cause: classifyConnectError(error) });
      });
      ws.on("close", (code: number) => {
        if (this.ws === ws) {
          this.ws = undefined;
          this.socketGone();
        }
        if (!welcomedHere) {
          finish({ ok: false, cause: code === 1006 ? "closed during handshake" : `closed ${code} during handshake` });
          return;
        }
        finish({ ok: false, cause: "closed while subscribing" });
        this.onClose(code);
      });
    });
  }

  /**
   * Sends a subscribe for every room not yet followed on this socket, all at
   * once, each resuming from its ledger (`since` and `epoch`) when it had
   * one; resolves when every room is subscribed or refused for good.
   */
  subscribeAll(): Promise<SubscribeOutcome> {
    this.following = true;
    if (!this.isOpen) return Promise.resolve({ asked: this.rooms.length, subscribed: this.live.size, closed: true });
    const wanted = this.rooms.filter((room) => !this.live.has(room) && !this.pending.has(room));
    this.subscribingSince = performance.now();
    const done = new Promise<SubscribeOutcome>((resolve) => (this.settleSubscribing = resolve));
    for (const room of wanted) this.sendSubscribe(room, 1);
    this.checkSubscribed();
    return done;
  }

  private sendSubscribe(room: string, attempt: number): void {
    const resume = (this.ledgers.get(room) as ClientLedger).resumePoint();
    const frame: SubscribeFrame = { type: "subscribe", room, ...(resume ? { since: resume.since, epoch: resume.epoch } : {}) };
    this.pending.set(room, attempt);
    this.ws?.send(JSON.stringify(frame));
    this.lastSentAt = Date.now();
  }

  /** Every room has its answer: the subscribe storm of this socket is over. */
  private checkSubscribed(): void {
    if (this.pending.size > 0 || !this.settleSubscribing) return;
    const settle = this.settleSubscribing;
    this.settleSubscribing = undefined;
    const now = Date.now();
    if (this.live.size === this.rooms.length) {
      this.stats.subscribeMs.add(performance.now() - this.subscribingSince);
      if (this.droppedAt !== undefined) {
        this.stats.downtimeMs.add(now - this.droppedAt);
        this.stats.lastBackAt = Math.max(this.stats.lastBackAt, now);
        this.droppedAt = undefined;
      }
    }
    settle({ asked: this.rooms.length, subscribed: this.live.size, closed: false });
  }

  /** Handles one text frame; returns true when it carried the connection's welcome. */
  private onFrame(data: Buffer): boolean {
    const now = Date.now();
    const s = this.stats;
    s.frames++;
    s.bytes += data.length;
    this.unackedBytes += data.length;
    const text = data.toString();
    if (text === PONG) {
      s.pongs++;
      return false;
    }
    const parsed = parseServerFrame(text);
    if (!parsed.ok) {
      s.parseErrors++;
      return false;
    }
    let welcomed = false;
    for (const event of parsed.value as MultiplexEvent[]) {
      switch (event.type) {
        case "message": {
          s.events++;
          const ledger = this.ledgers.get(event.room);
          // A room this connection never asked for is a server fault, not a delivery.
          if (!ledger) {
            s.parseErrors++;
            break;
          }
          this.toAck = { type: "ack", room: event.room, seq: event.seq, tag: event.tag };
          const receipt = ledger.record(event.seq, event.ts, now, s.latency[this.group]);
          if (receipt === "in-time") {
            if (this.group === "fast") {
              const key = `${event.room}\n${event.seq}`;
              const latency = now - event.ts;
              if ((s.lastArrivalMs.get(key) ?? -Infinity) < latency) s.lastArrivalMs.set(key, latency);
            }
            const sentAt = publisherSendTime(event.data);
            if (sentAt !== undefined) s.fromRequest[this.group].add(now - sentAt);
          }
          break;
        }
        case "welcome":
          this.window = event.window;
          this.unackedBytes = 0;
          this.toAck = null;
          this.everWelcomed = true;
          s.welcomes++;
          welcomed = true;
          break;
        case "subscribed": {
          const ledger = this.ledgers.get(event.room);
          if (!ledger || !this.pending.has(event.room)) break;
          ledger.welcome(event.epoch, event.seq);
          this.pending.delete(event.room);
          this.live.add(event.room);
          s.subscribed++;
          this.checkSubscribed();
          break;
        }
        case "lost":
          this.ledgers.get(event.room)?.lostEvent(event.from, event.to);
          break;
        case "unsubscribed":
          this.live.delete(event.room);
          s.errorEvents++;
          break;
        case "error":
          s.errorEvents++;
          if (event.room !== undefined) this.refused(event.room, event.code);
          break;
        default:
          break;
      }
    }
    const threshold = this.config.ackBytes > 0 ? this.config.ackBytes : this.window / 4;
    if (threshold > 0 && this.unackedBytes >= threshold) this.ack();
    return welcomed;
  }

  /** A subscribe was refused: counted by code, and sent again later when the refusal is one that passes. */
  private refused(room: string, code: ErrorCode): void {
    const attempt = this.pending.get(room);
    if (attempt === undefined) return;
    this.stats.subscribeRefusals[code] = (this.stats.subscribeRefusals[code] ?? 0) + 1;
    if (RETRIED.has(code) && attempt < MAX_SUBSCRIBE_ATTEMPTS) {
      const ws = this.ws;
      const timer = setTimeout(() => {
        this.retryTimers.delete(timer);
        if (this.ws === ws && this.isOpen && this.pending.get(room) === attempt) this.sendSubscribe(room, attempt + 1);
      }, 250 + Math.floor(Math.random() * 1000 * attempt));
      this.retryTimers.add(timer);
      return;
    }
    this.pending.delete(room);
    this.checkSubscribed();
  }

  private ack(): void {
    const last = this.toAck;
    if (last === null || !this.isOpen) return;
    this.ws?.send(JSON.stringify(last));
    this.toAck = null;
    this.unackedBytes = 0;
    this.lastSentAt = Date.now();
  }

  /** The socket is gone: nothing is subscribed on it any more, and a subscribe storm on it ends. */
  private socketGone(): void {
    this.live.clear();
    this.pending.clear();
    for (const timer of this.retryTimers) clearTimeout(timer);
    this.retryTimers.clear();
    const settle = this.settleSubscribing;
    this.settleSubscribing = undefined;
    settle?.({ asked: this.rooms.length, subscribed: 0, closed: true });
  }

  private onClose(code: number): void {
    const s = this.stats;
    s.closes++;
    s.closesByCode[code] = (s.closesByCode[code] ?? 0) + 1;
    if (!this.closeRecorded && s.closeRecords.length < MAX_CLOSE_RECORDS) {
      this.closeRecorded = true;
      s.closeRecords.push({ at: Date.now(), code, group: this.group });
    }
    if (this.stopped) return;
    if (this.config.reconnect && shouldReconnect(code)) this.scheduleReconnect();
    else this.permanentlyClosed = true;
  }

  private scheduleReconnect(): void {
    const policy = this.config.reconnect;
    if (!policy || this.stopped || this.reconnectTimer) return;
    const delay = fullJitterDelay(this.attempt++, policy.baseMs, policy.maxMs);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      if (this.stopped) return;
      this.stats.reconnectAttempts++;
      void this.connect().then((outcome) => {
        // A socket that closed was already given its next attempt by its close; one refused before that needs one.
        if (!outcome.ok && !this.isOpen && !this.connecting && !this.stopped) this.scheduleReconnect();
      });
    }, delay);
  }

  /** Heartbeat: a text ping when nothing was sent for the interval (runs for stalled clients too). */
  tick(now: number): void {
    if (!this.isOpen) return;
    if (now - this.lastSentAt >= this.config.pingIntervalMs) {
      this.ws?.send(PING);
      this.lastSentAt = now;
    }
  }

  stall(): void {
    this.stalled = true;
    this.ws?.pause();
  }

  resume(): void {
    this.stalled = false;
    this.ws?.resume();
  }

  markDropped(at: number): void {
    if (this.everWelcomed && this.following && !this.permanentlyClosed) this.droppedAt = at;
  }

  /** Network drop: abort the TCP connection without a close handshake. */
  drop(at: number): void {
    this.markDropped(at);
    this.ws?.terminate();
  }

  close(): void {
    this.stopped = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    const ws = this.ws;
    if (!ws) return;
    if (ws.readyState === WebSocket.OPEN) ws.close(1000, "load run finished");
    else ws.terminate();
  }

  terminate(): void {
    this.stopped = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.ws?.terminate();
  }
}
