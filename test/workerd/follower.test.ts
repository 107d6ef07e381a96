/**
 * One room as an object that follows it sees it (leaf/follower.ts): pushes
 * from the root applied in seq order (a gap fetched from the root's history
 * first, what the follower has dropped), what the root's history lost
 * passed on to the sockets, a push of another history, and fetches for
 * sockets behind the follower's ring. The follower runs on a real socket
 * engine on a real object's state, its sockets accepted as a leaf accepts
 * them; the root is the test's, as far as the follower's calls on it go.
 */
import { describe, expect, it } from "vitest";
import { CloseCode, type ServerEvent } from "../../protocol";
import { messageEvent, type Message } from "../../durable-objects/engine/message";
import { ROOM_SHAPE } from "../../durable-objects/engine/stream-shape";
import { FETCH_BYTES, RoomFollower, type FollowerHost } from "../../durable-objects/leaf/follower";
import type { LeafBatch, LeafHistory, LeafStart } from "../../durable-objects/leaf/rpc";
import type { Room } from "../../durable-objects/room/room";
import { EngineRig, inObject, resumeOf, type Accepted } from "../helpers/workerd/engine";
import { sleep, until } from "../helpers/wait";

const ROOM = "followed";
const EPOCH = "epoch-1";

/** The room's root, as far as a follower calls it: its history, and where the room stands. */
class Root implements FollowerHost {
  readonly index = 0;
  readonly history: Message[];
  epoch = EPOCH;
  /** Seqs up to this one are no longer in the root's history. */
  lostThrough = 0;
  readonly fetches: Array<{ from: number; budget: number }> = [];
  readonly syncs: string[] = [];
  moves = 0;
  /** The next fetches fail, as a call to a root that is down does. */
  failingFetches = 0;
  /** While set, fetches wait for it. */
  gate: Promise<void> | null = null;

  constructor(messages: number) {
    this.history = Array.from({ length: messages }, (_, i) => messageEvent(i + 1, JSON.stringify({ n: i + 1 }), 0, i + 1));
  }

  get latest(): number {
    return this.history.at(-1)?.seq ?? 0;
  }

  /** Messages `from`..`to` as the root stored them. */
  slice(from: number, to: number): Message[] {
    return this.history.filter((m) => m.seq >= from && m.seq <= to);
  }

  start(seq = this.latest): LeafStart {
    return { room: ROOM, epoch: this.epoch, seq, members: 0, roster: { members: null, count: 0 } };
  }

  batch(after: number, from: number, to: number, fields: Partial<LeafBatch> = {}): LeafBatch {
    return { room: ROOM, epoch: this.epoch, after, lost: null, messages: this.slice(from, to), members: 0, full: false, ...fields };
  }

  root(): DurableObjectStub<Room> {
    const leafHistory = async (from: number, budget: number): Promise<LeafHistory> => {
      this.fetches.push({ from, budget });
      if (this.gate) await this.gate;
      if (this.failingFetches > 0) {
        this.failingFetches -= 1;
        throw new Error("the root is unreachable");
      }
      const lost = from <= this.lostThrough ? { from, to: this.lostThrough } : null;
      return { epoch: this.epoch, latest: this.latest, lost, messages: this.slice(Math.max(from, this.lostThrough + 1), this.latest) };
    };
    return { leafHistory } as unknown as DurableObjectStub<Room>;
  }

  async sync(room: string): Promise<LeafStart> {
    this.syncs.push(room);
    await sleep(5);
    return this.start();
  }

  moved(): void {
    this.moves += 1;
  }
}

/** A follower of a room of `messages` messages on a real engine. */
function followerOn(state: DurableObjectState, messages: number) {
  const rig = new EngineRig(state);
  const root = new Root(messages);
  const batch = { maxBytes: rig.limits.BATCH_MAX_BYTES, maxEvents: rig.limits.BATCH_MAX_EVENTS };
  const follower = new RoomFollower(ROOM, rig.engine, rig.counters, { maxMessages: 1000, batch, shape: ROOM_SHAPE, counters: null }, root, {});
  /** A socket accepted as a leaf accepts it: into the follower's stream, in its epoch. */
  const connect = (since: number | null = null): Promise<Accepted> => rig.accept(follower.stream, resumeOf({ since, epoch: since === null ? null : EPOCH }), undefined, follower.epoch);
  return { rig, root, follower, connect };
}

