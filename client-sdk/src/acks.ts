import { utf8Length } from "../../common/utf8.js";

/** Default `ackDelayMs`: about one ack per second of traffic at most. */
export const DEFAULT_ACK_DELAY_MS = 1000;

/** Until a welcome says otherwise: the service's default window. */
const DEFAULT_WINDOW_BYTES = 1024 * 1024;

/** What an ack names: a seq, and the tag that proves it was read. */
export interface Ackable {
  seq: number;
  tag: number;
}

/**
 * When acks go out on one connection. The server sends a connection at most
 * a window of unacknowledged bytes; an ack names the last message read (or a
 * presence event, with the seq read when it arrived) with its tag, proof
 * that it was read, and releases every frame up to it. Acks are billed like
 * any incoming message and only free the window, so the pacer sends them as
 * soon as half the window is unacknowledged and otherwise at most
 * `ackDelayMs` after the first frame not yet acknowledged.
 *
 * One window may cover several rooms (a multiplexed connection): acks are
 * per room (`K` names it), the count of bytes is the connection's, and when
 * an ack is due every room that owes one sends it.
 */
export class AckPacer<K> {
  #delayMs: number;
  #send: (key: K, ack: Ackable) => boolean;
  #window = DEFAULT_WINDOW_BYTES;
  /** What the next ack of each room names: the last thing it read. */
  #owed = new Map<K, Ackable>();
  #unackedBytes = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;

  /**
   * @param delayMs longest wait before acknowledging a frame.
   * @param send sends the ack of `key` on the current connection; false when it could not.
   */
  constructor(delayMs: number, send: (key: K, ack: Ackable) => boolean) {
    this.#delayMs = delayMs;
    this.#send = send;
  }

  /** The connection's window, from its welcome (0: none). */
  setWindow(window: number): void {
    this.#window = window > 0 ? window : Number.POSITIVE_INFINITY;
  }

  /** The next ack for `key` names `ack`, the last thing of it read. */
  owe(key: K, ack: Ackable): void {
    this.#owed.set(key, ack);
  }

  /** A frame that counts against the window arrived as `text`: acks at half the window, or within the delay. */
  count(text: string): void {
    this.#unackedBytes += utf8Length(text);
    if (this.#unackedBytes * 2 >= this.#window) this.#flush();
    else this.#timer ??= setTimeout(() => this.#flush(), this.#delayMs);
  }

  /**
   * `key` is no longer followed: it owes nothing. With `settle`, what it owed is sent first
   * (before an unsubscribe: an ack for a room no longer followed would be refused).
   */
  forget(key: K, settle = false): void {
    const ack = this.#owed.get(key);
    this.#owed.delete(key);
    if (settle && ack) this.#send(key, ack);
  }

  /** The connection ended: its window and what it owed acks for end with it. */
  reset(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#owed.clear();
    this.#unackedBytes = 0;
  }

  #flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    for (const [key, ack] of this.#owed) if (this.#send(key, ack)) this.#owed.delete(key);
    // What could not be sent is kept, with the bytes it covers, for the next try.
    if (this.#owed.size === 0) this.#unackedBytes = 0;
  }
}
