import { WebSocket } from "ws";
import { fullJitter } from "../../../common/jitter";
import { PING, PONG, parseServerFrame, shouldReconnect, type ServerEvent } from "../../../protocol";
import { classifyConnectError, refusalCode } from "../stats/failures";
import type { ClientLedger } from "../stats/ledger";
import type { ClientStats } from "./client-stats";
import type { WorkerConfig } from "./messages";
import type { ConnectOutcome, SimulatedClient } from "./simulated";

export const MAX_CLOSE_RECORDS = 20_000;

/**
 * What every simulated client does with its socket, whatever the protocol on
 * it: open it (from its source address, counting handshakes and failures by
 * cause), count what it reads, send a heartbeat when it has sent nothing for
 * the interval, acknowledge once a quarter of the window (or --ack-bytes) is
 * unacknowledged, stall and resume reading, be dropped, reconnect with full
 * jitter after a close that allows it, and measure how long it was away.
 *
 * A protocol is a subclass: the path it opens, what each event means (which
 * messages go into which room's ledger, what the ack names), and what it does
 * once welcomed before it counts as connected; one that is not the service's
 * own reads its frames (`readFrame`) and sends its heartbeat (`pingFrame`)
 * its way, and acks nothing if it never sets `toAck`.
 */
export abstract class SocketClient implements SimulatedClient {
  protected ws: WebSocket | undefined;
  private connecting = false;
  /** The window the server announced: acks are due per quarter of it. */
  protected window = 0;
  private unackedBytes = 0;
  /** The ack naming the newest message read, not sent yet; null when nothing is owed. */
  protected toAck: object | null = null;
  protected lastSentAt = 0;
  private stalled = false;
  private stopped = false;
  protected everWelcomed = false;
  private permanentlyClosed = false;
  private attempt = 0;
  private droppedAt: number | undefined;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private closeRecorded = false;

  constructor(
    readonly index: number,
    readonly group: "fast" | "slow",
    private readonly localAddress: string | undefined,
    protected readonly config: WorkerConfig,
    protected readonly stats: ClientStats,
  ) {}

  /** Path and query of the next connection (with its resume point, where the protocol resumes in the URL). */
  protected abstract socketPath(): string;

  /** Handles one event of a frame; returns true when it was the connection's welcome. */
  protected abstract onEvent(event: ServerEvent, now: number): boolean;

  abstract subscriptions(): Iterable<readonly [string, ClientLedger]>;

  /** What it must do once welcomed before it counts as connected (a multiplexed connection subscribes its rooms). */
  protected afterWelcome(): Promise<ConnectOutcome> {
    return Promise.resolve({ ok: true });
  }

  /** The socket is gone: forget what lived on it. */
  protected socketGone(): void {}