/** What a socket was told after its welcome and presence picture: messages by seq, and lost ranges. */
function story(accepted: Accepted): (string | number)[] {
  return accepted.peer.events.flatMap((e: ServerEvent): (string | number)[] => {
    if (e.type === "message") return [e.seq];
    if (e.type === "lost") return [`lost ${e.reason} ${e.from}-${e.to}`];
    return [];
  });
}

/** Waits until the socket got message `seq`, and everything sent before the wait ended. */
async function received(rig: EngineRig, accepted: Accepted, seq: number): Promise<void> {
  await accepted.peer.waitFor((p) => p.of("message").some((m) => m.seq === seq), `message ${seq}`);
  await rig.settled(accepted);
}

describe("pushes", () => {
  it("applies a push in order: its sockets get the messages live, the ring holds them, and the follower records where it stands", async () => {
    await inObject(async (state) => {
      const { rig, root, follower, connect } = followerOn(state, 3);
      await follower.open(root.start(0));
      const socket = await connect();
      const moves = root.moves;
      await follower.push(root.batch(0, 1, 3));
      await received(rig, socket, 3);
      expect(story(socket)).toEqual([1, 2, 3]);
      expect([follower.ring.seq, follower.ring.covers(1)]).toEqual([3, true]);
      expect(root.moves).toBeGreaterThan(moves);
      expect(root.fetches).toEqual([]);
    });
  });

  it("drops what it already has: a push repeated after a lost answer sends nothing twice", async () => {
    await inObject(async (state) => {
      const { rig, root, follower, connect } = followerOn(state, 3);
      await follower.open(root.start(0));
      const socket = await connect();
      await follower.push(root.batch(0, 1, 2));
      await follower.push(root.batch(0, 1, 3));
      await received(rig, socket, 3);
      expect(story(socket)).toEqual([1, 2, 3]);
    });
  });

  it("fetches a gap from the root's history first, then applies the push, so its sockets get every message in order", async () => {
    await inObject(async (state) => {
      const { rig, root, follower, connect } = followerOn(state, 6);
      await follower.open(root.start(0));
      const socket = await connect();
      await follower.push(root.batch(0, 1, 2));
      // The push of 3 and 4 was lost on the way.
      await follower.push(root.batch(4, 5, 6));
      await received(rig, socket, 6);
      expect(story(socket)).toEqual([1, 2, 3, 4, 5, 6]);
      expect(root.fetches).toEqual([{ from: 3, budget: FETCH_BYTES }]);
      expect(follower.ring.seq).toBe(6);
    });
  });

  it("passes on what the root's history lost in the gap, then what follows", async () => {
    await inObject(async (state) => {
      const { rig, root, follower, connect } = followerOn(state, 6);
      await follower.open(root.start(0));
      const socket = await connect();
      await follower.push(root.batch(0, 1, 2));
      root.lostThrough = 4;
      await follower.push(root.batch(4, 5, 6));
      await received(rig, socket, 6);
      expect(story(socket)).toEqual([1, 2, "lost history 3-4", 5, 6]);
      expect(rig.counters.snapshot().lostMessages).toBe(2);
    });
  });

  it("passes on a lost range the push carries (a follower caught up from history)", async () => {
    await inObject(async (state) => {
      const { rig, root, follower, connect } = followerOn(state, 6);
      await follower.open(root.start(2));
      const socket = await connect();
      await follower.push(root.batch(2, 5, 6, { lost: { from: 3, to: 4 } }));
      await received(rig, socket, 6);
      expect(story(socket)).toEqual(["lost history 3-4", 5, 6]);
      expect(root.fetches).toEqual([]);
    });
  });

  it("stays where it is when the root's answer is of another history: nothing past the gap reaches its sockets", async () => {
    await inObject(async (state) => {
      const { rig, root, follower, connect } = followerOn(state, 6);
      await follower.open(root.start(0));
      const socket = await connect();
      await follower.push(root.batch(0, 1, 2));
      root.epoch = "epoch-2";
      await follower.push({ ...root.batch(4, 5, 6), epoch: EPOCH });
      await rig.settled(socket);
      expect(story(socket)).toEqual([1, 2]);
      expect(follower.ring.seq).toBe(2);
    });
  });

  it("applies pushes one after another, a later one waiting while an earlier one fetches its gap", async () => {
    await inObject(async (state) => {
      const { rig, root, follower, connect } = followerOn(state, 7);
      await follower.open(root.start(2));
      const socket = await connect();
      let open!: () => void;
      root.gate = new Promise((resolve) => (open = resolve));
      const gapped = follower.push(root.batch(4, 5, 6));
      const next = follower.push(root.batch(6, 7, 7));
      await until(() => root.fetches.length === 1, { what: "the gap's fetch" });
      await rig.settled(socket);
      expect(story(socket)).toEqual([]);
      open();
      await Promise.all([gapped, next]);
      await received(rig, socket, 7);
      expect(story(socket)).toEqual([3, 4, 5, 6, 7]);
    });
  });

  it("closes the sockets of an old history when a push brings another, and starts level with the root", async () => {
    await inObject(async (state) => {
      const { root, follower, connect } = followerOn(state, 2);
      await follower.open(root.start(2));
      const socket = await connect();
      root.epoch = "epoch-2";
      await follower.push({ ...root.batch(10, 11, 11), messages: [messageEvent(11, "11", 0, 11)] });
      expect(await socket.peer.closing()).toMatchObject({ code: CloseCode.SERVICE_RESTART });
      expect([follower.epoch, follower.ring.seq]).toEqual(["epoch-2", 11]);
    });
  });
});

