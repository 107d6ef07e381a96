import { CloseCode, type LostEvent } from "../../protocol";
import { logEvent } from "../../common/log";
import { utf8Length } from "../../common/utf8";
import type { RoomCounters } from "./counters";
import { Cursor, type FollowAs } from "./cursor";
import { cutFrame, joinFrames, type BatchLimits, type Frame } from "./frames";
import type { AckVerdict } from "./send-window";
import type { SocketState } from "./socket-state";
import type { Stream } from "./stream";

export interface DeliveryOptions {
  /** WINDOW_BYTES: unacknowledged bytes per socket before it waits for an ack (0 = none). */
  windowBytes: number;
  /** SLOW_GRACE_MS: how long a cursor may stay behind without acknowledged progress. */
  graceMs: number;
  batch: BatchLimits;
  /** The code a socket is closed with for one of CloseCode's (a protocol with codes of its own maps them). */
  closeCode?: (code: number) => number;
  /**
   * For sockets that do not acknowledge on their own: asks one to prove what it read (it
   * sends the request and marks it in the socket's window), when half its window is in flight.
   */
  solicit?: (socket: SocketState) => void;
}

/**
 * The least a socket may leave unread of the answers to its own frames, however small its window:
 * room for a burst of publishes or subscribes to be answered before the client has read anything.
 */
export const ANSWER_ALLOWANCE_FLOOR = 64 * 1024;

/** How a socket left: its close code and reason, and who ended it. */
export interface LeaveCause {
  code: number;
  reason: string;
  /**
   * `client`: the client sent a close; `room`: the object closed it (a kick, the
   * idle sweep, token expiry, shutdown, a failed send, a hook); `network`: the
   * connection failed without a close.
   */
  by: "client" | "room" | "network";
}

/** What delivery tells the object it runs in. */
export interface DeliveryEvents {
  /** The object went from no sockets to some, or from some to none. */
  occupancyChanged(connections: number): void;
  /** A socket left, however it went (once per socket, never inside the fan-out loop's send). */
  left(socket: SocketState, cause: LeaveCause): void;
  /** An ack released frames: the socket has window space again. */
  released(socket: SocketState): void;
  /** For logs. */
  name(): string | null;
}

/**
 * The delivery engine: every socket has a window, and a cursor in each room
 * it follows (the seq it has been sent up to). Each cursor moves forward by
 * one of two paths.
 *
 * - Live: a cursor that is level with its room gets each coalesced frame as
 *   it is flushed, serialized once for everyone. When a frame does not fit in
 *   the socket's window, the cursor is marked behind instead of skipping it.
 * - Catch-up: a cursor that is behind (it fell out of the live path, or it
 *   resumed with `since`) is sent the next messages from the room's source
 *   whenever an ack frees window space, in frames cut the same way, until it
 *   is level again and rejoins the live path.
 *
 * No message is skipped for a socket that acknowledges, and nothing is queued
 * per socket: a socket costs its cursors and its window accounting. A cursor
 * that falls out of the source gets one `lost` event and continues from the
 * oldest kept message; one that stays behind with no acknowledged progress
 * for SLOW_GRACE_MS gets its socket closed with 4008, and it resumes.
 *
 * Answers to a client's own frames (`published`, `error`, `subscribed`...)
 * count against its window too: a socket that leaves more than a window of
 * them unread (at least ANSWER_ALLOWANCE_FLOOR) is closed with 4008, so a
 * client that sends frames and never reads holds bounded memory here.
 */
