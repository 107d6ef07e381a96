import { WebSocket } from "ws";
import {
  PING,
  PONG,
  parseServerFrame,
  roomSocketPath,
  shouldReconnect,
  type AckFrame,
  type ServerMessage,
} from "../../../protocol";
import { Histogram } from "../stats/histogram";
import { ClientLedger } from "../stats/ledger";
import { classifyConnectError, refusalCode } from "../stats/failures";
import { fullJitterDelay, type CloseRecord, type WorkerConfig } from "./messages";
import type { ConnectOutcome, SimulatedClient } from "./simulated";

/** Counters and histograms shared by every client of one process. */
export class ClientStats {
  readonly latency: { fast: Histogram; slow: Histogram };
  readonly fromRequest: { fast: Histogram; slow: Histogram };
  readonly handshakeMs = new Histogram(60_000);
  readonly welcomeMs = new Histogram(60_000);
  readonly downtimeMs = new Histogram(600_000);
  handshakes = 0;
  failures = 0;
  readonly failuresByCause: Record<string, number> = {};
  readonly reconnectFailures: Record<string, number> = {};
  reconnectAttempts = 0;
  welcomes = 0;
  events = 0;
  frames = 0;
  bytes = 0;
  closes = 0;
  readonly closesByCode: Record<string, number> = {};
  readonly closeRecords: CloseRecord[] = [];
  lastBackAt = 0;
  /**
   * Per message ("room\nseq"): the latency of its latest in-time first copy among
   * the fast clients of this process. Merged over processes (the max), it is the
   * time a publish took to reach every socket, which percentiles over
   * deliveries do not show.
   */
  readonly lastArrivalMs = new Map<string, number>();
  pongs = 0;
  parseErrors = 0;
  errorEvents = 0;
  /** Multiplexed connections: `subscribed` events, refused subscribes by error code, and the time a connection's rooms took. */
  subscribed = 0;
  readonly subscribeRefusals: Record<string, number> = {};
  readonly subscribeMs = new Histogram(60_000);

  constructor(ceilingMs: number) {
    this.latency = { fast: new Histogram(ceilingMs), slow: new Histogram(ceilingMs) };
    this.fromRequest = { fast: new Histogram(ceilingMs), slow: new Histogram(ceilingMs) };
  }

  countFailure(cause: string, reconnecting: boolean): void {
    this.failures++;
    const into = reconnecting ? this.reconnectFailures : this.failuresByCause;
    into[cause] = (into[cause] ?? 0) + 1;
  }
}


export const MAX_CLOSE_RECORDS = 20_000;

/**
 * One simulated subscriber: a socket to one room, delivery bookkeeping that
 * survives reconnects, heartbeats and acks as a well-behaved client sends them.
 */
export class LoadClient implements SimulatedClient {
  private ws: WebSocket | undefined;
  private connecting = false;
  private window = 0;
  private unackedBytes = 0;
  /** The last message received and not yet acknowledged. */
  private toAck: ServerMessage | null = null;
  private lastSentAt = 0;
  private stalled = false;
  private stopped = false;
  private everWelcomed = false;
  private permanentlyClosed = false;
  private attempt = 0;
  private droppedAt: number | undefined;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private closeRecorded = false;
  readonly ledger: ClientLedger;

