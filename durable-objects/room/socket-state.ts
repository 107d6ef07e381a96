/**
 * What the room knows about one socket: its cursor (the seq it has been sent
 * up to), its send window (bytes sent and not yet acknowledged), whether it
 * is behind, and its client-frame budget.
 *
 * Workers WebSockets expose no bufferedAmount and `send()` queues without
 * limit, so this accounting is the only thing between one stalled reader and
 * the object's 128 MB. An ack is a claim, so it only counts when it names the
 * last message of a frame this socket was sent and echoes that message's
 * random tag, which a client only learns by reading the frame.
 *
 * After hibernation the state is rebuilt from the attachment, level with the
 * room and with an empty window: a room with a socket behind keeps a timer
 * running, so it only hibernates once every socket was level.
 */

import type { MemberIdentity } from "../../common/members";
import type { JsonObject } from "./hooks";

/** Survives hibernation (serializeAttachment); keep it well under 16 KiB. */
export interface SocketAttachment {
  id: string;
  connectedAt: number;
  /** May this socket publish frames into the room? */
  canPublish: boolean;
  /** When the socket's token expires (epoch ms); null when it was admitted without one. */
  expiresAt: number | null;
  /** Last client frame as of the last write (rewritten at most every ACTIVITY_PERSIST_MS), so idleness survives hibernation. */
  activeAt?: number;
  /** The member this socket is, when it has an identity (a token's `sub`, or a self-chosen name in open mode). */
  member?: MemberIdentity;
  /** What the room's hooks attached (onConnect, connection.setData): a JSON object of at most MAX_CONNECTION_DATA_BYTES as JSON. */
  data?: JsonObject;
}


/** The attachment's `activeAt` is rewritten at most this often: a write per frame would cost as much as the frame. */
export const ACTIVITY_PERSIST_MS = 5000;

export interface RatePolicy {
  perSecond: number;
  burst: number;
}

/** The frame facts the window needs. */
export interface SentFrame {
  bytes: number;
  lastSeq: number;
  lastTag: number;
}

/**
 * What an ack did: `released` freed at least one frame; `stale` named nothing
 * it could release (already acknowledged, inside a frame, from before this
 * connection); `forged` claimed a message this socket was never sent, or
 * carried the wrong tag.
 */
export type AckVerdict = "released" | "stale" | "forged";

export class SocketState {
  readonly attachment: SocketAttachment;
  /** Last time the client sent anything (heartbeats excluded: the runtime stamps those). */
  lastActivity: number;
  /** Highest seq sent to this socket (or reported lost to it). */
  sentSeq: number;
  /** While behind: the history row that holds `sentSeq + 1`, when known (0 = look it up). */
  nextRow = 0;
  /** While behind: when the socket last made progress (fell behind, or an ack released a frame). Null when level. */
  stalledSince: number | null = null;
  /** Presence events were withheld (no room): the socket gets a fresh snapshot when it has room again. */
  presenceStale = false;
  #sentBytes = 0;
  #ackedBytes = 0;
  /**
   * Presence events in flight, as triples [sentSeqWhenSent, tag,
   * presenceBytesAfterEvent], oldest first, from #presenceHead on. Presence has
   * no seq of its own: an ack names it by the seq the client had read when it
   * arrived and echoes its tag; an ack for a later message also covers it,
   * since frames arrive in order.
   */
  #presenceMarks: number[] = [];
  #presenceHead = 0;
  #presenceSentBytes = 0;
  #presenceAckedBytes = 0;
  /** Triples [lastSeqInFrame, sentBytesAfterFrame, tagOfLastMessage], oldest first, from #head on. */
  #marks: number[] = [];
  #head = 0;
  #tokens = -1;
  #refilledAt = 0;

  constructor(attachment: SocketAttachment, sentSeq: number) {
    this.attachment = attachment;
    this.lastActivity = attachment.activeAt ?? attachment.connectedAt;
    this.sentSeq = sentSeq;
  }

  /** Bytes sent to this socket and not yet acknowledged. */
  get inFlight(): number {
    return this.#sentBytes - this.#ackedBytes;
  }

  get behind(): boolean {
    return this.stalledSince !== null;
  }

  /**
   * Whether one more frame may go out: while the window is not full. So a
   * socket holds at most one window plus one frame, and a frame larger than
   * the window still reaches a socket that has read everything.
   */
  hasRoom(windowBytes: number): boolean {
    return windowBytes === 0 || this.inFlight < windowBytes;
  }

