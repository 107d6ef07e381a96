import { CloseCode, type LostEvent } from "../../protocol";
import { logEvent } from "../../common/log";
import type { RoomCounters } from "./counters";
import { cutFrame, type BatchLimits, type Frame } from "./frames";
import type { History } from "./history";

/** Where catch-up reads from: the room's history, or a leaf's ring of recent messages (docs/sharded-rooms.md). */
export type MessageSource = Pick<History, "seq" | "read">;
import type { AckVerdict, SocketState } from "./socket-state";

export interface DeliveryOptions {
  /** WINDOW_BYTES: unacknowledged bytes per socket before it waits for an ack (0 = none). */
  windowBytes: number;
  /** SLOW_GRACE_MS: how long a socket may stay behind without acknowledged progress. */
  graceMs: number;
  batch: BatchLimits;
}

/** How a socket left the room: its close code and reason, and who ended it. */
export interface LeaveCause {
  code: number;
  reason: string;
  /**
   * `client`: the client sent a close; `room`: the room closed it (a kick, the
   * idle sweep, token expiry, shutdown, a failed send, a hook); `network`: the
   * connection failed without a close.
   */
  by: "client" | "room" | "network";
}

export interface DeliveryHooks {
  /** The room went from no sockets to some, or from some to none. */
  occupancyChanged(connections: number): void;
  /** A socket left the room, however it went (called once per socket, never inside the fan-out loop's send). */
  left(ws: WebSocket, state: SocketState, cause: LeaveCause): void;
  /** An ack released frames: the socket has window space again. */
  released(ws: WebSocket, state: SocketState): void;
  /** For logs: the room's name. */
  roomName(): string | null;
}

/**
 * The delivery engine: every socket has a cursor (the seq it has been sent up
 * to), and the room moves each cursor forward by one of two paths.
 *
 * - Live: a socket that is level with the room gets each coalesced frame as
 *   it is flushed, serialized once for everyone. When a frame does not fit in
 *   a socket's window, that socket is marked behind instead of skipping it.
 * - Catch-up: a socket that is behind (it fell out of the live path, or it
 *   resumed with `since`) is sent the next messages from history whenever an
 *   ack frees window space, in frames cut the same way, until it is level
 *   again and rejoins the live path.
 *
 * No message is skipped for a socket that acknowledges, and the room keeps no
 * queue per socket: a socket costs its cursor and its window accounting. A
 * socket that falls out of history gets one `lost` event and continues from
 * the oldest kept message; one that stays behind with no acknowledged
 * progress for SLOW_GRACE_MS is closed with 4008 and resumes.
 */