  /** Whether it follows its rooms yet (a multiplexed connection may wait for a subscribe storm before it does). */
  protected get following(): boolean {
    return true;
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

  /** Whether it should be caught up with its rooms by the end of a run. */
  get expectedToKeepUp(): boolean {
    return this.everWelcomed && this.following && !this.stalled && !this.permanentlyClosed;
  }

  get waitingToComeBack(): boolean {
    return this.droppedAt !== undefined;
  }

  /** Opens the socket; resolves once it is welcomed and has done what `afterWelcome` asks, or the attempt failed. */
  connect(): Promise<ConnectOutcome> {
    return new Promise((resolve) => {
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
        ws = new WebSocket(this.config.wsOrigin + this.socketPath(), {
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
        if (isBinary || ws !== this.ws) return;
        if (!this.onFrame(data) || settled) return;
        welcomedHere = true;
        this.stats.welcomeMs.add(performance.now() - started);
        this.lastSentAt = Date.now();
        this.attempt = 0;
        void this.afterWelcome().then(finish);
      });
      ws.on("error", (error: Error) => finish({ ok: false, cause: classifyConnectError(error) }));
      ws.on("close", (code: number) => {
        if (this.ws === ws) {
          this.ws = undefined;
          this.socketGone();
        }
        if (!welcomedHere) return finish({ ok: false, cause: code === 1006 ? "closed during handshake" : `closed ${code} during handshake` });
        // Only a socket that was welcomed had a session to lose; failed attempts were counted above.
        finish({ ok: false, cause: "closed while subscribing" });
        this.onClose(code);
      });
    });
  }

  /** Counts one text frame and reads it; acks when enough is unacknowledged; returns true when it carried the welcome. */
  private onFrame(data: Buffer): boolean {
    this.stats.frames++;
    this.stats.bytes += data.length;
    this.unackedBytes += data.length;
    const welcomed = this.readFrame(data.toString(), Date.now());
    const threshold = this.config.ackBytes > 0 ? this.config.ackBytes : this.window / 4;
    if (this.toAck !== null && threshold > 0 && this.unackedBytes >= threshold) this.ack();
    return welcomed;
  }

  /** One frame of the service's protocol: a pong, or JSON events, each handed to `onEvent`. Another protocol reads its own frames. */
  protected readFrame(text: string, now: number): boolean {
    if (text === PONG) {
      this.stats.pongs++;
      return false;
    }
    const parsed = parseServerFrame(text);
    if (!parsed.ok) {
      this.stats.parseErrors++;
      return false;
    }
    let welcomed = false;
    for (const event of parsed.value) welcomed = this.onEvent(event, now) || welcomed;
    return welcomed;
  }

  /** The heartbeat frame of the protocol. */
  protected pingFrame(): string {
    return PING;
  }

  /** A welcome: the window it announces, nothing owed, and one more welcome counted. */
  protected welcomed(window: number): void {
    this.window = window;
    this.unackedBytes = 0;
    this.toAck = null;
    this.everWelcomed = true;
    this.stats.welcomes++;
  }

  /** One message of `room` read: matched in its ledger by seq, with its latency (and publish-to-every-socket time for the fast group). */
  protected deliver(room: string, ledger: ClientLedger, event: { seq: number; ts: number; data?: unknown }, now: number): void {
    const s = this.stats;
    if (ledger.record(event.seq, event.ts, now, s.latency[this.group]) !== "in-time") return;
    if (this.group === "fast") {
      const key = `${room}\n${event.seq}`;
      const latency = now - event.ts;
      if ((s.lastArrivalMs.get(key) ?? -Infinity) < latency) s.lastArrivalMs.set(key, latency);
    }
    const sentAt = publisherSendTime(event.data);
    if (sentAt !== undefined) s.fromRequest[this.group].add(now - sentAt);
  }

  /** Back after a drop: its downtime, from the drop to now. */
  protected cameBack(now: number): void {
    if (this.droppedAt === undefined) return;
    this.stats.downtimeMs.add(now - this.droppedAt);
    this.stats.lastBackAt = Math.max(this.stats.lastBackAt, now);
    this.droppedAt = undefined;
  }

  /** Sends a frame (counting as activity for the heartbeat). */
  protected send(text: string): void {
    this.ws?.send(text);
    this.lastSentAt = Date.now();
  }

  private ack(): void {
    if (this.toAck === null || !this.isOpen) return;
    this.send(JSON.stringify(this.toAck));
    this.toAck = null;
    this.unackedBytes = 0;
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
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      if (this.stopped) return;
      this.stats.reconnectAttempts++;
      void this.connect().then((outcome) => {
        // A socket that closed was given its next attempt by its close; one refused before that needs one.
        if (!outcome.ok && !this.isOpen && !this.connecting && !this.stopped) this.scheduleReconnect();
      });
    }, fullJitter(this.attempt++, policy));
  }

  /** Heartbeat: a ping when nothing was sent for the interval (stalled clients too). */
  tick(now: number): void {
    if (this.isOpen && now - this.lastSentAt >= this.config.pingIntervalMs) this.send(this.pingFrame());
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

  /** Marks the moment the client lost its connection, for its downtime. */
  markDropped(at: number): void {
    if (this.everWelcomed && this.following && !this.permanentlyClosed) this.droppedAt = at;
  }

  /** Network drop: abort the TCP connection without a close handshake. */
  drop(at: number): void {
    this.markDropped(at);
    this.ws?.terminate();
  }

  close(): void {
    this.stopReconnecting();
    const ws = this.ws;
    if (ws?.readyState === WebSocket.OPEN) ws.close(1000, "load run finished");
    else ws?.terminate();
  }

  terminate(): void {
    this.stopReconnecting();
    this.ws?.terminate();
  }

  private stopReconnecting(): void {
    this.stopped = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
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