  constructor(
    readonly index: number,
    readonly room: string,
    readonly group: "fast" | "slow",
    private readonly localAddress: string | undefined,
    private readonly config: WorkerConfig,
    private readonly stats: ClientStats,
  ) {
    this.ledger = new ClientLedger(config.deadlineMs, config.expectedMessages);
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

  /** Whether this client should be caught up with the room by the end of a run. */
  get expectedToKeepUp(): boolean {
    return this.everWelcomed && !this.stalled && !this.permanentlyClosed;
  }

  *subscriptions(): Iterable<readonly [string, ClientLedger]> {
    yield [this.room, this.ledger];
  }

  /** Opens the socket; resolves once the welcome arrived or the attempt failed. */
  connect(): Promise<ConnectOutcome> {
    return new Promise((resolve) => {
      const resume = this.ledger.resumePoint();
      const query = new URLSearchParams(this.config.wsParams);
      if (resume) {
        query.set("since", String(resume.since));
        query.set("epoch", resume.epoch);
      }
      const search = query.toString();
      const path = roomSocketPath(this.room) + (search ? `?${search}` : "");
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
        ws = new WebSocket(this.config.wsOrigin + path, {
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
        // The refusal's body names it (over_capacity, room_full, ...): a limit is not a failure to answer.
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          if (body.length < 1024) body += chunk;
        });
        const refused = (): void => {
          finish({ ok: false, cause: classifyConnectError(undefined, res.statusCode, refusalCode(body)) });
          ws.terminate();
        };
        res.once("end", refused);
        res.once("error", refused);
        res.once("close", refused);
      });
      ws.on("upgrade", () => {
        this.stats.handshakes++;
        this.stats.handshakeMs.add(performance.now() - started);
      });
      ws.on("message", (data: Buffer, isBinary: boolean) => {
        if (isBinary) return;
        const welcomed = this.onFrame(data);
        if (welcomed) welcomedHere = true;
        if (welcomed && !settled) {
          this.stats.welcomeMs.add(performance.now() - started);
          this.lastSentAt = Date.now();
          this.attempt = 0;
          finish({ ok: true });
        }
      });
      ws.on("error", (error: Error) => {
        if (!settled) finish({ ok: false, cause: classifyConnectError(error) });
      });
      ws.on("close", (code: number) => {
        if (this.ws === ws) this.ws = undefined;
        if (!settled) {
          finish({ ok: false, cause: code === 1006 ? "closed during handshake" : `closed ${code} during handshake` });
          return;
        }
        // Only a socket that was welcomed had a session to lose; failed attempts were counted above.
        if (welcomedHere) this.onClose(code);
      });
    });
  }

  /** Handles one text frame; returns true when it carried the welcome. */
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
    for (const event of parsed.value) {
      switch (event.type) {
        case "message": {
          s.events++;
          // An ack names the last message of a frame, with its tag (proof it was read).
          this.toAck = event;
          const receipt = this.ledger.record(event.seq, event.ts, now, s.latency[this.group]);
          if (receipt === "in-time") {
            if (this.group === "fast") {
              const key = `${this.room}\n${event.seq}`;
              const latency = now - event.ts;
              if ((s.lastArrivalMs.get(key) ?? -Infinity) < latency) s.lastArrivalMs.set(key, latency);
            }
            const sentAt = publisherSendTime(event.data);
            if (sentAt !== undefined) s.fromRequest[this.group].add(now - sentAt);
          }
          break;
        }
        case "welcome":
          this.ledger.welcome(event.epoch, event.seq);
          this.window = event.window;
          this.unackedBytes = 0;
          this.toAck = null;
          this.everWelcomed = true;
          s.welcomes++;
          welcomed = true;
          if (this.droppedAt !== undefined) {
            s.downtimeMs.add(now - this.droppedAt);
            s.lastBackAt = Math.max(s.lastBackAt, now);
            this.droppedAt = undefined;
          }
          break;
        case "lost":
          this.ledger.lostEvent(event.from, event.to);
          break;
        case "error":
          s.errorEvents++;
          break;
        default:
          break;
      }
    }
    const threshold = this.config.ackBytes > 0 ? this.config.ackBytes : this.window / 4;
    if (threshold > 0 && this.unackedBytes >= threshold) this.ack();
    return welcomed;
  }

  private ack(): void {
    const last = this.toAck;
    if (last === null || !this.isOpen) return;
    const frame: AckFrame = { type: "ack", seq: last.seq, tag: last.tag };
    this.ws?.send(JSON.stringify(frame));
    this.toAck = null;
    this.unackedBytes = 0;
    this.lastSentAt = Date.now();
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
    if (this.config.reconnect && shouldReconnect(code)) {
      this.scheduleReconnect();
    } else {
      this.permanentlyClosed = true;
    }
  }

  private afterFailedAttempt(reconnecting: boolean): void {
    if (reconnecting && !this.stopped && this.config.reconnect) this.scheduleReconnect();
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
        if (!outcome.ok) this.afterFailedAttempt(true);
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

  /** Stops reading the socket: the kernel buffers fill and the server sees a stalled reader. */
  stall(): void {
    this.stalled = true;
    this.ws?.pause();
  }

  resume(): void {
    this.stalled = false;
    this.ws?.resume();
  }

  /** Marks the moment the client lost its connection for downtime measurement. */
  markDropped(at: number): void {
    if (this.everWelcomed && !this.permanentlyClosed) this.droppedAt = at;
  }

  /** Network drop: abort the TCP connection without a close handshake. */
  drop(at: number): void {
    this.markDropped(at);
    this.ws?.terminate();
  }

  get waitingToComeBack(): boolean {
    return this.droppedAt !== undefined;
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

/** The publisher puts its send time in the payload as `t`; absent for foreign payloads. */
export function publisherSendTime(data: unknown): number | undefined {
  if (typeof data === "object" && data !== null && "t" in data) {
    const t = (data as { t: unknown }).t;
    if (typeof t === "number") return t;
  }
  return undefined;
}
