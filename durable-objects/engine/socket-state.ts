/**
 * What the engine knows about one socket: its attachment (what survives
 * hibernation), its send window, its client-frame budget, when it was last
 * heard from, and one cursor per room it follows (a socket of a room or of a
 * leaf follows one; a multiplexed socket several).
 *
 * After hibernation the state is rebuilt from the attachment, level with each
 * room and with an empty window: an object with a cursor behind keeps a timer
 * running, so it only hibernates once every cursor was level.
 */
import { ACTIVITY_PERSIST_MS, type SocketAttachment } from "./attachment";
import type { Cursor } from "./cursor";
import { SendWindow } from "./send-window";
import { TokenBucket, type RatePolicy } from "./token-bucket";

export type { RatePolicy } from "./token-bucket";

export class SocketState {
  readonly ws: WebSocket;
  readonly attachment: SocketAttachment;
  readonly window = new SendWindow();
  /** The rooms this socket follows, by name (a socket of a room or a leaf follows one). */
  readonly cursors = new Map<string, Cursor>();
  /** The index the next cursor's window marks carry: never reused while the socket lives. */
  nextCursorIndex = 0;
  /**
   * An event that goes out at the head of the socket's next frame rather than
   * on its own (its welcome: a new socket's first frames share one send), or
   * null. Delivery sends it with whatever it sends next, or alone (`flushHeld`).
   */
  held: string | null = null;
  /** Last time the client sent anything (heartbeats excluded: the runtime stamps those). */
  lastActivity: number;
  readonly #frames = new TokenBucket();

  constructor(ws: WebSocket, attachment: SocketAttachment) {
    this.ws = ws;
    this.attachment = attachment;
    this.lastActivity = attachment.activeAt ?? attachment.connectedAt;
  }

  /** The cursor of a socket that follows one room (every socket of a room or a leaf). */
  get cursor(): Cursor {
    return this.cursors.values().next().value as Cursor;
  }

  /**
   * Token bucket for client frames that cost the room without freeing
   * anything: true when one more is within the rate. The bucket starts full.
   */
  takeFrameToken(now: number, policy: RatePolicy): boolean {
    return this.#frames.take(now, policy);
  }

  /** Notes client activity; true when the attachment should be rewritten so it survives hibernation. */
  touch(now: number): boolean {
    this.lastActivity = now;
    return now - (this.attachment.activeAt ?? this.attachment.connectedAt) >= ACTIVITY_PERSIST_MS;
  }
}
