/**
 * The root's followers (room/leaves.ts): where new sockets go once the root
 * is full (placements of grants on leaves, a new leaf when all are full),
 * the directory of leaves a restarted root finds, pushes and reports,
 * retirement of an empty leaf, and a leaf that stops answering. The leaves
 * are the test's, as far as the root's calls on them go (FollowerRpc): each
 * answers a push with the report a leaf level with it would give, or fails
 * when the test breaks it. The root around Leaves (LeavesHost) is the
 * test's too, and records what Leaves told it.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { RoomCounterValues } from "../../protocol";
import { zeroCounters } from "../../common/counters";
import { parseLeafName, PLACEMENT_HEADER, type Placement } from "../../common/edge-requests";
import { messageEvent, type Message } from "../../durable-objects/engine/message";
import type { Roster } from "../../durable-objects/engine/presence";
import type { RoomLeaf } from "../../durable-objects/leaf/leaf";
import type { FollowerRpc, LeafBatch, LeafMember, LeafReport, LeafSnapshot, LeafStart, LostRange } from "../../durable-objects/leaf/rpc";
import { Leaves, PLACEMENT_GRANT, PLACEMENT_TTL_MS, type LeavesHost, type LeavesOptions } from "../../durable-objects/room/leaves";
import { sleep, until } from "../helpers/wait";

const ROOM = "sharded";

/** One leaf, as the root's calls on it see it. */
class Leaf {
  readonly index: number;
  readonly opens: LeafStart[] = [];
  readonly pushes: LeafBatch[] = [];
  readonly retires: string[] = [];
  /** What its reports say. */
  connections = 0;
  members: LeafMember[] = [];
  /** Every call fails, as on a leaf that is down. */
  down = false;
  /** It refuses to retire (a socket arrived since its last report). */
  busy = false;
  /** Where it is level, as its last answer said. */
  seq = 0;

  constructor(index: number) {
    this.index = index;
  }

  rpc(): FollowerRpc {
    const check = (): void => {
      if (this.down) throw new Error(`leaf ${this.index} is unreachable`);
    };
    return {
      open: async (start) => {
        check();
        this.opens.push(start);
      },
      push: async (batch) => {
        check();
        this.pushes.push(batch);
        return this.report(batch);
      },
      retire: async (room) => {
        check();
        this.retires.push(room);
        return !this.busy;
      },
      snapshot: async () => {
        check();
        return this.snapshot();
      },
    };
  }

  /** Its answer to a push: level with what the push carried, every member when asked for them. */
  report(batch: LeafBatch): LeafReport {
    this.seq = batch.messages.at(-1)?.seq ?? batch.lost?.to ?? batch.after;
    return { seq: this.seq, connections: this.connections, behind: 0, members: batch.full ? this.members : [], full: batch.full, delta: null };
  }

  snapshot(): LeafSnapshot {
    return {
      index: this.index,
      connections: this.connections,
      members: this.members.length,
      behind: 0,
      seq: this.seq,
      windowBytesInFlight: 0,
      windowBytesMax: 0,
      ringMessages: 0,
      ringBytes: 0,
      instanceStartedAt: 0,
      counters: zeroCounters(),
      unreported: null,
    };
  }
}

/** The room's root, as Leaves sees it, with its leaves. */
class Root implements LeavesHost {
  readonly leaves = new Map<number, Leaf>();
  readonly history: Message[] = [];
  /** Where each read of its history started. */
  readonly reads: number[] = [];
  memberCount = 0;
  /** Every directory written, in order. */
  readonly directories: number[][] = [];
  readonly dropped: number[] = [];
  readonly sharded: boolean[] = [];
  readonly reportedMembers: Array<{ index: number; members: readonly LeafMember[]; full: boolean }> = [];
  readonly reportedCounters: RoomCounterValues[] = [];
  connectionChanges = 0;

  leaf(index: number): Leaf {
    let leaf = this.leaves.get(index);
    if (!leaf) {
      leaf = new Leaf(index);
      this.leaves.set(index, leaf);
    }
    return leaf;
  }