export class Delivery {
  readonly #sockets = new Map<WebSocket, SocketState>();
  readonly #history: MessageSource;
  readonly #counters: RoomCounters;
  readonly #options: DeliveryOptions;
  readonly #hooks: DeliveryHooks;
  /** Highest seq handed to the live path; new sockets start level with it. */
  #flushedSeq: number;
  #behind = 0;
  #graceTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(history: MessageSource, counters: RoomCounters, options: DeliveryOptions, hooks: DeliveryHooks) {
    this.#history = history;
    this.#counters = counters;
    this.#options = options;
    this.#hooks = hooks;
    this.#flushedSeq = history.seq;
  }

  /** After the room gave its storage back (it had no sockets): seqs start over. */
  reset(): void {
    this.#flushedSeq = this.#history.seq;
  }

  get flushedSeq(): number {
    return this.#flushedSeq;
  }

  get size(): number {
    return this.#sockets.size;
  }

  /** Sockets catching up from history right now. */
  get behind(): number {
    return this.#behind;
  }

  get(ws: WebSocket): SocketState | undefined {
    return this.#sockets.get(ws);
  }

  entries(): IterableIterator<[WebSocket, SocketState]> {
    return this.#sockets.entries();
  }

  /**
   * A socket joins the room with its cursor at `state.sentSeq`: level with
   * the room, or behind (a resume), in which case catch-up starts at once.
   */
  join(ws: WebSocket, state: SocketState, now: number): void {
    this.#sockets.set(ws, state);
    if (this.#sockets.size === 1) this.#hooks.occupancyChanged(1);
    if (state.sentSeq < this.#flushedSeq) {
      this.#fallBehind(state, now);
      this.catchUp(ws, state, now);
    }
  }

  /**
   * The peer closed its socket (the Hibernation API's `webSocketClose`): it
   * leaves, and its close is answered, which the API does not do by itself;
   * without the answer the client waits in CLOSING and reports 1006.
   * Reserved codes cannot be sent back.
   */
  peerClosed(ws: WebSocket, code: number, reason: string): void {
    this.leave(ws, { code, reason, by: code === 1006 ? "network" : "client" });
    const reply = code === 1005 || code === 1006 || code === 1015 ? CloseCode.NORMAL : code;
    if (ws.readyState === WebSocket.CLOSED) return;
    try {
      ws.close(reply, reason);
    } catch {
      // Already closed: nothing to reciprocate.
    }
  }

  /** The socket failed (the Hibernation API's `webSocketError`): it leaves; its state, if it had one, is returned for the log. */
  failed(ws: WebSocket, error: unknown): SocketState | undefined {
    return this.leave(ws, { code: 1006, reason: String(error).slice(0, 120), by: "network" });
  }

  /** Every socket leaves the room here (closed by either side, or failed). */
  leave(ws: WebSocket, cause: LeaveCause): SocketState | undefined {
    const state = this.#sockets.get(ws);
    if (!state) return undefined;
    this.#sockets.delete(ws);
    if (state.behind) this.#behind -= 1;
    this.#hooks.left(ws, state, cause);
    if (this.#sockets.size === 0) this.#hooks.occupancyChanged(0);
    return state;
  }

  /**
   * Offers one flushed frame (stored as history row `row`) to every level
   * socket; returns how many it was sent to. Counted once per frame, not per
   * socket: this loop is the room's hot path.
   */
  fanOut(frame: Frame, row: number, now: number): number {
    const previous = frame.firstSeq - 1;
    const windowBytes = this.#options.windowBytes;
    let sentTo = 0;
    for (const [ws, state] of this.#sockets) {
      // A socket behind is served from history when its acks make room.
      if (state.sentSeq !== previous) continue;
      if (!state.hasRoom(windowBytes)) {
        this.#fallBehind(state, now);
        state.nextRow = row;
        continue;
      }
      if (this.#send(ws, frame.text)) {
        state.sent(frame);
        sentTo += 1;
      }
    }
    this.#flushedSeq = frame.lastSeq;
    this.#countSent(sentTo, frame);
    return sentTo;
  }

  /** Applies a client's ack; a socket behind that got window space back is sent what comes next. */
  ack(ws: WebSocket, state: SocketState, seq: number, tag: number, now: number): AckVerdict {
    const verdict = state.ack(seq, tag);
    if (verdict !== "released") return verdict;
    if (state.behind) {
      state.stalledSince = now;
      this.catchUp(ws, state, now);
    }
    // Catch-up may have closed it (a failed send).
    if (this.#sockets.has(ws)) this.#hooks.released(ws, state);
    return verdict;
  }

  /**
   * Sends a socket that is behind the next messages from history, as far as
   * its window allows (a window plus at most one stored frame). Each row read
   * is sent: catch-up reads only what it sends.
   */
  catchUp(ws: WebSocket, state: SocketState, now: number): void {
    const windowBytes = this.#options.windowBytes;
    while (state.sentSeq < this.#flushedSeq && state.hasRoom(windowBytes)) {
      const budget = windowBytes === 0 ? Number.POSITIVE_INFINITY : windowBytes - state.inFlight;
      const read = this.#history.read(state.sentSeq + 1, budget, this.#options.batch, state.nextRow, now);
      this.#counters.values.historyRowsRead += read.rowsRead;
      if (read.lost) {
        const lost: LostEvent = { type: "lost", reason: "history", from: read.lost.from, to: Math.min(read.lost.to, this.#flushedSeq) };
        if (!this.#send(ws, JSON.stringify(lost))) return;
        this.#counters.values.lostMessages += lost.to - lost.from + 1;
        state.sentSeq = lost.to;
      }
      for (let i = 0; i < read.runs.length; ) {
        const { frame, end } = cutFrame(read.runs, i, this.#options.batch);
        i = end;
        if (frame.lastSeq > this.#flushedSeq) break;
        if (!this.#send(ws, frame.text)) return;
        state.sent(frame);
        this.#countSent(1, frame);
        this.#counters.values.catchUpFrames += 1;
      }
      state.nextRow = read.nextRow;
      if (read.runs.length === 0 && read.lost === null) break;
    }
    if (state.sentSeq >= this.#flushedSeq && state.behind) {
      state.stalledSince = null;
      state.nextRow = 0;
      this.#behind -= 1;
    }
    this.#counters.changed();
  }

  /** Closes a socket the room is done with; its frames are no longer acted on. */
  close(ws: WebSocket, code: number, reason: string): void {
    const text = reason.slice(0, 120);
    this.leave(ws, { code, reason: text, by: "room" });
    try {
      ws.close(code, text);
    } catch {
      // Already closing or closed.
    }
  }

  /** A socket that threw on send or failed: forgotten and closed, never fatal to the room. */
  forget(ws: WebSocket, why: string, error: unknown): void {
    const state = this.leave(ws, { code: CloseCode.INTERNAL_ERROR, reason: why, by: "room" });
    logEvent("socket_dropped", { room: this.#hooks.roomName(), socket: state?.attachment.id ?? null, why, error: String(error) });
    try {
      ws.close(CloseCode.INTERNAL_ERROR, why);
    } catch {
      // The socket is already gone.
    }
  }

  /** Sends a small control frame (welcome, lost, published, error); these are not counted against the window. */
  sendControl(ws: WebSocket, text: string): boolean {
    return this.#send(ws, text);
  }

  /** Sends a presence event when the socket's window has room for it (SocketState.hasPresenceRoom). */
  sendPresence(ws: WebSocket, state: SocketState, text: string, bytes: number, tag: number): boolean {
    if (!state.hasPresenceRoom(this.#options.windowBytes)) return false;
    if (!this.#send(ws, text)) return false;
    state.presenceSent(bytes, tag);
    return true;
  }

  #send(ws: WebSocket, text: string): boolean {
    try {
      ws.send(text);
      return true;
    } catch (error) {
      this.forget(ws, "send_failed", error);
      return false;
    }
  }

  #countSent(sockets: number, frame: Frame): void {
    const counters = this.#counters.values;
    counters.framesSent += sockets;
    counters.bytesSent += sockets * frame.bytes;
    counters.deliveries += sockets * frame.count;
  }

  #fallBehind(state: SocketState, now: number): void {
    if (state.behind) return;
    state.stalledSince = now;
    state.nextRow = 0;
    this.#behind += 1;
    this.#armGraceTimer();
  }

  /**
   * While any socket is behind, a timer checks for sockets that made no
   * progress within the grace period. It also keeps the room from
   * hibernating while a cursor lives only in memory.
   */
  #armGraceTimer(): void {
    if (this.#graceTimer !== null) return;
    const interval = Math.max(50, Math.floor(this.#options.graceMs / 4));
    this.#graceTimer = setTimeout(() => {
      this.#graceTimer = null;
      try {
        this.#closeStalled(Date.now());
      } catch (error) {
        logEvent("error", { room: this.#hooks.roomName(), where: "grace_timer", error: String(error) });
      }
      if (this.#behind > 0) this.#armGraceTimer();
    }, interval);
  }

  #closeStalled(now: number): void {
    for (const [ws, state] of this.#sockets) {
      if (state.stalledSince === null || now - state.stalledSince < this.#options.graceMs) continue;
      this.#counters.values.kicks += 1;
      logEvent("kick", {
        room: this.#hooks.roomName(),
        socket: state.attachment.id,
        reason: "slow_consumer",
        sentSeq: state.sentSeq,
        roomSeq: this.#flushedSeq,
        inFlight: state.inFlight,
      });
      this.close(ws, CloseCode.SLOW_CONSUMER, "slow consumer: resume with since");
    }
    this.#counters.changed();
  }
}
