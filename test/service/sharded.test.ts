import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { ServerMessage, PresenceEvent, PresenceMember, RoomStats } from "../../protocol";
// The raw client documented in docs/protocol.md, as a client of a sharded room.
import { followRoom as untypedFollowRoom } from "../../docs/examples/raw-client.mjs";
import { adminClient } from "../../local-server/admin.mjs";
import { privateDirOf, startServer, type LocalServer } from "../helpers/server";
import { expectSeqs, publish, roomStats, TestSocket } from "../helpers/socket";
import { readUntil, sleep } from "../helpers/wait";

const followRoom = untypedFollowRoom as unknown as (
  url: string,
  onMessage: (message: ServerMessage) => void,
  options: { WebSocket: unknown; onPresence?: (event: PresenceEvent) => void },
) => { close(): void };

// Two sockets per object: a handful of sockets makes a root and several leaves.
const SHARD = 2;
const WINDOW = 8 * 1024;
const RETIRE_MS = 1500;
let server: LocalServer;

beforeAll(async () => {
  server = await startServer({
    vars: {
      ROOM_SHARD_SOCKETS: String(SHARD),
      ROOM_LEAF_RETIRE_MS: String(RETIRE_MS),
      WINDOW_BYTES: String(WINDOW),
      PRESENCE_COUNT_INTERVAL_MS: "200",
      PRESENCE_LEAVE_DELAY_MS: "300",
    },
  });
});

afterAll(async () => {
  await server?.stop();
});

/** Sockets per object: [root, leaf 0, leaf 1, ...] (a leaf that is not there counts 0). */
function spread(stats: RoomStats): number[] {
  const out = [stats.rootConnections ?? stats.connections];
  for (const leaf of stats.leaves ?? []) out[leaf.index + 1] = leaf.connections;
  return Array.from(out, (n) => n ?? 0);
}

