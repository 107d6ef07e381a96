import type { Histogram } from "./histogram";
import { SeqSet } from "./seq-set";

/** What happened to one received message event, from the client's point of view. */
export type Receipt =
  /** First copy, received before its deadline: its latency was recorded. */
  | "in-time"
  /** First copy, received after its deadline: counted as lost, not as latency. */
  | "late"
  /** A seq this client already had. */
  | "duplicate"
  /** A seq from before the client's first welcome (history it never asked for). */
  | "stale";

/**
 * The seqs the publisher knows were accepted in one room, per generation.
 * A generation ends when the room's seq restarts (its history was lost and the
 * epoch changed), so one room can have several [first, last] ranges in a run.
 */
export interface PublishedRange {
  first: number;
  last: number;
}

/** Totals of a ledger, or of many ledgers added together. */
export interface DeliveryTotals {
  /** Messages the client should have received: every seq the publisher got accepted. */
  expected: number;
  /** Received once, before the deadline (these have a latency). */
  inTime: number;
  /** Received, but after the deadline. */
  late: number;
  /** Never received. */
  never: number;
  /** Copies of seqs already received. */
  duplicates: number;
  /** Received seqs beyond what the publisher saw accepted (a publish whose answer was lost). */
  unconfirmed: number;
  /** Times the client saw the seq jump forward (a frame was dropped or history skipped). */
  gaps: number;
  /** Seqs skipped over by those jumps at the moment they happened (some may arrive later by resume). */
  gapSeqs: number;
  /** Seqs that arrived below the highest seq already seen (reordering or replay). */
  outOfOrder: number;
  /** `lost` events received, and the seqs they declared lost. */
  lostEvents: number;
  lostEventSeqs: number;
}

export function emptyTotals(): DeliveryTotals {
  return {
    expected: 0,
    inTime: 0,
    late: 0,
    never: 0,
    duplicates: 0,
    unconfirmed: 0,
    gaps: 0,
    gapSeqs: 0,
    outOfOrder: 0,
    lostEvents: 0,
    lostEventSeqs: 0,
  };
}

export function addTotals(into: DeliveryTotals, from: DeliveryTotals): DeliveryTotals {
  for (const key of Object.keys(into) as Array<keyof DeliveryTotals>) into[key] += from[key];
  return into;
}

/** Lost messages: late plus never received. Latency percentiles never include them. */
export function lostOf(totals: DeliveryTotals): number {
  return totals.late + totals.never;
}

/** One epoch of a client's history: the seqs received while the room kept the same history. */
interface Segment {
  epoch: string;
  seen: SeqSet;
  /** Highest seq received in this segment; -1 before the first message. */
  highest: number;
  /** Every seq up to this one was received (or predates the client); used for `since` on resume. */
  contiguous: number;
  lateSeqs: SeqSet;
}

/**
 * Delivery bookkeeping for one logical client (one subscriber that may
 * reconnect). Messages are matched by their room seq, never by position on the
 * socket, so a dropped, duplicated or reordered frame is counted as such and a
 * later message cannot stand in for an earlier one.
 */
export class ClientLedger {
  private readonly segments: Segment[] = [];
  private readonly expectedPerSegment: number;
  private totals = emptyTotals();

  /**
   * @param deadlineMs messages received later than `ts + deadlineMs` are lost (late), not latency.
   * @param expectedMessages sizing hint for the seq bitsets.
   */
  constructor(
    private readonly deadlineMs: number,
    expectedMessages = 1024,
  ) {
    this.expectedPerSegment = expectedMessages;
  }

  /**
   * A welcome arrived. The same epoch continues the current segment (a resume);
   * a new epoch opens a new one whose seqs start after the welcome's seq.
   */
  welcome(epoch: string, seq: number): void {
    const current = this.segments[this.segments.length - 1];
    if (current && current.epoch === epoch) return;
    this.segments.push({
      epoch,
      seen: new SeqSet(seq + 1, this.expectedPerSegment),
      highest: seq,
      contiguous: seq,
      lateSeqs: new SeqSet(seq + 1, 64),
    });
  }

  /** The seq to resume from (`since`), and the epoch it belongs to; undefined before any welcome. */
  resumePoint(): { since: number; epoch: string } | undefined {
    const current = this.segments[this.segments.length - 1];
    return current ? { since: current.contiguous, epoch: current.epoch } : undefined;
  }

  /** Highest seq received in the current segment (what an ack may cover). */
  get highestSeq(): number {
    return this.segments[this.segments.length - 1]?.highest ?? -1;
  }

  /**
   * Records one message event. `latencyInto` receives `receivedAt - ts` for
   * in-time first copies only.
   */
  record(seq: number, ts: number, receivedAt: number, latencyInto: Histogram): Receipt {
    const segment = this.segments[this.segments.length - 1];
    if (!segment || seq < segment.seen.base) return "stale";
    if (!segment.seen.add(seq)) {
      this.totals.duplicates++;
      return "duplicate";
    }
    if (seq > segment.highest + 1) {
      this.totals.gaps++;
      this.totals.gapSeqs += seq - segment.highest - 1;
    } else if (seq < segment.highest) {
      this.totals.outOfOrder++;
    }
    if (seq > segment.highest) segment.highest = seq;
    while (segment.seen.has(segment.contiguous + 1)) segment.contiguous++;

    const latency = receivedAt - ts;
    if (latency > this.deadlineMs) {
      segment.lateSeqs.add(seq);
      return "late";
    }
    latencyInto.add(latency);
    return "in-time";
  }

  /** The server declared seqs `from`..`to` lost for this client. */
  lostEvent(from: number, to: number): void {
    this.totals.lostEvents++;
    this.totals.lostEventSeqs += Math.max(0, to - from + 1);
  }

  /**
   * Final accounting against what the publisher saw accepted, generation by
   * generation (segment i of this client matches generation i of the room).
   * A generation the client never saw counts entirely as never received.
   */
  settle(generations: readonly PublishedRange[]): DeliveryTotals {
    const t = { ...this.totals };
    generations.forEach((range, i) => {
      const size = Math.max(0, range.last - range.first + 1);
      t.expected += size;
      const segment = this.segments[i];
      if (!segment) {
        t.never += size;
        return;
      }
      let inTime = 0;
      let late = 0;
      for (let s = range.first; s <= range.last; s++) {
        if (!segment.seen.has(s)) continue;
        if (segment.lateSeqs.has(s)) late++;
        else inTime++;
      }
      t.inTime += inTime;
      t.late += late;
      t.never += size - inTime - late;
      t.unconfirmed += segment.seen.size - segment.seen.countInRange(range.first, range.last);
    });
    // Segments beyond the known generations hold only unconfirmed seqs.
    for (let i = generations.length; i < this.segments.length; i++) {
      t.unconfirmed += (this.segments[i] as Segment).seen.size;
    }
    return t;
  }
}
