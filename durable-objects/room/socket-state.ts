/**
 * What the room knows about one socket while the object is in memory: its
 * send window (bytes sent but not yet acknowledged) and its slow-consumer
 * streak.
 *
 * Workers WebSockets expose no bufferedAmount and `send()` queues without
 * limit, so this accounting is the only thing standing between one stalled
 * reader and the object's 128 MB. Every operation is O(1) amortized.
 *
 * After hibernation the state is rebuilt from the attachment with an empty
 * window: the room was idle for seconds before it hibernated, so nothing of
 * note was in flight.
 */

/** Survives hibernation (serializeAttachment); keep it well under 16 KiB. */
export interface SocketAttachment {
  id: string;
  connectedAt: number;
  /** May this socket publish frames into the room? */
  canPublish: boolean;
  /** When the socket's token expires (epoch ms); null when it was admitted without one. */
  expiresAt: number | null;
}

export type SendVerdict = "send" | "drop" | "kick";

export interface RatePolicy {
  perSecond: number;
  burst: number;
}

export interface SlowPolicy {
  windowBytes: number;
  dropsBeforeClose: number;
  graceMs: number;
}

export class SocketState {
  readonly attachment: SocketAttachment;
  /** Last time the client sent anything (heartbeats excluded: the runtime stamps those). */
  lastActivity: number;
  /** Messages dropped for this socket since it connected. */
  dropped = 0;
  #sentBytes = 0;
  #ackedBytes = 0;
  /** Pairs [lastSeqInFrame, sentBytesAfterFrame], oldest first, from #head on. */
  #marks: number[] = [];
  #head = 0;
  #dropStreak = 0;
  #overSince: number | null = null;
  #droppedFrom = 0;
  #droppedTo = 0;
  #tokens = -1;
  #refilledAt = 0;

  constructor(attachment: SocketAttachment, now: number) {
    this.attachment = attachment;
    this.lastActivity = now;
  }

  /** Bytes sent to this socket and not yet acknowledged. */
  get inFlight(): number {
    return this.#sentBytes - this.#ackedBytes;
  }

  /**
   * Decides whether a frame of `bytes` holding `events` messages may go out.
   * A frame is dropped when it would push the window over the cap (a lone
   * frame larger than the cap still goes to an idle socket, or it could never
   * be delivered); the socket is kicked when it has stayed over the cap for
   * the configured number of drops or time.
   */
  admit(bytes: number, lastSeq: number, events: number, now: number, policy: SlowPolicy): SendVerdict {
    const inFlight = this.inFlight;
    if (policy.windowBytes === 0 || inFlight === 0 || inFlight + bytes <= policy.windowBytes) return "send";
    this.dropped += events;
    if (this.#droppedFrom === 0) this.#droppedFrom = lastSeq - events + 1;
    this.#droppedTo = lastSeq;
    this.#dropStreak += 1;
    this.#overSince ??= now;
    if (this.#dropStreak >= policy.dropsBeforeClose || now - this.#overSince >= policy.graceMs) return "kick";
    return "drop";
  }

  /** The seqs dropped since the last call, if any: what the client should be told. */
  takeDropped(): { from: number; to: number } | null {
    if (this.#droppedFrom === 0) return null;
    const range = { from: this.#droppedFrom, to: this.#droppedTo };
    this.#droppedFrom = this.#droppedTo = 0;
    return range;
  }

  /**
   * Token bucket for client frames: true when one more frame is within the
   * rate. The bucket starts full, so a reconnecting client's first acks and
   * replay requests never trip it.
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

  /** Records a frame that went out; `lastSeq` is the highest message seq it carried. */
  sent(bytes: number, lastSeq: number): void {
    this.#sentBytes += bytes;
    this.#marks.push(lastSeq, this.#sentBytes);
    this.#dropStreak = 0;
    this.#overSince = null;
  }

  /** The client has every message up to and including `seq`: release their bytes. */
  ack(seq: number): void {
    const marks = this.#marks;
    let head = this.#head;
    while (head < marks.length && (marks[head] as number) <= seq) {
      this.#ackedBytes = marks[head + 1] as number;
      head += 2;
    }
    // Compact once the consumed prefix dominates, keeping pushes and acks O(1) amortized.
    if (head > 64 && head * 2 > marks.length) {
      this.#marks = marks.slice(head);
      head = 0;
    }
    this.#head = head;
  }
}