  /** Messages 1..count stored. */
  publish(count: number): Message[] {
    const added = Array.from({ length: count }, (_, i) => {
      const seq = this.latest() + 1 + i;
      return messageEvent(seq, JSON.stringify({ n: seq }), 0, seq);
    });
    this.history.push(...added);
    return added;
  }

  roomName(): string {
    return ROOM;
  }

  namespace(): DurableObjectNamespace<RoomLeaf> {
    // Stubs by name, as the LEAVES binding hands them out.
    const namespace = {
      idFromName: (name: string) => name,
      get: (name: string) => {
        const address = parseLeafName(name);
        if (!address || address.room !== ROOM) throw new Error(`no leaf is named ${name}`);
        return this.leaf(address.index).rpc();
      },
    };
    return namespace as unknown as DurableObjectNamespace<RoomLeaf>;
  }

  hubs(): null {
    return null;
  }

  epoch(): string {
    return "epoch-1";
  }

  latest(): number {
    return this.history.at(-1)?.seq ?? 0;
  }

  members(): number {
    return this.memberCount;
  }

  roster(): Roster {
    return { members: null, count: this.memberCount };
  }

  read(from: number): { messages: Message[]; lost: LostRange | null } {
    this.reads.push(from);
    return { messages: this.history.filter((m) => m.seq >= from), lost: null };
  }

  saveDirectory(indices: readonly number[]): void {
    this.directories.push([...indices].sort((a, b) => a - b));
  }

  connectionsChanged(): void {
    this.connectionChanges += 1;
  }

  membersReported(index: number, members: readonly LeafMember[], full: boolean): void {
    this.reportedMembers.push({ index, members, full });
  }

  leafDropped(index: number): void {
    this.dropped.push(index);
  }

  countersReported(delta: RoomCounterValues): void {
    this.reportedCounters.push(delta);
  }

  shardedChanged(sharded: boolean): void {
    this.sharded.push(sharded);
  }
}

const OPTIONS: LeavesOptions = { shardSockets: 100, maxLeaves: 2, maxSocketsPerObject: 1000, countIntervalMs: 50, retireAfterMs: 50 };

function leavesOf(options: Partial<LeavesOptions> = {}, directory: string | null = null, seq = 0): { root: Root; leaves: Leaves } {
  const root = new Root();
  root.publish(seq);
  return { root, leaves: new Leaves({ ...OPTIONS, ...options }, root, directory, seq) };
}

/** The grants of a placement answer, or null when the root takes the socket itself. */
async function grants(answer: Promise<Response | null>): Promise<Placement["leaves"] | null> {
  const response = await answer;
  if (response === null) return null;
  expect(response.headers.get(PLACEMENT_HEADER)).toBe("1");
  const placement = (await response.json()) as Placement;
  expect(placement.ttlMs).toBe(PLACEMENT_TTL_MS);
  return placement.leaves;
}

/** Leaf `index` of `root` holds `connections` sockets now and reports it outside a push (its later answers say the same). */
function report(root: Root, leaves: Leaves, index: number, connections: number, fields: Partial<LeafReport> = {}): number {
  root.leaf(index).connections = connections;
  return leaves.report(index, { seq: 0, connections, behind: 0, members: [], full: false, delta: null, ...fields });
}

afterEach(() => {
  vi.useRealTimers();
});

