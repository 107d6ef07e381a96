/**
 * Who is in a room (engine/presence.ts), with real sockets: Presence sends
 * through a real Delivery (so through each socket's window) to WebSocketPairs,
 * and the test reads what each client end received. Sockets come and go the
 * way the socket engine wires them: a join after the socket follows the
 * room, a leave from Delivery's `left`, a refresh from its `released`.
 */
import { describe, expect, it } from "vitest";
import type { PresenceEvent, PresenceMember } from "../../protocol";
import type { Cursor } from "../../durable-objects/engine/cursor";
import { Presence, type LocalMember, type PresenceOptions, type PresenceSink } from "../../durable-objects/engine/presence";
import type { SocketState } from "../../durable-objects/engine/socket-state";
import { RoomMembers } from "../../durable-objects/room/room-members";
import { attachmentOf, DeliveryRig, type Peer } from "../helpers/workerd/sockets";
import { sleep } from "../helpers/wait";

interface Member {
  socket: SocketState;
  cursor: Cursor;
  peer: Peer;
}

const OPTIONS: PresenceOptions = { leaveDelayMs: 60, maxMembers: 100, countIntervalMs: 20 };

function room(options: Partial<PresenceOptions> = {}, windowBytes = 1 << 20, sink: Partial<PresenceSink> = {}) {
  let presence: Presence | null = null;
  const rig = new DeliveryRig(
    { windowBytes },
    {
      left: (socket) => {
        for (const cursor of socket.cursors.values()) presence?.leave(cursor, Date.now());
      },
      released: (socket) => {
        for (const cursor of socket.cursors.values()) presence?.refresh(cursor);
      },
    },
  );
  // What the room gathers from its objects' presence: the members GET /rooms/{room}/presence pages.
  const members = new RoomMembers(() => {});
  const live = new Presence({ ...OPTIONS, ...options }, rig.stream, {
    send: (cursor, text, bytes, tag) => rig.delivery.sendPresence(cursor, text, bytes, tag),
    counted: (events) => rig.counters.presenceSent(events),
    memberChanged: (id, member) => members.setLocal(id, member),
    ...sink,
  });
  presence = live;
  /** A socket of member `id` (none: a socket without an identity) joins. */
  const join = (id: string | null, info?: unknown): Member => {
    const member = id === null ? undefined : { id, verified: true, ...(info === undefined ? {} : { info: JSON.stringify(info) }) };
    const joined = rig.connect(attachmentOf(member ? { member } : {}));
    live.join(joined.cursor);
    return joined;
  };
  /** The socket closes (the client, here: its cause does not matter to presence). */
  const leave = (member: Member) => rig.delivery.close(member.socket.ws, 1000, "bye");
  return { rig, presence: live, members, join, leave };
}

/** Presence events without their random tags, as `action:member:count` (members of a sync in order). */
function actions(peer: Peer): string[] {
  return peer.of("presence").map((e: PresenceEvent) => {
    if (e.action === "join" || e.action === "leave") return `${e.action}:${e.member.id}:${e.count}`;
    if (e.action === "sync") return `sync:${e.members ? `[${e.members.map((m) => m.id).join(",")}]` : "-"}:${e.count}`;
    return `count:${e.count}`;
  });
}

function lastSync(peer: Peer): Extract<PresenceEvent, { action: "sync" }> | undefined {
  return peer.of("presence").filter((e): e is Extract<PresenceEvent, { action: "sync" }> => e.action === "sync").at(-1);
}