/** Opens a socket and tells which object took it: -1 for the root, else the leaf's index. */
async function openOn(room: string, query = ""): Promise<{ socket: TestSocket; on: number }> {
  const before = (await fetch(`${server.url}/rooms/${room}`)).status === 404 ? [0] : spread(await roomStats(server.url, room));
  const socket = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws${query}`);
  await socket.waitFor((s) => s.events.length > 0, 5000, "the welcome");
  const after = spread(await roomStats(server.url, room));
  const grew = after.findIndex((n, i) => n > (before[i] ?? 0));
  return { socket, on: grew - 1 };
}

function memberUrl(room: string, member: string): string {
  return `${server.wsUrl}/rooms/${room}/ws?member=${member}`;
}

describe("a room past ROOM_SHARD_SOCKETS", () => {
  it("places further sockets on leaves, and every socket gets every message once, in order, under concurrent publishers", async () => {
    const room = "sharded-order";
    const opened: { socket: TestSocket; on: number }[] = [];
    for (let i = 0; i < 9; i++) opened.push(await openOn(room));
    const stats = await roomStats(server.url, room);
    // The root keeps its two; the rest is spread over leaves, none above the threshold.
    expect(opened.slice(0, SHARD).map((o) => o.on)).toEqual([-1, -1]);
    expect(stats.rootConnections).toBe(SHARD);
    expect(stats.connections).toBe(9);
    expect(stats.leaves?.length).toBeGreaterThanOrEqual(4);
    expect(spread(stats).every((n) => n <= SHARD)).toBe(true);
    expect(opened.slice(SHARD).every((o) => o.on >= 0)).toBe(true);

    // Three HTTP publishers and two socket publishers (one on the root, one on a leaf) at once,
    // with messages large enough that sockets fill their window and catch up from their leaf's ring.
    const socketsOnLeaf = opened.filter((o) => o.on >= 0).map((o) => o.socket);
    const publishers = [opened[0]?.socket as TestSocket, socketsOnLeaf[0] as TestSocket];
    const answered: number[] = [];
    const http = Array.from({ length: 3 }, async (_, p) => {
      for (let i = 0; i < 40; i++) answered.push((await publish(server.url, room, { p, i, pad: "x".repeat(900) })).body.seq);
    });
    for (const [p, socket] of publishers.entries()) {
      for (let i = 0; i < 20; i++) socket.send({ type: "publish", id: `s${p}-${i}`, data: { socket: p, i } });
    }
    await Promise.all(http);
    const total = 3 * 40 + 2 * 20;
    for (const { socket } of opened) await socket.waitForMessages(total, 20_000);
    for (const { socket } of opened) expectSeqs(socket.messages, 1, total);
    // Each socket publish was answered with its own seq: every seq was handed out exactly once.
    for (const socket of publishers) {
      await socket.waitFor((s) => s.events.filter((e) => e.type === "published").length === 20, 10_000, "publish answers");
      for (const e of socket.events) if (e.type === "published") answered.push(e.seq);
    }
    expect(answered.sort((a, b) => a - b)).toEqual(Array.from({ length: total }, (_, i) => i + 1));

    // Stats are summed over the objects, with one line per leaf; every delivery is counted once.
    const after = await readUntil(
      () => roomStats(server.url, room),
      (s) => s.deliveries === 9 * total,
      { what: "deliveries summed over the leaves" },
    );
    expect(after.seq).toBe(total);
    expect(after.leaves?.every((leaf) => leaf.seq === total && leaf.reachable)).toBe(true);
    expect(after.leaves?.reduce((sum, leaf) => sum + leaf.counters.deliveries, 0)).toBe((9 - SHARD) * total);
    expect(after.historyRowsWritten).toBeLessThanOrEqual(total);
    for (const { socket } of opened) socket.close();
  });

  it("answers a keyed publish retried from a socket on a leaf with the first seq, and rewinds a socket the edge places on a leaf", async () => {
    const room = "sharded-keys";
    const opened: { socket: TestSocket; on: number }[] = [];
    for (let i = 0; i < 4; i++) opened.push(await openOn(room));
    const onRoot = opened.find((o) => o.on < 0)!.socket;
    const onLeaf = opened.find((o) => o.on >= 0)!.socket;
    onLeaf.send({ type: "publish", id: "a", key: "k-1", data: { n: 1 } });
    await onLeaf.waitFor((s) => s.events.some((e) => e.type === "published"), 10_000, "the first answer");
    // The root checks every key: a leaf socket's retry, and the same key from a root socket (sockets share one space).
    onLeaf.send({ type: "publish", id: "b", key: "k-1", data: { n: 1 } });
    onRoot.send({ type: "publish", id: "c", key: "k-1", data: { n: 1 } });
    onLeaf.send({ type: "publish", id: "d", key: "k-1", data: { n: 2 } });
    const answers = (socket: TestSocket) => socket.events.filter((e) => e.type === "published" || e.type === "error");
    await onLeaf.waitFor((s) => answers(s).length === 3, 10_000, "the leaf socket's answers");
    await onRoot.waitFor((s) => answers(s).length === 1, 10_000, "the root socket's answer");
    expect(answers(onLeaf)).toEqual([
      { type: "published", id: "a", seq: 1 },
      { type: "published", id: "b", seq: 1, duplicate: true },
      expect.objectContaining({ type: "error", id: "d", code: "conflict" }),
    ]);
    expect(answers(onRoot)).toEqual([{ type: "published", id: "c", seq: 1, duplicate: true }]);
    for (let i = 2; i <= 6; i++) await publish(server.url, room, { n: i });
    for (const { socket } of opened) {
      await socket.waitForMessages(6, 10_000);
      expectSeqs(socket.messages, 1, 6);
    }
    const rewound = await openOn(room, "?rewind=3");
    expect(rewound.on).toBeGreaterThanOrEqual(0);
    await rewound.socket.waitForMessages(3, 10_000);
    expect(rewound.socket.events[0]).toMatchObject({ type: "welcome", seq: 3 });
    expect(rewound.socket.messages.map((m) => m.seq)).toEqual([4, 5, 6]);
    for (const { socket } of [...opened, rewound]) socket.close();
  });

  it("resumes a socket on another leaf, one that opened after the messages and fetches them from the root once for many resumers", async () => {
    const room = "sharded-resume";
    const first: { socket: TestSocket; on: number }[] = [];
    for (let i = 0; i < 4; i++) first.push(await openOn(room));
    const leafSocket = first.find((o) => o.on === 0);
    if (!leafSocket) throw new Error("no socket on leaf 0");
    for (let i = 1; i <= 5; i++) await publish(server.url, room, { i });
    await leafSocket.socket.waitForMessages(5);
    const epoch = (leafSocket.socket.events[0] as { epoch: string }).epoch;
    leafSocket.socket.close();
    await leafSocket.socket.closed;
    for (let i = 6; i <= 10; i++) await publish(server.url, room, { i });
    // Leaf 0 gets its vacancy filled, so the resume lands on a leaf that opens now, after messages 6-10.
    const filler = await openOn(room);
    expect(filler.on).toBe(0);
    const rowsBefore = (await roomStats(server.url, room)).historyRowsRead;
    const resumed = await openOn(room, `?since=5&epoch=${epoch}`);
    expect(resumed.on).toBeGreaterThan(0);
    await resumed.socket.waitForMessages(5);
    expectSeqs(resumed.socket.messages, 6, 10);
    // Many resumers from the same point on the same leaf: the leaf fetched 6-10 once and serves them all.
    const storm = await Promise.all(Array.from({ length: 8 }, () => TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?since=5&epoch=${epoch}`)));
    for (const socket of storm) {
      await socket.waitForMessages(5);
      expectSeqs(socket.messages, 6, 10);
    }
    const stats = await roomStats(server.url, room);
    const leavesWithResumers = (stats.leaves ?? []).filter((leaf) => leaf.index > 0 && leaf.connections > 0).length;
    // Five messages are five rows; one fetch per leaf that took resumers, not one per socket (9 × 5 = 45).
    expect(stats.historyRowsRead - rowsBefore).toBeLessThanOrEqual(5 * leavesWithResumers);
    expect(stats.historyRowsRead - rowsBefore).toBeLessThan(45);
    // A resume that names another history is told, on a leaf as on a room.
    const stale = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?since=3&epoch=not-this-one`);
    await stale.waitFor((s) => s.events.some((e) => e.type === "lost"), 5000, "lost epoch");
    expect(stale.events.find((e) => e.type === "lost")).toMatchObject({ reason: "epoch", from: 1, to: 10 });
    for (const socket of [...first.map((o) => o.socket), filler.socket, resumed.socket, ...storm, stale]) socket.close();
  });

  it("loses only a killed leaf's sockets, which reconnect and resume with nothing lost or doubled", async () => {
    const room = "sharded-crash";
    const received: ServerMessage[][] = [];
    let connections = 0;
    class CountingWebSocket extends WebSocket {
      constructor(url: string | URL) {
        super(url);
        connections += 1;
      }
    }
    const followers = [];
    for (let i = 0; i < 6; i++) {
      const mine: ServerMessage[] = [];
      received.push(mine);
      followers.push(followRoom(`${server.wsUrl}/rooms/${room}/ws`, (m) => mine.push(m), { WebSocket: CountingWebSocket }));
      await readUntil(() => fetch(`${server.url}/rooms/${room}`).then((r) => (r.status === 200 ? r.json() : { connections: 0 })), (s) => (s as RoomStats).connections === i + 1, { what: "the follower" });
    }
    const before = await roomStats(server.url, room);
    const victim = before.leaves?.find((leaf) => leaf.connections > 0);
    if (!victim) throw new Error("no leaf holds a socket");
    const privateDir = privateDirOf(server.workerdPid);
    if (!privateDir) throw new Error("no admin socket");
    const admin = adminClient(join(privateDir, "admin.sock"));
    const N = 150;
    try {
      for (let i = 1; i <= N; i++) {
        await publish(server.url, room, { i });
        if (i === 50) {
          const res = await admin.call("POST", "/leaf-abort", { room, index: victim.index });
          expect(res.json).toEqual({ aborted: true });
        }
        await sleep(10);
      }
    } finally {
      admin.close();
    }
    for (const mine of received) {
      await readUntil(async () => mine.length, (n) => n >= N, { what: "every message after the crash", timeoutMs: 20_000 });
      expectSeqs(mine, 1, N);
    }
    // The killed leaf's sockets came back (a new connection each); the others never left.
    expect(connections).toBe(6 + victim.connections);
    const after = await roomStats(server.url, room);
    expect(after.connections).toBe(6);
    for (const follower of followers) follower.close();
  });

  it("counts a member once however many objects hold its sockets, and shows the room's members", async () => {
    const room = "sharded-members";
    const sockets: TestSocket[] = [];
    // alice on the root and on a leaf, bob and an anonymous socket on leaves.
    for (const who of ["alice", "carol", "alice", "bob"]) sockets.push(await TestSocket.open(memberUrl(room, who)));
    sockets.push(await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`));
    const page = await readUntil(
      () => fetch(`${server.url}/rooms/${room}/presence`).then((r) => r.json() as Promise<{ count: number; connections: number; members: PresenceMember[] }>),
      // The anonymous socket changes no member: its leaf reports it a moment later than the members.
      (p) => p.count === 3 && p.members.find((m) => m.id === "alice")?.connections === 2 && p.connections === 5,
      { what: "three members, alice with two sockets, five sockets" },
    );
    expect(page.connections).toBe(5);
    expect(page.members.map((m) => m.id)).toEqual(["alice", "bob", "carol"]);
    const stats = await roomStats(server.url, room);
    expect(stats.members).toBe(3);
    expect(stats.leaves?.length).toBeGreaterThanOrEqual(1);
    // Every socket, on the root or a leaf, ends with the room's count (counts, not lists, once sharded).
    for (const socket of sockets) {
      await socket.waitFor((s) => s.presence.at(-1)?.count === 3, 5000, "the room's count");
    }
    // Within the member cap every object's sockets see the room's members, wherever they are held.
    await (sockets[3] as TestSocket).waitFor((s) => s.presence.some((e) => e.action === "sync" && e.members !== undefined), 5000, "a member list on a leaf");
    // The room is one room to the registry and to broadcasts.
    const list = (await (await fetch(`${server.url}/rooms?prefix=sharded-members`)).json()) as { rooms: { room: string }[] };
    expect(list.rooms.map((r) => r.room)).toEqual([room]);
    const broadcast = await fetch(`${server.url}/broadcast`, { method: "POST", body: JSON.stringify({ data: "all of you", rooms: [room] }) });
    expect(broadcast.status).toBe(200);
    for (const socket of sockets) await socket.waitFor((s) => s.messages.some((m) => m.data === "all of you"), 5000, "the broadcast");
    // bob leaves: after the leave delay the room counts two.
    (sockets[3] as TestSocket).close();
    for (const socket of [sockets[0], sockets[4]] as TestSocket[]) await socket.waitFor((s) => s.presence.at(-1)?.count === 2, 5000, "bob gone");
    for (const socket of sockets) socket.close();
  });

  it("keeps delivering once the root and its leaves have hibernated: the root finds its leaves, the leaves their cursors", async () => {
    const room = "sharded-hibernate";
    const sockets: TestSocket[] = [];
    for (let i = 0; i < 5; i++) sockets.push(await TestSocket.open(memberUrl(room, `m${i}`)));
    for (let i = 1; i <= 2; i++) await publish(server.url, room, { i });
    for (const socket of sockets) await socket.waitForMessages(2);
    const before = await roomStats(server.url, room);
    expect(before.leaves?.length).toBeGreaterThanOrEqual(2);
    // Longer idle than the runtime's eviction delay after the last timers (counters, leaf marks);
    // heartbeats are answered by the runtime and wake nobody.
    for (let i = 0; i < 8; i++) {
      await sleep(2500);
      for (const socket of sockets) socket.send("ping");
    }
    const answer = await publish(server.url, room, { i: 3 });
    expect(answer.body.seq).toBe(3);
    for (const socket of sockets) {
      await socket.waitForMessages(3);
      expectSeqs(socket.messages, 1, 3);
      // Acks of what was sent before the leaf slept are not taken for lies.
      expect(socket.closeInfo).toBeNull();
    }
    const after = await roomStats(server.url, room);
    expect(after.instanceStartedAt).toBeGreaterThan(before.instanceStartedAt + 10_000);
    for (const leaf of after.leaves ?? []) {
      const earlier = before.leaves?.find((l) => l.index === leaf.index);
      expect(leaf.instanceStartedAt).toBeGreaterThan((earlier?.instanceStartedAt ?? 0) + 10_000);
    }
    expect(after.connections).toBe(5);
    const page = await readUntil(
      () => fetch(`${server.url}/rooms/${room}/presence`).then((r) => r.json() as Promise<{ count: number }>),
      (p) => p.count === 5,
      { what: "the members of every leaf, asked again by the woken root" },
    );
    expect(page.count).toBe(5);
    for (const socket of sockets) socket.close();
  }, 40_000);

  it("keeps placing on leaves once sharded, so a reconnect costs the root a placement only, and counts what the root is asked", async () => {
    const room = "sharded-requests";
    const opened: { socket: TestSocket; on: number }[] = [];
    for (let i = 0; i < 4; i++) opened.push(await openOn(room));
    expect(opened.map((o) => o.on >= 0)).toEqual([false, false, true, true]);
    // A root socket goes: the room is still above half the threshold, so its replacement goes to a leaf.
    (opened[0] as { socket: TestSocket }).socket.close();
    await readUntil(() => roomStats(server.url, room), (s) => s.rootConnections === 1, { what: "the root to see its socket go" });
    const again = await openOn(room);
    expect(again.on).toBeGreaterThanOrEqual(0);
    for (let i = 0; i < 3; i++) await publish(server.url, room, { i });
    const stats = await readUntil(() => roomStats(server.url, room), (s) => s.deliveries === 4 * 3, { what: "every delivery" });
    expect(stats.rootRequests?.upgrades).toBe(2);
    // Placements hand out grants the edge reuses: at most one per socket placed on a leaf.
    expect(stats.rootRequests?.placements).toBeGreaterThanOrEqual(1);
    expect(stats.rootRequests?.placements).toBeLessThanOrEqual(3);
    expect(stats.rootRequests?.publishes).toBe(3);
    // Each leaf got each flush at least once: one push per flush per leaf, or fewer when flushes merged.
    expect(stats.leafPushes).toBeGreaterThanOrEqual(1);
    expect(stats.leafPushes).toBeLessThanOrEqual(3 * (stats.leaves?.length ?? 0) + (stats.leaves?.length ?? 0));
    expect(stats.rootRequests?.reads).toBeGreaterThan(0);
    for (const o of [...opened.slice(1), again]) o.socket.close();
  });

  it("grows past the threshold and shrinks back to one object once its leaves are empty", async () => {
    const room = "sharded-shrink";
    const rootSockets = [await TestSocket.open(memberUrl(room, "r1")), await TestSocket.open(memberUrl(room, "r2"))];
    const leafSockets = [];
    for (let i = 0; i < 3; i++) leafSockets.push(await TestSocket.open(memberUrl(room, `l${i}`)));
    const grown = await roomStats(server.url, room);
    expect(grown.rootConnections).toBe(2);
    expect(grown.leaves?.length).toBeGreaterThanOrEqual(2);
    await publish(server.url, room, "while sharded");
    for (const socket of [...rootSockets, ...leafSockets]) await socket.waitForMessages(1);
    // Sharded, the root's sockets see the members of every object (the room is within its member cap): 5 of them.
    const joinedIds = (s: TestSocket) => new Set(s.presence.flatMap((e) => (e.action === "join" ? [e.member.id] : e.action === "sync" ? (e.members ?? []).map((m) => m.id) : [])));
    await (rootSockets[0] as TestSocket).waitFor((s) => s.presence.at(-1)?.count === 5 && ["l0", "l1", "l2"].every((id) => joinedIds(s).has(id)), 5000, "the leaves' members");

    for (const socket of leafSockets) socket.close();
    (rootSockets[1] as TestSocket).close();
    const shrunk = await readUntil(() => roomStats(server.url, room), (s) => s.leaves === undefined, { what: "the leaves to retire", timeoutMs: RETIRE_MS + 10_000 });
    expect(shrunk.connections).toBe(1);
    expect(shrunk.rootConnections).toBeUndefined();
    // One object again: the remaining socket saw every other member leave, and the next socket stays on the root.
    const remaining = rootSockets[0] as TestSocket;
    await remaining.waitFor((s) => s.presence.at(-1)?.count === 1, 5000, "the others' leaves");
    const left = new Set(remaining.presence.flatMap((e) => (e.action === "leave" ? [e.member.id] : [])));
    expect([...left].sort()).toEqual(["l0", "l1", "l2", "r2"]);
    const next = await openOn(room);
    expect(next.on).toBe(-1);
    await publish(server.url, room, "one object again");
    for (const socket of [remaining, next.socket]) await socket.waitFor((s) => s.messages.some((m) => m.data === "one object again"), 5000, "the message");
    expectSeqs(remaining.messages, 1, 2);
    remaining.close();
    next.socket.close();
  });
});