describe("sockets behind the ring", () => {
  it("fetches what resuming sockets need from the root once, keeps it, and resumes them", async () => {
    await inObject(async (state) => {
      const { rig, root, follower, connect } = followerOn(state, 10);
      // Opened level at 10: the ring holds nothing older.
      await follower.open(root.start(10));
      const sockets = await Promise.all([connect(4), connect(4), connect(4)]);
      for (const socket of sockets) await received(rig, socket, 10);
      for (const socket of sockets) expect(story(socket)).toEqual([5, 6, 7, 8, 9, 10]);
      expect(root.fetches).toEqual([{ from: 5, budget: FETCH_BYTES }]);
      // What was fetched is kept: the next socket is served from the ring.
      const later = await connect(6);
      await received(rig, later, 10);
      expect(story(later)).toEqual([7, 8, 9, 10]);
      expect(root.fetches).toHaveLength(1);
    });
  });

  it("tells a socket behind what the root's history no longer holds, then sends the rest", async () => {
    await inObject(async (state) => {
      const { rig, root, follower, connect } = followerOn(state, 10);
      await follower.open(root.start(10));
      root.lostThrough = 6;
      const socket = await connect(4);
      await received(rig, socket, 10);
      expect(story(socket)).toEqual(["lost history 5-6", 7, 8, 9, 10]);
    });
  });

  it("tries a fetch that failed again, and resumes the socket once it succeeds", async () => {
    await inObject(async (state) => {
      const { rig, root, follower, connect } = followerOn(state, 10);
      await follower.open(root.start(10));
      root.failingFetches = 1;
      const socket = await connect(8);
      await received(rig, socket, 10);
      expect(story(socket)).toEqual([9, 10]);
      expect(root.fetches.map((f) => f.from)).toEqual([9, 9]);
    });
  });
});

describe("where the room stands", () => {
  it("asks the root once, however many callers wait, when it does not know", async () => {
    await inObject(async (state) => {
      const { root, follower } = followerOn(state, 4);
      expect(follower.known).toBe(false);
      await Promise.all([follower.ensureKnown(), follower.ensureKnown(), follower.ensureKnown()]);
      expect(root.syncs).toEqual([ROOM]);
      expect([follower.known, follower.epoch, follower.ring.seq]).toEqual([true, EPOCH, 4]);
      await follower.ensureKnown();
      expect(root.syncs).toHaveLength(1);
      // Retired: it forgets, and asks again on next use.
      follower.forget();
      await follower.ensureKnown();
      expect(root.syncs).toHaveLength(2);
    });
  });
});