describe("joining", () => {
  it("gives a joining socket the whole picture, members with their data, and tells the others of the new member", async () => {
    const r = room();
    const ann = r.join("ann", { name: "Ann" });
    const bob = r.join("bob");
    await r.rig.settled(ann, bob);
    expect(actions(ann.peer)).toEqual(["sync:[ann]:1", "join:bob:2"]);
    // A socket is not told of itself joining.
    expect(actions(bob.peer)).toEqual(["sync:[ann,bob]:2"]);
    const members: PresenceMember[] = [
      { id: "ann", connections: 1, verified: true, info: { name: "Ann" } },
      { id: "bob", connections: 1, verified: true },
    ];
    expect(lastSync(bob.peer)?.members).toEqual(members);
    const join = ann.peer.of("presence")[1];
    expect(join).toMatchObject({ action: "join", member: members[1] });
    expect(r.presence.count).toBe(2);
    expect(r.rig.counters.values.presenceEvents).toBe(3);
  });

  it("counts no member for a socket without an identity, which still gets the picture", async () => {
    const r = room({ leaveDelayMs: 20 });
    const ann = r.join("ann");
    const anonymous = r.join(null);
    await r.rig.settled(ann, anonymous);
    expect(actions(anonymous.peer)).toEqual(["sync:[ann]:1"]);
    expect(actions(ann.peer)).toEqual(["sync:[ann]:1"]);
    r.leave(anonymous);
    await sleep(50);
    await r.rig.settled(ann);
    expect(actions(ann.peer)).toEqual(["sync:[ann]:1"]);
  });

  it("counts a member's tabs as one member with several connections", async () => {
    const r = room({ leaveDelayMs: 30 });
    const watcher = r.join("watcher");
    const first = r.join("ann");
    const second = r.join("ann");
    await r.rig.settled(watcher, first, second);
    expect(actions(watcher.peer)).toEqual(["sync:[watcher]:1", "join:ann:2"]);
    expect(actions(first.peer)).toEqual(["sync:[watcher,ann]:2"]);
    expect(lastSync(second.peer)?.members?.find((m) => m.id === "ann")?.connections).toBe(2);
    expect(r.members.page(10, null, 3).members.find((m) => m.id === "ann")?.connections).toBe(2);

    // Closing one tab is no leave, however long after; closing the last one is.
    r.leave(first);
    await sleep(60);
    await r.rig.settled(watcher);
    expect(actions(watcher.peer)).toEqual(["sync:[watcher]:1", "join:ann:2"]);
    r.leave(second);
    await watcher.peer.waitFor((p) => actions(p).length === 3, "the leave");
    expect(actions(watcher.peer)[2]).toBe("leave:ann:1");
  });

  it("rebuilds members from sockets that were already there without telling anyone", async () => {
    const r = room();
    const ann = r.rig.connect(attachmentOf({ member: { id: "ann", verified: false } }));
    const cat = r.rig.connect(attachmentOf({ member: { id: "cat", verified: true } }));
    r.presence.restore(ann.cursor);
    r.presence.restore(cat.cursor);
    expect(r.presence.count).toBe(2);
    const bob = r.join("bob");
    await r.rig.settled(ann, cat, bob);
    expect(actions(ann.peer)).toEqual(["join:bob:3"]);
    expect(actions(cat.peer)).toEqual(["join:bob:3"]);
    expect(lastSync(bob.peer)?.members).toEqual([
      { id: "ann", connections: 1, verified: false },
      { id: "cat", connections: 1, verified: true },
      { id: "bob", connections: 1, verified: true },
    ]);
  });
});

describe("leaving", () => {
  it("announces a member as leaving only after the leave delay without a socket", async () => {
    const DELAY = 80;
    const r = room({ leaveDelayMs: DELAY });
    const ann = r.join("ann");
    const bob = r.join("bob");
    const leftAt = Date.now();
    r.leave(bob);
    // Still a member during the delay, with no socket.
    expect(r.presence.count).toBe(2);
    expect(r.members.page(10, null, 1).members.find((m) => m.id === "bob")?.connections).toBe(0);
    await ann.peer.waitFor((p) => actions(p).length === 3, "the leave");
    expect(Date.now() - leftAt).toBeGreaterThanOrEqual(DELAY);
    expect(actions(ann.peer)).toEqual(["sync:[ann]:1", "join:bob:2", "leave:bob:1"]);
    expect(r.presence.count).toBe(1);
  });

  it("tells nobody anything when a member comes back within the delay", async () => {
    const r = room({ leaveDelayMs: 40 });
    const ann = r.join("ann");
    const bob = r.join("bob");
    // A reload: the old socket closes, the new one opens at once.
    r.leave(bob);
    const again = r.join("bob");
    // Past the delay the member is still here: the leave was called off.
    await sleep(100);
    await r.rig.settled(ann, again);
    expect(actions(ann.peer)).toEqual(["sync:[ann]:1", "join:bob:2"]);
    expect(actions(again.peer)).toEqual(["sync:[ann,bob]:2"]);
    expect(r.presence.count).toBe(2);
  });
});