describe("placement", () => {
  it("leaves sockets to the root up to ROOM_SHARD_SOCKETS, to its own bound, and always when sharding is off", async () => {
    const { root, leaves } = leavesOf();
    expect(await leaves.place(99, null)).toBeNull();
    // At the platform's bound the root's own refusal decides, not a leaf.
    expect(await leaves.place(1000, null)).toBeNull();
    const off = leavesOf({ shardSockets: 0 });
    expect(await off.leaves.place(5000, null)).toBeNull();
    expect([root.leaves.size, off.root.leaves.size, leaves.sharded]).toEqual([0, 0, false]);
  });

  it("opens the first leaf past the threshold (the root calls it first), stores it in the directory and grants the edge PLACEMENT_GRANT sockets on it", async () => {
    const { root, leaves } = leavesOf({}, null, 7);
    root.memberCount = 3;
    expect(await grants(leaves.place(100, null))).toEqual([{ index: 0, grant: PLACEMENT_GRANT }]);
    expect(root.leaf(0).opens).toEqual([{ room: ROOM, epoch: "epoch-1", seq: 7, members: 3, roster: { members: null, count: 3 } }]);
    expect(root.directories).toEqual([[0]]);
    expect(root.sharded).toEqual([true]);
    expect([leaves.size, leaves.sharded]).toEqual([1, true]);
    // Its first push asks for every member it holds.
    await until(() => root.leaf(0).pushes.length > 0, { what: "the first push" });
    expect(root.leaf(0).pushes[0]).toMatchObject({ after: 7, full: true, messages: [] });
  });

  it("counts grants against a leaf until its report shows the sockets arrived, and opens the next leaf when every leaf is full", async () => {
    const { root, leaves } = leavesOf();
    expect(await grants(leaves.place(100, null))).toEqual([{ index: 0, grant: 64 }]);
    expect(await grants(leaves.place(100, null))).toEqual([{ index: 0, grant: 36 }]);
    // Leaf 0 is promised all it holds: the next socket opens leaf 1.
    expect(await grants(leaves.place(100, null))).toEqual([{ index: 1, grant: 64 }]);
    expect(root.directories.at(-1)).toEqual([0, 1]);
    // 30 of leaf 0's 100 grants arrived: 30 sockets there, 70 on their way, none free.
    report(root, leaves, 0, 30);
    expect(leaves.connections).toBe(30);
    expect(await grants(leaves.place(100, null))).toEqual([{ index: 1, grant: 36 }]);
    // All of them arrived, then ten left again: leaf 0 has room for ten.
    report(root, leaves, 0, 100);
    report(root, leaves, 0, 90);
    expect(await grants(leaves.place(100, null))).toEqual([{ index: 0, grant: 10 }]);
  });

  it("lets grants the edge did not use lapse with their placement", async () => {
    const { leaves } = leavesOf({ maxLeaves: 1 });
    await grants(leaves.place(100, null));
    await grants(leaves.place(100, null));
    // Full with grants, no more leaves: overfilled up to the bound.
    expect(await grants(leaves.place(100, null))).toEqual([{ index: 0, grant: 64 }]);
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + PLACEMENT_TTL_MS + 1);
    expect(await grants(leaves.place(100, null))).toEqual([{ index: 0, grant: 64 }]);
    expect(await grants(leaves.place(100, null))).toEqual([{ index: 0, grant: 36 }]);
  });

  it("fills the leaves past the threshold up to MAX_SOCKETS_PER_ROOM once ROOM_MAX_LEAVES are open", async () => {
    const { root, leaves } = leavesOf({ maxLeaves: 1 });
    await grants(leaves.place(100, null));
    report(root, leaves, 0, 990);
    expect(await grants(leaves.place(100, null))).toEqual([{ index: 0, grant: 10 }]);
    report(root, leaves, 0, 1000);
    expect(await grants(leaves.place(100, null))).toBeNull();
    expect(root.leaves.size).toBe(1);
  });

  it("takes the edge's word that a leaf refused a socket as full, and opens the next", async () => {
    const { root, leaves } = leavesOf();
    await grants(leaves.place(100, null));
    expect(await grants(leaves.place(100, "0:100"))).toEqual([{ index: 1, grant: 64 }]);
    expect(leaves.connections).toBe(100);
    // A note that names no leaf of the room is ignored.
    expect(await grants(leaves.place(100, "7:100"))).toEqual([{ index: 1, grant: 36 }]);
    expect(root.leaves.size).toBe(2);
  });

  it("once sharded, places sockets on leaves until the room is below half the threshold", async () => {
    const { root, leaves } = leavesOf();
    await grants(leaves.place(100, null));
    report(root, leaves, 0, 10);
    expect(await grants(leaves.place(40, null))).not.toBeNull();
    expect(await leaves.place(39, null)).toBeNull();
  });

  it("drops a leaf it could not open, and lets the root decide alone", async () => {
    const { root, leaves } = leavesOf();
    root.leaf(0).down = true;
    expect(await leaves.place(100, null)).toBeNull();
    expect(root.directories).toEqual([[0], []]);
    expect(root.dropped).toEqual([0]);
    expect(root.sharded).toEqual([true, false]);
    expect(leaves.size).toBe(0);
  });
});