  /** Bytes of presence events sent and not yet acknowledged (not counted in `inFlight`). */
  get presenceInFlight(): number {
    return this.#presenceSentBytes - this.#presenceAckedBytes;
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

  /** Records a presence event that went out. */
  presenceSent(bytes: number, tag: number): void {
    this.#presenceSentBytes += bytes;
    this.#presenceMarks.push(this.sentSeq, tag, this.#presenceSentBytes);
  }

  /** Records a frame that went out. */
  sent(frame: SentFrame): void {
    this.#sentBytes += frame.bytes;
    this.#marks.push(frame.lastSeq, this.#sentBytes, frame.lastTag);
    this.sentSeq = frame.lastSeq;
  }

  /**
   * Applies an ack for message `seq` with tag `tag`: when it names the last
   * message of a frame in flight and the tag matches, every frame up to that
   * one is released (and the presence events sent before it). When `tag` is
   * that of a presence event sent while the cursor was at `seq`, that event,
   * the ones before it and every message up to `seq` are released.
   */
  ack(seq: number, tag: number): AckVerdict {
    if (seq > this.sentSeq) return "forged";
    if (this.#ackPresence(seq, tag)) {
      // Every message up to `seq` was sent before that presence event.
      this.#releaseMessagesThrough(seq);
      return "released";
    }
    const marks = this.#marks;
    // Binary search the in-flight frames (ordered by seq) for one ending at `seq`.
    let lo = this.#head / 3;
    let hi = marks.length / 3 - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const last = marks[mid * 3] as number;
      if (last === seq) {
        if (marks[mid * 3 + 2] !== tag) return "forged";
        this.#ackedBytes = marks[mid * 3 + 1] as number;
        this.#release((mid + 1) * 3);
        // Presence sent before this frame was read too.
        this.#releasePresenceBefore(seq);
        return "released";
      }
      if (last < seq) lo = mid + 1;
      else hi = mid - 1;
    }
    return "stale";
  }

  /**
   * Token bucket for client frames that cost the room without freeing
   * anything: true when one more is within the rate. The bucket starts full.
   */
  takeFrameToken(now: number, policy: RatePolicy): boolean {
    if (policy.perSecond === 0) return true;
    if (this.#tokens < 0) {
      this.#tokens = policy.burst;
    } else {
      this.#tokens = Math.min(policy.burst, this.#tokens + ((now - this.#refilledAt) / 1000) * policy.perSecond);
    }
    this.#refilledAt = now;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  /** Notes client activity; true when the attachment should be rewritten so it survives hibernation. */
  touch(now: number): boolean {
    this.lastActivity = now;
    return now - (this.attachment.activeAt ?? this.attachment.connectedAt) >= ACTIVITY_PERSIST_MS;
  }

  /** Releases presence events up to the one sent at `seq` with `tag`; false when none in flight matches. */
  #ackPresence(seq: number, tag: number): boolean {
    const marks = this.#presenceMarks;
    // Acks name the latest event, so search from the newest back.
    for (let i = marks.length - 3; i >= this.#presenceHead; i -= 3) {
      const at = marks[i] as number;
      if (at < seq) return false;
      if (at === seq && marks[i + 1] === tag) {
        this.#presenceAckedBytes = marks[i + 2] as number;
        this.#releasePresence(i + 3);
        return true;
      }
    }
    return false;
  }

  /** Releases presence events sent while the socket's cursor was below `seq`. */
  #releasePresenceBefore(seq: number): void {
    const marks = this.#presenceMarks;
    let head = this.#presenceHead;
    while (head < marks.length && (marks[head] as number) < seq) {
      this.#presenceAckedBytes = marks[head + 2] as number;
      head += 3;
    }
    this.#releasePresence(head);
  }

  /** Releases message frames whose last seq is at most `seq`. */
  #releaseMessagesThrough(seq: number): void {
    const marks = this.#marks;
    let head = this.#head;
    while (head < marks.length && (marks[head] as number) <= seq) {
      this.#ackedBytes = marks[head + 1] as number;
      head += 3;
    }
    this.#release(head);
  }

  #releasePresence(head: number): void {
    if (head > 192 && head * 2 > this.#presenceMarks.length) {
      this.#presenceMarks = this.#presenceMarks.slice(head);
      this.#presenceHead = 0;
    } else {
      this.#presenceHead = head;
    }
  }

  #release(head: number): void {
    // Compact once the consumed prefix dominates, keeping sends and acks O(1) amortized.
    if (head > 192 && head * 2 > this.#marks.length) {
      this.#marks = this.#marks.slice(head);
      this.#head = 0;
    } else {
      this.#head = head;
    }
  }
}