describe("the member cap", () => {
  it("switches everyone to counts past PRESENCE_MAX_MEMBERS, and back to members at the cap", async () => {
    const r = room({ maxMembers: 2, leaveDelayMs: 20, countIntervalMs: 20 });
    const a = r.join("a");
    const b = r.join("b");
    // The third member: a picture of the count only, for everyone.
    const c = r.join("c");
    await r.rig.settled(a, b, c);
    expect(actions(a.peer)).toEqual(["sync:[a]:1", "join:b:2", "sync:-:3"]);
    expect(actions(b.peer)).toEqual(["sync:[a,b]:2", "sync:-:3"]);
    expect(actions(c.peer)).toEqual(["sync:-:3"]);

    // Above the cap, joins and leaves are counts, at most once per interval.
    const d = r.join("d");
    await a.peer.waitFor((p) => actions(p).includes("count:4"), "the count of 4");
    await r.rig.settled(d);
    expect(actions(d.peer)).toEqual(["sync:-:4", "count:4"]);
    r.leave(d);
    await a.peer.waitFor((p) => actions(p).includes("count:3"), "the count of 3");

    // Back at the cap: members again, for everyone still here.
    r.leave(c);
    await a.peer.waitFor((p) => actions(p).at(-1) === "sync:[a,b]:2", "members again");
    await b.peer.waitFor((p) => actions(p).at(-1) === "sync:[a,b]:2", "members again");
    // And under it, leaves are leaves.
    r.leave(b);
    await a.peer.waitFor((p) => actions(p).at(-1) === "leave:b:1", "the leave of b");
    expect(actions(a.peer)).toEqual(["sync:[a]:1", "join:b:2", "sync:-:3", "count:4", "count:3", "sync:[a,b]:2", "leave:b:1"]);
  });

  it("sends a count at most once per interval, and none when the count is back where it was last sent", async () => {
    const INTERVAL = 100;
    const r = room({ maxMembers: 1, leaveDelayMs: 5, countIntervalMs: INTERVAL });
    const a = r.join("a");
    r.join("b");
    // The first count above the cap goes out at once.
    r.join("c");
    await a.peer.waitFor((p) => actions(p).includes("count:3"), "the count of 3");
    const sentAt = Date.now();
    // Within the interval a fourth member comes and goes: 4, then 3 again, the count last sent.
    const d = r.join("d");
    r.leave(d);
    await sleep(INTERVAL + 50);
    await r.rig.settled(a);
    expect(Date.now() - sentAt).toBeGreaterThanOrEqual(INTERVAL);
    expect(actions(a.peer)).toEqual(["sync:[a]:1", "sync:-:2", "count:3"]);
  });
});

describe("flow control", () => {
  it("marks a socket without window room stale, skips its events, and resyncs it when an ack makes room", async () => {
    const WINDOW = 200;
    const r = room({}, WINDOW);
    const slow = r.join("slow");
    // A message larger than the window fills it until acknowledged.
    const { message } = r.rig.publish("m".repeat(WINDOW));
    expect(slow.socket.window.hasPresenceRoom(WINDOW)).toBe(false);
    const bob = r.join("bob");
    const cat = r.join("cat");
    expect(slow.cursor.presenceStale).toBe(true);
    await r.rig.settled(slow, bob, cat);
    expect(actions(slow.peer)).toEqual(["sync:[slow]:1"]);
    // The others heard of each other as usual.
    expect(actions(bob.peer)).toEqual(["sync:[slow,bob]:2", "join:cat:3"]);

    // The ack frees the window: one fresh picture instead of the two joins it missed.
    expect(r.rig.delivery.ack(slow.cursor, message.seq, message.tag, Date.now())).toBe("released");
    expect(slow.cursor.presenceStale).toBe(false);
    await r.rig.settled(slow);
    expect(actions(slow.peer)).toEqual(["sync:[slow]:1", "sync:[slow,bob,cat]:3"]);
    // A refresh of a socket that missed nothing sends nothing.
    r.presence.refresh(bob.cursor);
    await r.rig.settled(bob);
    expect(actions(bob.peer)).toEqual(["sync:[slow,bob]:2", "join:cat:3"]);
  });
});