describe("the directory", () => {
  it("is what a restarted root pushes to: each leaf, from the stored seq, asked for its whole picture", async () => {
    const { root, leaves } = leavesOf({}, JSON.stringify([0, 3]), 12);
    expect([leaves.size, leaves.sharded]).toEqual([2, true]);
    // Nothing is sent before the root wakes them.
    expect([root.leaf(0).pushes.length, root.leaf(3).pushes.length]).toEqual([0, 0]);
    root.leaf(3).members = [{ id: "ann", present: true, connections: 1, verified: true }];
    root.leaf(3).connections = 1;
    leaves.wake();
    await until(() => root.leaf(0).pushes.length === 1 && root.leaf(3).pushes.length === 1, { what: "a push to each leaf" });
    for (const index of [0, 3]) expect(root.leaf(index).pushes[0]).toMatchObject({ room: ROOM, after: 12, full: true, messages: [] });
    expect(root.reportedMembers).toEqual([
      { index: 0, members: [], full: true },
      { index: 3, members: root.leaf(3).members, full: true },
    ]);
    expect(leaves.connections).toBe(1);
    expect(root.leaf(0).opens).toEqual([]);
  });

  it("ignores a stored directory it cannot read", () => {
    for (const stored of ["not json", "{}", JSON.stringify([-1, 1.5, "2", null])]) expect(leavesOf({}, stored).leaves.size).toBe(0);
  });

  it("takes in a leaf it does not know that asks where the room stands, or reports sockets", () => {
    const { root, leaves } = leavesOf({}, null, 5);
    expect(leaves.sync(4)).toEqual({ room: ROOM, epoch: "epoch-1", seq: 5, members: 0, roster: { members: null, count: 0 } });
    expect(root.directories.at(-1)).toEqual([4]);
    // An empty report of an unknown leaf is nothing to adopt; one with sockets is.
    report(root, leaves, 6, 0);
    expect(leaves.size).toBe(1);
    report(root, leaves, 6, 2);
    expect(root.directories.at(-1)).toEqual([4, 6]);
    expect(leaves.connections).toBe(2);
  });
});

describe("pushes and reports", () => {
  it("pushes each flush to every leaf and counts the sockets the leaves hold as reached", async () => {
    const { root, leaves } = leavesOf({}, JSON.stringify([0, 1]));
    report(root, leaves, 0, 10);
    report(root, leaves, 1, 20);
    const messages = root.publish(2);
    expect(leaves.push(messages)).toBe(30);
    await until(() => [0, 1].every((i) => root.leaf(i).pushes.some((p) => p.messages.length > 0)), { what: "the pushes" });
    for (const index of [0, 1]) expect(root.leaf(index).pushes.flatMap((p) => p.messages.map((m) => m.seq))).toEqual([1, 2]);
    expect(leaves.pushes).toBe(2);
  });

  it("passes a report's members and counters on to the root, and tells it when the leaves' sockets changed", () => {
    const { root, leaves } = leavesOf({}, JSON.stringify([0]));
    root.memberCount = 4;
    const member: LeafMember = { id: "ann", present: true, connections: 1, verified: true };
    const delta = { ...zeroCounters(), delivered: 5 };
    expect(report(root, leaves, 0, 1, { members: [member], delta })).toBe(4);
    expect(root.reportedMembers).toEqual([{ index: 0, members: [member], full: false }]);
    expect(root.reportedCounters).toEqual([delta]);
    expect(root.connectionChanges).toBe(1);
    // The same sockets again: nothing changed.
    report(root, leaves, 0, 1);
    expect(root.connectionChanges).toBe(1);
  });

  it("serves a leaf's history fetch from the root's history, and nothing past the live path", () => {
    const { root, leaves } = leavesOf({}, JSON.stringify([0]));
    root.publish(5);
    expect(leaves.history(3, 1 << 20)).toMatchObject({ epoch: "epoch-1", latest: 5, lost: null, messages: root.history.slice(2) });
    expect(root.reads).toEqual([3]);
    // Past the latest seq there is nothing to read.
    expect(leaves.history(6, 1 << 20)).toMatchObject({ latest: 5, lost: null, messages: [] });
    expect(root.reads).toEqual([3]);
  });
});

