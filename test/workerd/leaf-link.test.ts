/**
 * The root's side of one leaf (followers/follower-link.ts): what it pushes, when, and
 * how it recovers. The leaf's stub is the transport, so the test holds it:
 * every push waits until the test answers it (as the leaf would, with a
 * report) or fails it (as a broken stub would). The room around the link
 * (LinkHost) is the test's too: a history the link reads catch-up from.
 */
import { describe, expect, it } from "vitest";
import { messageEvent, type Message } from "../../durable-objects/engine/message";
import type { FollowerBatch, FollowerReport, LostRange } from "../../durable-objects/followers/contracts";
import { FollowerLink, PUSH_MAX_BYTES, QUEUE_MAX_BYTES, type FollowerStub, type LinkHost } from "../../durable-objects/followers/follower-link";
import { sleep, until } from "../helpers/wait";

interface Push {
  batch: FollowerBatch;
  /** Which stub carried it (1 = the first the host handed out). */
  stub: number;
  answer(report: FollowerReport): void;
  fail(error: Error): void;
}

/** Where the batch ends: what a leaf that took all of it reports. */
function lastOf(batch: FollowerBatch): number {
  return batch.messages[batch.messages.length - 1]?.seq ?? batch.lost?.to ?? batch.after;
}

/** The leaf, as far as its stubs go: pushes wait for the test. */
class HeldLeaf {
  readonly pushes: Push[] = [];
  readonly #open: Push[] = [];
  stubs = 0;
  /** The next this many stubs throw when asked to push, as a stub of a broken object may. */
  throwingStubs = 0;

  stub(): FollowerStub {
    this.stubs += 1;
    const stub = this.stubs;
    if (this.throwingStubs > 0) {
      this.throwingStubs -= 1;
      const broken = {
        push: () => {
          throw new Error("the stub is broken");
        },
      };
      return broken as unknown as FollowerStub;
    }
    const transport = {
      push: (batch: FollowerBatch) =>
        new Promise<FollowerReport>((answer, fail) => {
          const push: Push = { batch, stub, answer, fail };
          this.pushes.push(push);
          this.#open.push(push);
        }),
    };
    return transport as unknown as FollowerStub;
  }

  /** Pushes sent and not answered. */
  get inFlight(): number {
    return this.#open.length;
  }

  get last(): Push {
    const push = this.pushes[this.pushes.length - 1];
    if (!push) throw new Error("nothing was pushed");
    return push;
  }

  /** Answers the oldest open push with a report at `seq` (by default: everything it carried), and lets the link act on it. */
  async answer(seq?: number): Promise<FollowerReport> {
    const push = this.#open.shift();
    if (!push) throw new Error("no push in flight");
    const report: FollowerReport = { seq: seq ?? lastOf(push.batch), connections: 2, behind: 0, members: [], full: push.batch.full, delta: null };
    push.answer(report);
    await sleep(0);
    return report;
  }

  /** Fails the oldest open push, as a broken stub does. */
  async fail(): Promise<void> {
    const push = this.#open.shift();
    if (!push) throw new Error("no push in flight");
    push.fail(new Error("the leaf's object broke"));
    await sleep(0);
  }

  /** Answers every push until none is in flight; returns how many it answered. */
  async answerAll(): Promise<number> {
    let answered = 0;
    while (this.inFlight > 0) {
      await this.answer();
      answered += 1;
    }
    return answered;
  }
}

/** The room around the link: its history, and what the link told it. */
class Room implements LinkHost {
  readonly leaf = new HeldLeaf();
  readonly history: Message[] = [];
  readonly reads: Array<{ from: number; budget: number }> = [];
  readonly reports: FollowerReport[] = [];
  readonly failures: unknown[] = [];
  /** Seqs the history no longer holds, reported by reads that start in them. */
  lostThrough = 0;
  memberCount = 1;

  stub(): FollowerStub {
    return this.leaf.stub();
  }

  epoch(): string {
    return "epoch-1";
  }

  roomName(): string {
    return "linked";
  }

  roster(): { members: null; count: number } {
    return { members: null, count: this.memberCount };
  }

  latest(): number {
    return this.history[this.history.length - 1]?.seq ?? 0;
  }

  members(): number {
    return this.memberCount;
  }

  read(from: number, budget: number): { messages: Message[]; lost: LostRange | null } {
    this.reads.push({ from, budget });
    const lost = from <= this.lostThrough ? { from, to: this.lostThrough } : null;
    const messages: Message[] = [];
    let bytes = 0;
    for (const message of this.history) {
      if (message.seq < from || message.seq <= this.lostThrough) continue;
      if (messages.length > 0 && bytes + message.bytes > budget) break;
      messages.push(message);
      bytes += message.bytes;
    }
    return { messages, lost };
  }

  reported(_link: FollowerLink, report: FollowerReport): void {
    this.reports.push(report);
  }

  failed(_link: FollowerLink, error: unknown): void {
    this.failures.push(error);
  }