describe("pages", () => {
  it("lists members in id order after the cursor, with the next page's cursor until the last", () => {
    const r = room();
    for (const id of ["dan", "ann", "cat", "bob", "eve"]) r.join(id);
    const ids = (page: { members: PresenceMember[] }) => page.members.map((m) => m.id);
    const first = r.members.page(2, null, 7);
    expect(first).toMatchObject({ count: 5, connections: 7, cursor: "bob" });
    expect(ids(first)).toEqual(["ann", "bob"]);
    const second = r.members.page(2, first.cursor, 7);
    expect([ids(second), second.cursor]).toEqual([["cat", "dan"], "dan"]);
    const last = r.members.page(2, second.cursor, 7);
    expect([ids(last), last.cursor]).toEqual([["eve"], null]);
    // A page that ends exactly at the last member has no next page.
    expect(r.members.page(5, null, 7).cursor).toBeNull();
    // A cursor between ids, and one past the end.
    expect(ids(r.members.page(2, "bz", 7))).toEqual(["cat", "dan"]);
    expect(r.members.page(2, "zed", 7)).toMatchObject({ members: [], cursor: null });
  });
});

describe("rooms spread over several objects", () => {
  const member = (id: string, connections = 1) => ({ id, connections, verified: true });

  it("shows the room's roster beside its own members, one member however many objects hold it, and reports its own changes", async () => {
    const changes: Array<[string, LocalMember | null]> = [];
    const r = room({ leaveDelayMs: 20 }, 1 << 20, {
      memberChanged: (id, view) => {
        changes.push([id, view]);
      },
    });
    // Another object holds cat; ann is held here and there.
    r.presence.share({ members: [member("ann"), member("cat")], count: 2 });
    const ann = r.join("ann");
    await r.rig.settled(ann);
    expect(actions(ann.peer)).toEqual(["sync:[ann,cat]:2"]);
    // bob arrives here: a join at once, before the roster has him.
    const bob = r.join("bob");
    await r.rig.settled(ann);
    expect(actions(ann.peer).at(-1)).toBe("join:bob:3");
    // The roster catches up (bob in it): no second join. dan arrives elsewhere: a join.
    r.presence.share({ members: [member("ann"), member("cat"), member("bob"), member("dan")], count: 4 });
    await r.rig.settled(ann, bob);
    expect(actions(ann.peer).slice(-1)).toEqual(["join:dan:4"]);
    // cat leaves elsewhere: a leave once the roster drops it.
    r.presence.share({ members: [member("ann"), member("bob"), member("dan")], count: 3 });
    await r.rig.settled(ann);
    expect(actions(ann.peer).at(-1)).toBe("leave:cat:3");
    // bob leaves here: after the delay he is gone from here, but the roster still has him: no leave yet.
    r.leave(bob);
    await sleep(60);
    await r.rig.settled(ann);
    expect(actions(ann.peer).at(-1)).toBe("leave:cat:3");
    r.presence.share({ members: [member("ann"), member("dan")], count: 2 });
    await r.rig.settled(ann);
    expect(actions(ann.peer).at(-1)).toBe("leave:bob:2");
    expect(changes).toEqual([
      ["ann", { info: undefined, verified: true, connections: 1 }],
      ["bob", { info: undefined, verified: true, connections: 1 }],
      ["bob", { info: undefined, verified: true, connections: 0 }],
      ["bob", null],
    ]);
  });

  it("shows counts while the roster says the room is over its cap, and members again once it is not", async () => {
    const r = room({}, 1 << 20);
    const ann = r.join("ann");
    await r.rig.settled(ann);
    r.presence.share({ members: null, count: 500 });
    await r.rig.settled(ann);
    expect(actions(ann.peer).at(-1)).toBe("sync:-:500");
    r.presence.share({ members: [member("ann"), member("eve")], count: 2 });
    await r.rig.settled(ann);
    expect(actions(ann.peer).at(-1)).toBe("sync:[ann,eve]:2");
  });
});