describe("retirement", () => {
  it("retires a leaf that stayed empty for ROOM_LEAF_RETIRE_MS: out of the directory, and the room is one object again", async () => {
    const { root, leaves } = leavesOf({}, JSON.stringify([0]));
    report(root, leaves, 0, 3);
    report(root, leaves, 0, 0);
    expect(root.leaf(0).retires).toEqual([]);
    await until(() => leaves.size === 0, { what: "the retirement" });
    expect(root.leaf(0).retires).toEqual([ROOM]);
    expect(root.directories).toEqual([[]]);
    expect(root.dropped).toEqual([0]);
    expect(root.sharded).toEqual([false]);
  });

  it("counts the empty time from the first empty report, however many follow", async () => {
    const { root, leaves } = leavesOf({}, JSON.stringify([0]));
    const started = Date.now();
    while (leaves.size > 0 && Date.now() - started < 1000) {
      report(root, leaves, 0, 0);
      await sleep(OPTIONS.retireAfterMs / 4);
    }
    expect(root.leaf(0).retires).toEqual([ROOM]);
    expect(leaves.size).toBe(0);
  });

  it("keeps a leaf that got sockets back before it was asked, or that refuses because one arrived since", async () => {
    const { root, leaves } = leavesOf({}, JSON.stringify([0, 1, 2]));
    report(root, leaves, 0, 0);
    report(root, leaves, 0, 2);
    root.leaf(1).busy = true;
    report(root, leaves, 1, 0);
    await until(() => root.leaf(1).retires.length === 1, { what: "the root asking leaf 1" });
    await sleep(OPTIONS.retireAfterMs * 3);
    expect(root.leaf(0).retires).toEqual([]);
    expect(leaves.size).toBe(3);
    // Leaf 1 refused: it is not asked again when another leaf retires, only once it reports empty again.
    report(root, leaves, 2, 0);
    await until(() => leaves.size === 2, { what: "leaf 2's retirement" });
    expect(root.leaf(1).retires).toEqual([ROOM]);
    root.leaf(1).busy = false;
    report(root, leaves, 1, 1);
    report(root, leaves, 1, 0);
    await until(() => leaves.size === 1, { what: "leaf 1's retirement" });
    expect(root.directories.at(-1)).toEqual([0]);
  });
});

describe("a leaf that stops answering", () => {
  it("gets no grants while its pushes fail, stops counting once it failed for long, and is asked for everything when it answers again", async () => {
    const { root, leaves } = leavesOf({}, JSON.stringify([0, 1]));
    report(root, leaves, 0, 10);
    report(root, leaves, 1, 10);
    root.leaf(0).down = true;
    leaves.push(root.publish(1));
    await until(() => root.leaf(1).pushes.length === 1, { what: "the push to the leaf that answers" });
    await sleep(0);
    // Only the leaf that answers gets sockets.
    expect(await grants(leaves.place(30, null))).toEqual([{ index: 1, grant: 64 }]);
    expect(root.dropped).toEqual([]);
    expect(leaves.connections).toBe(20);

    // Thirty seconds of failures later (the clock moves; the retries keep coming).
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + 30_001);
    await until(() => root.dropped.length === 1, { what: "the leaf given up as lost" });
    expect(root.dropped).toEqual([0]);
    expect(leaves.connections).toBe(10);
    // Still in the directory: it may come back.
    expect(leaves.size).toBe(2);
    const snapshot = await leaves.snapshot();
    expect(snapshot.leaves.map((l) => [l.index, l.reachable])).toEqual([
      [0, false],
      [1, true],
    ]);

    root.leaf(0).down = false;
    root.leaf(0).connections = 4;
    await until(() => root.leaf(0).pushes.length > 0, { what: "a push that gets through" });
    expect(root.leaf(0).pushes[0]).toMatchObject({ after: 0, full: true });
    expect(root.leaf(0).pushes.flatMap((p) => p.messages.map((m) => m.seq))).toEqual([1]);
    await until(() => leaves.connections === 14, { what: "its sockets counted again" });
  });
});
