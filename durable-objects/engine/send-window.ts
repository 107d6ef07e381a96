/**
 * What a socket has been sent and not yet acknowledged. Workers WebSockets
 * expose no bufferedAmount and `send()` queues without limit, so this
 * accounting is the only thing between one stalled reader and the object's
 * 128 MB.
 *
 * Every frame that counts against the window (a frame of messages, a
 * presence event) leaves a mark, in send order. An ack is a claim, so it only
 * counts when it names a mark: the last message of a frame this socket was
 * sent (its stream, seq and random tag, which a client only learns by reading
 * the frame), or a presence event (its stream, the seq the socket had been
 * sent when it went out, and its tag). A socket reads its frames in order, so
 * an ack releases its mark and every mark before it, of any stream.
 *
 * A protocol whose clients do not acknowledge on their own (Pusher's) is
 * asked: the server sends a request (a `pusher:ping`) and leaves a
 * solicitation mark; the answer (its `pusher:pong`) releases that mark and
 * everything before it. One request is outstanding at a time, and an answer
 * nobody asked for is a lie.
 */

/**
 * What an ack did: `released` freed at least one mark; `stale` named nothing
 * it could release (already acknowledged, inside a frame, from before this
 * connection); `forged` claimed a message this socket was never sent, or
 * carried the wrong tag for the last message of a frame not yet acknowledged
 * (the only tags kept: an ack of a message inside a frame cannot be checked,
 * and is stale whatever its tag).
 */
export type AckVerdict = "released" | "stale" | "forged";

/** Numbers per mark: [stream * 2 + kind, seq, tag, message bytes sent after it, presence bytes sent after it]. */
const MARK = 5;
const MESSAGES = 0;
const PRESENCE = 1;
/** The consumed prefix is dropped once it is this long and most of the array: sends and acks stay O(1) amortized. */
const COMPACT_AFTER = 64 * MARK;
/** The stream number of solicitation marks: no cursor has it. */
const SOLICITED = -1;

export class SendWindow {
  #marks: number[] = [];
  #head = 0;
  #sentBytes = 0;
  #ackedBytes = 0;
  #presenceSentBytes = 0;
  #presenceAckedBytes = 0;
  /** The outstanding solicitation's number, or null; solicitations are numbered from 1. */
  #solicited: number | null = null;
  #solicitations = 0;

  /** Bytes of messages sent and not yet acknowledged. */
  get inFlight(): number {
    return this.#sentBytes - this.#ackedBytes;
  }

  /** Bytes of presence events sent and not yet acknowledged (not counted in `inFlight`). */
  get presenceInFlight(): number {
    return this.#presenceSentBytes - this.#presenceAckedBytes;
  }

  /**
   * Whether one more frame of messages may go out: while the window is not
   * full. So a socket holds at most one window plus one frame, and a frame
   * larger than the window still reaches a socket that has read everything.
   * A window of 0 means none.
   */
  hasRoom(windowBytes: number): boolean {
    return windowBytes === 0 || this.inFlight < windowBytes;
  }

  /**
   * Whether a presence event may go out: while messages and presence together
   * leave room in the window. Presence never holds up messages (they look at
   * `inFlight` alone), and a socket that stops reading holds at most one more
   * window of presence, however busy the room's membership is.
   */
  hasPresenceRoom(windowBytes: number): boolean {
    return windowBytes === 0 || this.inFlight + this.presenceInFlight < windowBytes;
  }

  /**
   * Whether the socket should be asked to acknowledge: nothing asked yet, and half the window
   * (messages and presence) is in flight, so the answer can arrive before the window fills.
   */
  wantsSolicit(windowBytes: number): boolean {
    return this.#solicited === null && windowBytes > 0 && (this.inFlight + this.presenceInFlight) * 2 >= windowBytes;
  }

  /** Whether a solicitation is waiting for its answer. */
  get soliciting(): boolean {
    return this.#solicited !== null;
  }

  /** A request to acknowledge went out after everything sent so far. */
  solicit(): void {
    const id = ++this.#solicitations;
    this.#solicited = id;
    this.#marks.push(SOLICITED * 2 + MESSAGES, id, 0, this.#sentBytes, this.#presenceSentBytes);
  }

  /**
   * The socket answered a solicitation: everything sent before it is released (`released`),
   * or nothing was asked (`forged`: an answer without a question proves nothing).
   */
  answered(): AckVerdict {
    const id = this.#solicited;
    if (id === null) return "forged";
    this.#solicited = null;
    return this.ack(SOLICITED, id, 0, id);
  }

  /** A frame of messages of `stream` went out, ending with message `lastSeq` whose tag is `tag`. */
  sent(stream: number, lastSeq: number, tag: number, bytes: number): void {
    this.#sentBytes += bytes;
    this.#marks.push(stream * 2 + MESSAGES, lastSeq, tag, this.#sentBytes, this.#presenceSentBytes);
  }

  /** A presence event of `stream` went out while the socket had been sent messages up to `atSeq`. */
  presenceSent(stream: number, atSeq: number, tag: number, bytes: number): void {
    this.#presenceSentBytes += bytes;
    this.#marks.push(stream * 2 + PRESENCE, atSeq, tag, this.#sentBytes, this.#presenceSentBytes);
  }

  /**
   * Applies an ack naming `seq` of `stream` with `tag`. `sentSeq` is how far
   * the socket has been sent in that stream: a claim beyond it is forged.
   * Acks name the newest marks, so the search runs from the newest back, and
   * stops at the first mark of the stream below `seq` (a stream's marks grow
   * in seq).
   */
  ack(stream: number, seq: number, tag: number, sentSeq: number): AckVerdict {
    if (seq > sentSeq) return "forged";
    const marks = this.#marks;
    let wrongTag = false;
    for (let i = marks.length - MARK; i >= this.#head; i -= MARK) {
      const key = marks[i] as number;
      if (key >> 1 !== stream) continue;
      const at = marks[i + 1] as number;
      if (at < seq) break;
      if (at > seq) continue;
      if (marks[i + 2] === tag) {
        this.#ackedBytes = marks[i + 3] as number;
        this.#presenceAckedBytes = marks[i + 4] as number;
        this.#release(i + MARK);
        return "released";
      }
      // A frame ends at `seq` with another tag: the client did not read it. (A presence event at
      // the same seq with another tag is no proof of anything: the ack may name a message.)
      if ((key & 1) === MESSAGES) wrongTag = true;
    }
    return wrongTag ? "forged" : "stale";
  }

  #release(head: number): void {
    if (head > COMPACT_AFTER && head * 2 > this.#marks.length) {
      this.#marks = this.#marks.slice(head);
      this.#head = 0;
    } else {
      this.#head = head;
    }
  }
}