export class Delivery {
  readonly #sockets = new Map<WebSocket, SocketState>();
  readonly #streams = new Set<Stream>();
  readonly #counters: RoomCounters;
  readonly #options: DeliveryOptions;
  readonly #events: DeliveryEvents;
  #graceTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(counters: RoomCounters, options: DeliveryOptions, events: DeliveryEvents) {
    this.#counters = counters;
    this.#options = options;
    this.#events = events;
  }

  get size(): number {
    return this.#sockets.size;
  }

  /** Cursors catching up right now, over every room. */
  get behind(): number {
    let behind = 0;
    for (const stream of this.#streams) behind += stream.behind;
    return behind;
  }

  get windowBytes(): number {
    return this.#options.windowBytes;
  }

  get(ws: WebSocket): SocketState | undefined {
    return this.#sockets.get(ws);
  }

  sockets(): IterableIterator<SocketState> {
    return this.#sockets.values();
  }

  /** A socket arrives; it follows rooms with `follow`. */
  join(socket: SocketState): void {
    this.#sockets.set(socket.ws, socket);
    if (this.#sockets.size === 1) this.#events.occupancyChanged(1);
  }

  /**
   * The socket follows `stream` from `sentSeq`: level with the room, or
   * behind (a resume), in which case its caller starts catch-up (`catchUp`)
   * once the socket was told what comes first (its presence picture).
   */
  follow(socket: SocketState, stream: Stream, sentSeq: number, now: number, as?: FollowAs): Cursor {
    this.#streams.add(stream);
    const cursor = new Cursor(socket, stream, socket.nextCursorIndex++, sentSeq, as);
    socket.cursors.set(stream.room, cursor);
    stream.cursors.set(socket.ws, cursor);
    if (sentSeq < stream.flushedSeq) this.#fallBehind(cursor, now);
    return cursor;
  }

  /** Whether `socket` is still tracked here (a failed send forgets it). */
  holds(socket: SocketState): boolean {
    return this.#sockets.get(socket.ws) === socket;
  }

  /** The socket stops following `cursor`'s room; what is in flight of it stays in its window until acknowledged. */
  unfollow(cursor: Cursor): void {
    const { socket, stream } = cursor;
    if (stream.cursors.get(socket.ws) !== cursor) return;
    stream.cursors.delete(socket.ws);
    socket.cursors.delete(stream.room);
    if (cursor.behind) {
      stream.behind -= 1;
      cursor.stalledSince = null;
    }
  }

  /** Rooms this object holds sockets of. */
  streams(): IterableIterator<Stream> {
    return this.#streams.values();
  }

  /** A room's stream that no socket here follows any more is forgotten (an object that follows many rooms drops it). */
  dropStream(stream: Stream): void {
    if (stream.cursors.size === 0) this.#streams.delete(stream);
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

  /** Every socket leaves here (closed by either side, or failed). */
  leave(ws: WebSocket, cause: LeaveCause): SocketState | undefined {
    const socket = this.#sockets.get(ws);
    if (!socket) return undefined;
    this.#sockets.delete(ws);
    for (const cursor of socket.cursors.values()) {
      cursor.stream.cursors.delete(ws);
      if (cursor.behind) cursor.stream.behind -= 1;
    }
    this.#events.left(socket, cause);
    if (this.#sockets.size === 0) this.#events.occupancyChanged(0);
    return socket;
  }

  /**
   * Offers one flushed frame of `stream` (stored as history row `row`) to
   * every level cursor; returns how many sockets it was sent to. Counted
   * once per frame, not per socket: this loop is the object's hot path.
   */
  fanOut(stream: Stream, frame: Frame, row: number, now: number): number {
    const previous = frame.firstSeq - 1;
    const windowBytes = this.#options.windowBytes;
    const solicit = this.#options.solicit;
    let sentTo = 0;
    for (const cursor of stream.cursors.values()) {
      // A cursor behind is served from the source when its socket's acks make room.
      if (cursor.sentSeq !== previous) continue;
      const socket = cursor.socket;
      if (cursor.watching || frame.skip === socket.attachment.id) {
        cursor.sentSeq = frame.lastSeq;
        continue;
      }
      if (!socket.window.hasRoom(windowBytes)) {
        this.#fallBehind(cursor, now);
        cursor.nextRow = row;
        continue;
      }
      if (this.#send(socket, frame.text)) {
        socket.window.sent(cursor.index, frame.lastSeq, frame.lastTag, frame.bytes);
        cursor.sentSeq = frame.lastSeq;
        sentTo += 1;
        if (solicit !== undefined && socket.window.wantsSolicit(windowBytes, this.#answerAllowance)) solicit(socket);
      }
    }
    stream.flushedSeq = frame.lastSeq;
    (stream.counters ?? this.#counters).sent(sentTo, frame);
    return sentTo;
  }

  /** Applies a client's ack for `cursor`'s room; cursors behind that got window space back are sent what comes next. */
  ack(cursor: Cursor, seq: number, tag: number, now: number): AckVerdict {
    const socket = cursor.socket;
    const verdict = socket.window.ack(cursor.index, seq, tag, cursor.sentSeq);
    if (verdict === "released") this.#released(socket, now);
    return verdict;
  }

  /** A socket answered the server's request to acknowledge (DeliveryOptions.solicit): as an ack, for everything sent before the request. */
  answered(socket: SocketState, now: number): AckVerdict {
    const verdict = socket.window.answered();
    if (verdict === "released") this.#released(socket, now);
    return verdict;
  }

  /** The socket's window has room again: its cursors behind are sent what comes next. */
  #released(socket: SocketState, now: number): void {
    for (const each of [...socket.cursors.values()]) {
      if (!each.behind) continue;
      each.stalledSince = now;
      this.catchUp(each, now);
      // Catch-up may have closed it (a failed send).
      if (this.#sockets.get(socket.ws) !== socket) return;
    }
    this.#events.released(socket);
  }

  /**
   * Sends a cursor that is behind the next messages from its room's source,
   * as far as its socket's window allows (a window plus at most one stored
   * frame). Each row read is sent: catch-up reads only what it sends.
   */
  catchUp(cursor: Cursor, now: number): void {
    const windowBytes = this.#options.windowBytes;
    const { socket, stream } = cursor;
    const window = socket.window;
    const counters = stream.counters ?? this.#counters;
    while (cursor.sentSeq < stream.flushedSeq && window.hasRoom(windowBytes)) {
      const budget = windowBytes === 0 ? Number.POSITIVE_INFINITY : windowBytes - window.inFlight;
      const read = stream.source.read(cursor.sentSeq + 1, budget, this.#options.batch, cursor.nextRow, now);
      counters.rowsRead(read.rowsRead);
      if (read.lost) {
        const lost: LostEvent = { type: "lost", reason: "history", from: read.lost.from, to: Math.min(read.lost.to, stream.flushedSeq) };
        const text = stream.text(lost, cursor);
        if (text !== null && !this.#send(socket, text)) return;
        counters.lost(lost.to - lost.from + 1);
        cursor.sentSeq = lost.to;
      }
      for (let i = 0; i < read.runs.length; ) {
        const { frame, end } = cutFrame(read.runs, i, this.#options.batch);
        i = end;
        if (frame.lastSeq > stream.flushedSeq) break;
        if (cursor.watching || frame.skip === socket.attachment.id) {
          cursor.sentSeq = frame.lastSeq;
          continue;
        }
        if (!this.#send(socket, frame.text)) return;
        window.sent(cursor.index, frame.lastSeq, frame.lastTag, frame.bytes);
        cursor.sentSeq = frame.lastSeq;
        counters.caughtUp(frame);
        this.#maybeSolicit(socket);
      }
      cursor.nextRow = read.nextRow;
      if (read.runs.length === 0 && read.lost === null) break;
    }
    if (cursor.sentSeq >= stream.flushedSeq && cursor.behind) {
      cursor.stalledSince = null;
      cursor.nextRow = 0;
      stream.behind -= 1;
    }
  }

  /** Every cursor of `stream` behind catches up as far as its window allows (its source just gained what it lacked). */
  resume(stream: Stream, now: number): void {
    for (const cursor of [...stream.cursors.values()]) if (cursor.behind) this.catchUp(cursor, now);
  }

  /** Closes a socket the object is done with; its frames are no longer acted on. */
  close(ws: WebSocket, code: number, reason: string): void {
    const text = reason.slice(0, 120);
    this.leave(ws, { code, reason: text, by: "room" });
    try {
      ws.close(this.#options.closeCode?.(code) ?? code, text);
    } catch {
      // Already closing or closed.
    }
  }

  /** A socket that threw on send or failed: forgotten and closed, never fatal to the object. */
  forget(ws: WebSocket, why: string, error: unknown): void {
    const socket = this.leave(ws, { code: CloseCode.INTERNAL_ERROR, reason: why, by: "room" });
    logEvent("socket_dropped", { room: this.#events.name(), socket: socket?.attachment.id ?? null, why, error: String(error) });
    try {
      ws.close(this.#options.closeCode?.(CloseCode.INTERNAL_ERROR) ?? CloseCode.INTERNAL_ERROR, why);
    } catch {
      // The socket is already gone.
    }
  }

  /**
   * Sends an event the socket did not ask for with a frame (a `lost`, a hook's
   * own event); these are not counted against the window.
   */
  sendControl(socket: SocketState, text: string): boolean {
    return this.#send(socket, text);
  }

  /**
   * Sends the answer to one of the socket's own frames (`published`, `error`,
   * `subscribed`, `unsubscribed`, `authorized`; Pusher's `subscription_error`,
   * `pusher:error`, `pusher:pong`...), counted against its window until an ack
   * of a later frame (or the answer to a later solicitation) releases it. A socket whose unread answers
   * already fill the allowance (its window, at least ANSWER_ALLOWANCE_FLOOR)
   * is not reading what it asks for: it is closed with 4008 instead. A window
   * of 0 (none) bounds nothing here either.
   */
  sendAnswer(socket: SocketState, text: string): boolean {
    const windowBytes = this.#options.windowBytes;
    const window = socket.window;
    if (windowBytes > 0 && !window.hasAnswerRoom(this.#answerAllowance)) {
      this.#counters.kicked();
      logEvent("kick", { room: this.#events.name(), socket: socket.attachment.id, reason: "unread_answers", answersInFlight: window.answersInFlight });
      this.close(socket.ws, CloseCode.SLOW_CONSUMER, "answers not read: resume with since");
      return false;
    }
    if (!this.#send(socket, text)) return false;
    window.answerSent(utf8Length(text));
    // A client that acknowledges only when asked (Pusher's) is asked before its answers fill the allowance.
    this.#maybeSolicit(socket);
    return true;
  }

  /** Sends a presence event of `cursor`'s room when the socket's window has room for it. */
  sendPresence(cursor: Cursor, text: string, bytes: number, tag: number): boolean {
    const window = cursor.socket.window;
    if (!window.hasPresenceRoom(this.#options.windowBytes)) return false;
    if (!this.#send(cursor.socket, text)) return false;
    window.presenceSent(cursor.index, cursor.sentSeq, tag, bytes);
    this.#maybeSolicit(cursor.socket);
    return true;
  }

  /** Asks a socket that does not acknowledge on its own to, once half its window is in flight. */
  #maybeSolicit(socket: SocketState): void {
    if (this.#options.solicit !== undefined && socket.window.wantsSolicit(this.#options.windowBytes, this.#answerAllowance)) this.#options.solicit(socket);
  }

  /** The answers a socket may leave unread: its window, at least ANSWER_ALLOWANCE_FLOOR. */
  get #answerAllowance(): number {
    return Math.max(this.#options.windowBytes, ANSWER_ALLOWANCE_FLOOR);
  }

  /** Sum and maximum of the sockets' unacknowledged bytes. */
  windowFigures(): { inFlight: number; max: number } {
    let inFlight = 0;
    let max = 0;
    for (const socket of this.#sockets.values()) {
      const bytes = socket.window.inFlight;
      inFlight += bytes;
      if (bytes > max) max = bytes;
    }
    return { inFlight, max };
  }

  /** Sends what the socket holds back (its welcome) alone, when nothing took it along. */
  flushHeld(socket: SocketState): boolean {
    const held = socket.held;
    if (held === null) return true;
    socket.held = null;
    return this.#send(socket, held);
  }

  #send(socket: SocketState, text: string): boolean {
    if (socket.held !== null) {
      // A new socket's welcome and the frame after it: one send, not two (each costs the runtime a write).
      text = joinFrames(socket.held, text);
      socket.held = null;
    }
    try {
      socket.ws.send(text);
      return true;
    } catch (error) {
      this.forget(socket.ws, "send_failed", error);
      return false;
    }
  }

  #fallBehind(cursor: Cursor, now: number): void {
    if (cursor.behind) return;
    cursor.stalledSince = now;
    cursor.nextRow = 0;
    cursor.stream.behind += 1;
    this.#armGraceTimer();
  }

  /**
   * While any cursor is behind, a timer checks for cursors that made no
   * progress within the grace period. It also keeps the object from
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
        logEvent("error", { room: this.#events.name(), where: "grace_timer", error: String(error) });
      }
      if (this.behind > 0) this.#armGraceTimer();
    }, interval);
  }

  #closeStalled(now: number): void {
    for (const stream of this.#streams) {
      if (stream.behind === 0) continue;
      for (const cursor of [...stream.cursors.values()]) {
        if (cursor.stalledSince === null || now - cursor.stalledSince < this.#options.graceMs) continue;
        // Counted for the room it stalled in (a hub reports it to the room's root, as its deliveries).
        (stream.counters ?? this.#counters).kicked();
        logEvent("kick", {
          room: stream.room,
          socket: cursor.socket.attachment.id,
          reason: "slow_consumer",
          sentSeq: cursor.sentSeq,
          roomSeq: stream.flushedSeq,
          inFlight: cursor.socket.window.inFlight,
        });
        this.close(cursor.socket.ws, CloseCode.SLOW_CONSUMER, "slow consumer: resume with since");
      }
    }
  }
}