  /** One flush of `count` messages of about `bytes` each: stored, then offered to `link`; what `offer` answered. */
  flush(link: FollowerLink, count = 1, bytes = 100): boolean {
    const messages = Array.from({ length: count }, () => {
      const seq = this.latest() + 1;
      const message = messageEvent(seq, JSON.stringify("x".repeat(bytes)), Date.now(), seq);
      this.history.push(message);
      return message;
    });
    return link.offer(messages);
  }
}

const seqsOf = (batch: FollowerBatch) => batch.messages.map((m) => m.seq);

describe("the live path", () => {
  it("keeps one push in flight and sends what queued meanwhile as one push when the leaf answers", async () => {
    const room = new Room();
    const link = new FollowerLink(0, room, 0, false);
    expect(room.flush(link)).toBe(true);
    expect(room.leaf.pushes).toHaveLength(1);
    expect(room.leaf.last.batch).toEqual({
      room: "linked",
      epoch: "epoch-1",
      after: 0,
      lost: null,
      messages: [room.history[0]],
      members: 1,
      full: false,
      roster: { count: 1, members: null },
    });
    // Three more flushes while the first push is out: nothing more goes.
    expect([room.flush(link), room.flush(link, 2), room.flush(link)]).toEqual([true, true, true]);
    expect(room.leaf.pushes).toHaveLength(1);
    expect(link.busy).toBe(true);

    const report = await room.leaf.answer();
    expect(link.acked).toBe(1);
    expect(room.reports).toEqual([report]);
    expect(room.leaf.pushes).toHaveLength(2);
    expect(room.leaf.last.batch).toMatchObject({ after: 1, messages: room.history.slice(1) });
    await room.leaf.answer();
    expect(link.acked).toBe(5);
    expect(link.busy).toBe(false);
    expect([link.pushes, room.reads.length, link.behind]).toEqual([2, 0, false]);
  });

  it("sends a long queue in pushes of at most PUSH_MAX_BYTES, each with at least one message", async () => {
    const room = new Room();
    const link = new FollowerLink(0, room, 0, false);
    room.flush(link);
    const third = Math.floor(PUSH_MAX_BYTES / 3);
    // Seven messages of a third of a push each, queued behind the first push.
    for (let i = 0; i < 7; i++) room.flush(link, 1, third);
    // One message larger than a push goes alone.
    room.flush(link, 1, PUSH_MAX_BYTES + 10);
    await room.leaf.answerAll();
    const batches = room.leaf.pushes.map((p) => p.batch);
    expect(batches.map(seqsOf)).toEqual([[1], [2, 3], [4, 5], [6, 7], [8], [9]]);
    for (const batch of batches.slice(1, -1)) expect(batch.messages.reduce((sum, m) => sum + m.bytes, 0)).toBeLessThanOrEqual(PUSH_MAX_BYTES);
    expect(link.acked).toBe(9);
    expect(room.reads).toEqual([]);
  });

  it("carries a member count change with messages or alone, and asks for every member when told to", async () => {
    const room = new Room();
    const link = new FollowerLink(0, room, 0, false);
    room.memberCount = 7;
    link.membersChanged();
    expect(room.leaf.last.batch).toMatchObject({ messages: [], members: 7, full: false });
    room.memberCount = 8;
    link.membersChanged();
    link.requestFull();
    room.flush(link);
    await room.leaf.answer();
    // The change and the request wait for the push in flight, then go with the message.
    expect(room.leaf.last.batch).toMatchObject({ messages: [room.history[0]], members: 8, full: true });
    await room.leaf.answer();
    expect(room.leaf.pushes).toHaveLength(2);
  });

  it("does not send again what the leaf already has", async () => {
    const room = new Room();
    const link = new FollowerLink(0, room, 0, false);
    room.flush(link);
    room.flush(link);
    room.flush(link);
    // The leaf fetched ahead on its own: it is level at 3 already.
    await room.leaf.answer(3);
    expect(room.leaf.pushes).toHaveLength(1);
    expect(link.busy).toBe(false);
    room.flush(link);
    expect(seqsOf(room.leaf.last.batch)).toEqual([4]);
  });

  it("stops pushing once closed", async () => {
    const room = new Room();
    const link = new FollowerLink(0, room, 0, false);
    room.flush(link);
    room.flush(link);
    link.close();
    expect(room.flush(link)).toBe(false);
    await room.leaf.answer();
    expect(room.leaf.pushes).toHaveLength(1);
    expect(link.busy).toBe(false);
  });
});

describe("falling behind and catching up", () => {
  it("serves a leaf from history once its queue outgrows QUEUE_MAX_BYTES, then rejoins the live path", async () => {
    const room = new Room();
    const link = new FollowerLink(0, room, 0, false);
    room.flush(link);
    const size = Math.floor(PUSH_MAX_BYTES / 2);
    let offered = 0;
    while (room.flush(link, 1, size)) offered += 1;
    // Queued up to the bound, then behind: the queue is dropped and later flushes are not taken.
    expect(offered).toBe(Math.floor(QUEUE_MAX_BYTES / (room.history[1] as Message).bytes));
    expect(link.behind).toBe(true);
    expect(room.flush(link, 1, size)).toBe(false);
    const latest = room.latest();

    await room.leaf.answer();
    // From history, from what the leaf confirmed, a push of about PUSH_MAX_BYTES at a time.
    expect(room.reads[0]).toEqual({ from: 2, budget: PUSH_MAX_BYTES });
    expect(room.leaf.last.batch.after).toBe(1);
    await room.leaf.answerAll();
    expect(link.acked).toBe(latest);
    expect(link.behind).toBe(false);
    const delivered = room.leaf.pushes.flatMap((p) => seqsOf(p.batch));
    expect(delivered).toEqual(Array.from({ length: latest }, (_, i) => i + 1));
    // Level again: the next flush goes out live.
    const reads = room.reads.length;
    expect(room.flush(link)).toBe(true);
    expect(seqsOf(room.leaf.last.batch)).toEqual([latest + 1]);
    expect(room.reads.length).toBe(reads);
  });

  it("falls behind when the leaf reports less than the push carried, and fills the gap from history", async () => {
    const room = new Room();
    const link = new FollowerLink(0, room, 0, false);
    room.flush(link, 3);
    // The leaf could not take 2 and 3 (it could not close a gap of its own).
    await room.leaf.answer(1);
    expect(link.behind).toBe(true);
    expect(link.acked).toBe(1);
    expect(room.reads).toEqual([{ from: 2, budget: PUSH_MAX_BYTES }]);
    expect(room.leaf.last.batch).toMatchObject({ after: 1 });
    expect(seqsOf(room.leaf.last.batch)).toEqual([2, 3]);
    await room.leaf.answer();
    expect([link.behind, link.acked, link.busy]).toEqual([false, 3, false]);
  });

  it("falls behind on a flush that does not follow what the leaf was sent", async () => {
    const room = new Room();
    const link = new FollowerLink(0, room, 0, false);
    room.flush(link);
    // Messages 2 and 3 were stored without being offered (a flush the link missed).
    room.history.push(messageEvent(2, "2", 0, 2), messageEvent(3, "3", 0, 3));
    expect(room.flush(link)).toBe(false);
    expect(link.behind).toBe(true);
    await room.leaf.answerAll();
    expect(room.leaf.pushes.map((p) => seqsOf(p.batch))).toEqual([[1], [2, 3, 4]]);
    expect(link.acked).toBe(4);
  });

  it("passes on what history lost, and goes on from after it", async () => {
    const room = new Room();
    const link = new FollowerLink(0, room, 0, false);
    for (let i = 0; i < 5; i++) room.history.push(messageEvent(i + 1, "1", 0, i + 1));
    room.lostThrough = 3;
    link.catchUp();
    expect(room.leaf.last.batch).toMatchObject({ after: 0, lost: { from: 1, to: 3 } });
    expect(seqsOf(room.leaf.last.batch)).toEqual([4, 5]);
    await room.leaf.answer();
    expect([link.acked, link.behind]).toEqual([5, false]);
  });
});

describe("failures", () => {
  it("retries a failed push after a backoff with a fresh stub, from history, asking the leaf for everything", async () => {
    const room = new Room();
    const link = new FollowerLink(0, room, 0, false);
    room.flush(link, 2);
    expect(room.leaf.last.stub).toBe(1);
    const failedAt = Date.now();
    await room.leaf.fail();
    expect(room.failures).toHaveLength(1);
    expect(link.behind).toBe(true);
    expect(link.failingSince).not.toBeNull();
    expect(room.leaf.stubs).toBe(2);
    // Waiting to retry: the room must stay awake for it.
    expect(link.busy).toBe(true);
    // Offers while behind are left to history.
    expect(room.flush(link)).toBe(false);

    await until(() => room.leaf.pushes.length === 2, { what: "the retry" });
    // Half the first ceiling (100 ms) at least.
    expect(Date.now() - failedAt).toBeGreaterThanOrEqual(50);
    const retry = room.leaf.last;
    expect(retry.stub).toBe(2);
    expect(retry.batch).toMatchObject({ after: 0, full: true });
    expect(seqsOf(retry.batch)).toEqual([1, 2, 3]);
    expect(room.reads[0]?.from).toBe(1);
    await room.leaf.answer();
    expect([link.acked, link.behind, link.failingSince, link.busy]).toEqual([3, false, null, false]);
  });

  it("takes a stub that throws as it takes a failed push", async () => {
    const room = new Room();
    room.leaf.throwingStubs = 1;
    const link = new FollowerLink(0, room, 0, false);
    expect(() => room.flush(link)).not.toThrow();
    await sleep(0);
    expect(room.failures.map(String)).toEqual(["Error: the stub is broken"]);
    expect(room.leaf.stubs).toBe(2);
    await until(() => room.leaf.pushes.length === 1, { what: "the retry on a fresh stub" });
    expect(room.leaf.last).toMatchObject({ stub: 2, batch: { full: true } });
    expect(seqsOf(room.leaf.last.batch)).toEqual([1]);
  });
});
