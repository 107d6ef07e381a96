import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { PresenceEvent, PresenceMember } from "../../protocol";
import { MuxSocket } from "../helpers/multiplex";
import { startServer, type LocalServer } from "../helpers/server";
import { publish, refusedUpgrade, roomStats, TestSocket } from "../helpers/socket";
import { sleep, until } from "../helpers/wait";

const LEAVE_DELAY_MS = 1500;
const MAX_MEMBERS = 3;
const COUNT_INTERVAL_MS = 300;
let server: LocalServer;

beforeAll(async () => {
  server = await startServer({
    vars: {
      PRESENCE_LEAVE_DELAY_MS: String(LEAVE_DELAY_MS),
      PRESENCE_MAX_MEMBERS: String(MAX_MEMBERS),
      PRESENCE_COUNT_INTERVAL_MS: String(COUNT_INTERVAL_MS),
    },
  });
});

afterAll(async () => {
  await server?.stop();
});

function memberUrl(room: string, member: string, info?: unknown): string {
  const url = new URL(`${server.wsUrl}/rooms/${room}/ws`);
  url.searchParams.set("member", member);
  if (info !== undefined) url.searchParams.set("info", JSON.stringify(info));
  return url.toString();
}

/** Presence events without their tags (random), for comparing. */
function actions(socket: TestSocket): string[] {
  return socket.presence.map((e) => (e.action === "join" || e.action === "leave" ? `${e.action}:${e.member.id}:${e.count}` : `${e.action}:${e.count}`));
}

function lastSync(socket: TestSocket): Extract<PresenceEvent, { action: "sync" }> | undefined {
  return socket.presence.filter((e): e is Extract<PresenceEvent, { action: "sync" }> => e.action === "sync").at(-1);
}

async function presencePage(room: string, query = ""): Promise<{ status: number; body: { count: number; connections: number; members: PresenceMember[]; cursor: string | null } }> {
  const res = await fetch(`${server.url}/rooms/${room}/presence${query}`);
  return { status: res.status, body: (await res.json()) as never };
}

describe("presence events", () => {
  it("gives a new socket the picture first, then joins and leaves in order, with counts", async () => {
    const room = "presence-order";
    const alice = await TestSocket.open(memberUrl(room, "alice", { name: "Alice" }));
    await alice.waitFor((s) => s.presence.length >= 1, 5000, "alice's sync");
    // The first events: welcome, then the picture (alice herself).
    expect(alice.events[0]?.type).toBe("welcome");
    expect(alice.events[1]).toMatchObject({
      type: "presence",
      action: "sync",
      count: 1,
      members: [{ id: "alice", info: { name: "Alice" }, connections: 1, verified: false }],
    });

    const bob = await TestSocket.open(memberUrl(room, "bob"));
    await bob.waitFor((s) => s.presence.length >= 1, 5000, "bob's sync");
    expect(lastSync(bob)?.members?.map((m) => m.id).sort()).toEqual(["alice", "bob"]);
    await alice.waitFor((s) => s.presence.length >= 2, 5000, "the join");
    expect(alice.presence[1]).toMatchObject({ action: "join", count: 2, member: { id: "bob", connections: 1, verified: false } });

    // A published message in between: presence and messages share the socket, in order.
    await publish(server.url, room, "hello");
    await alice.waitForMessages(1);

    bob.close();
    await alice.waitFor((s) => s.presence.length >= 3, LEAVE_DELAY_MS + 5000, "the leave");
    expect(actions(alice)).toEqual(["sync:1", "join:bob:2", "leave:bob:1"]);
    expect(alice.presence[2]).toMatchObject({ member: { id: "bob" } });
    // Presence events are not messages: no seq, nothing in history.
    expect(alice.presence.every((e) => !("seq" in e) && typeof e.tag === "number")).toBe(true);
    const stats = await roomStats(server.url, room);
    expect(stats.seq).toBe(1);
    expect(stats.members).toBe(1);
    alice.close();
  });

  it("gives a resuming socket, a rewinding one and a resuming subscription the picture before the messages they catch up", async () => {
    const room = "presence-before-catch-up";
    for (let i = 1; i <= 5; i++) await publish(server.url, room, { i });
    const kinds = (events: { type: string; action?: string; seq?: number }[]) =>
      events.filter((e) => e.type !== "subscribed").map((e) => (e.type === "message" ? `message:${e.seq}` : e.type === "presence" ? `presence:${e.action}` : e.type));
    const resumed = await TestSocket.open(`${memberUrl(room, "rita")}&since=2`);
    await resumed.waitForMessages(3);
    expect(kinds(resumed.events)).toEqual(["welcome", "presence:sync", "message:3", "message:4", "message:5"]);
    const rewound = await TestSocket.open(`${memberUrl(room, "wanda")}&rewind=2`);
    await rewound.waitForMessages(2);
    expect(kinds(rewound.events).slice(0, 4)).toEqual(["welcome", "presence:sync", "message:4", "message:5"]);
    const mux = await MuxSocket.open(`${server.wsUrl}/ws?member=max`);
    mux.subscribe(room, { since: 1 });
    await mux.waitForMessages(room, 4);
    expect(kinds(mux.events).slice(0, 6)).toEqual(["welcome", "presence:sync", "message:2", "message:3", "message:4", "message:5"]);
    for (const s of [resumed, rewound, mux]) s.close();
  });

  it("counts a member's tabs as one member, and a tab closing is not a leave", async () => {
    const room = "presence-tabs";
    const watcher = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    const tab1 = await TestSocket.open(memberUrl(room, "carol"));
    await watcher.waitFor((s) => s.presence.length >= 2, 5000, "carol's join");
    const tab2 = await TestSocket.open(memberUrl(room, "carol"));
    await tab2.waitFor((s) => s.presence.length >= 1, 5000, "tab 2's sync");
    expect(lastSync(tab2)).toMatchObject({ count: 1, members: [{ id: "carol", connections: 2 }] });
    const page = await presencePage(room);
    expect(page.body).toEqual({ count: 1, connections: 3, members: [{ id: "carol", connections: 2, verified: false }], cursor: null });

    tab1.close();
    await sleep(LEAVE_DELAY_MS + 700);
    // The watcher (not a member itself) saw one join and nothing else.
    expect(actions(watcher)).toEqual(["sync:0", "join:carol:1"]);
    expect((await presencePage(room)).body.members).toEqual([{ id: "carol", connections: 1, verified: false }]);
    tab2.close();
    await watcher.waitFor((s) => s.presence.length >= 3, LEAVE_DELAY_MS + 5000, "carol's leave");
    expect(actions(watcher)).toEqual(["sync:0", "join:carol:1", "leave:carol:0"]);
    watcher.close();
  });

  it("announces a leave only after the leave delay, and not at all when the member is back within it", async () => {
    const room = "presence-delay";
    const watcher = await TestSocket.open(memberUrl(room, "watcher"));
    const dave = await TestSocket.open(memberUrl(room, "dave"));
    await watcher.waitFor((s) => s.presence.length >= 2, 5000, "dave's join");

    // A reload: closed and back well within the delay.
    dave.close();
    await dave.closed;
    await sleep(200);
    const back = await TestSocket.open(memberUrl(room, "dave"));
    await back.waitFor((s) => s.presence.length >= 1, 5000, "the reload's sync");
    await sleep(LEAVE_DELAY_MS + 500);
    expect(actions(watcher)).toEqual(["sync:1", "join:dave:2"]);

    // Gone for good: nothing before the delay, the leave after it.
    const closedAt = Date.now();
    back.close();
    await sleep(LEAVE_DELAY_MS / 2);
    expect(watcher.presence).toHaveLength(2);
    await watcher.waitFor((s) => s.presence.length >= 3, LEAVE_DELAY_MS + 5000, "dave's leave");
    expect(Date.now() - closedAt).toBeGreaterThanOrEqual(LEAVE_DELAY_MS);
    expect(actions(watcher)).toEqual(["sync:1", "join:dave:2", "leave:dave:1"]);
    watcher.close();
  });

  it("switches everyone to counts above the member cap, and back to members below it", async () => {
    const room = "presence-cap";
    const sockets: TestSocket[] = [];
    for (const id of ["m1", "m2", "m3"]) sockets.push(await TestSocket.open(memberUrl(room, id)));
    const first = sockets[0] as TestSocket;
    await first.waitFor((s) => s.presence.length >= 3, 5000, "two joins");
    expect(actions(first)).toEqual(["sync:1", "join:m2:2", "join:m3:3"]);

    // The fourth member crosses the cap: a picture with only the count, for everyone.
    sockets.push(await TestSocket.open(memberUrl(room, "m4")));
    await first.waitFor((s) => s.presence.length >= 4, 5000, "the resync");
    expect(first.presence[3]).toMatchObject({ action: "sync", count: 4 });
    expect(first.presence[3]).not.toHaveProperty("members");
    const fourth = sockets[3] as TestSocket;
    await fourth.waitFor((s) => s.presence.length >= 1, 5000, "m4's sync");
    expect(fourth.presence[0]).toMatchObject({ action: "sync", count: 4 });
    expect(fourth.presence[0]).not.toHaveProperty("members");

    // Above the cap: counts, at most one per interval, only when it changed.
    sockets.push(await TestSocket.open(memberUrl(room, "m5")));
    sockets.push(await TestSocket.open(memberUrl(room, "m6")));
    await first.waitFor((s) => s.presence.at(-1)?.count === 6, 5000, "the count of 6");
    const counts = first.presence.slice(4);
    expect(counts.every((e) => e.action === "count")).toBe(true);
    expect(counts.length).toBeLessThanOrEqual(2);

    // The HTTP view still lists every member.
    const page = await presencePage(room, "?limit=4");
    expect(page.body.count).toBe(6);
    expect(page.body.members.map((m) => m.id)).toEqual(["m1", "m2", "m3", "m4"]);
    expect(page.body.cursor).toBe("m4");
    const rest = await presencePage(room, `?limit=4&cursor=${page.body.cursor}`);
    expect(rest.body.members.map((m) => m.id)).toEqual(["m5", "m6"]);
    expect(rest.body.cursor).toBeNull();

    // Back to the cap: the members again.
    for (const s of sockets.splice(3)) s.close();
    await first.waitFor((s) => s.presence.some((e, i) => i > 4 && e.action === "sync" && e.count === 3), LEAVE_DELAY_MS + 5000, "the resync at 3");
    expect(lastSync(first)?.members?.map((m) => m.id).sort()).toEqual(["m1", "m2", "m3"]);
    for (const s of sockets) s.close();
  });

  it("ignores identity headers a client sends itself: only the edge names members", async () => {
    const room = "presence-forged";
    const ws = new WebSocket(`${server.wsUrl}/rooms/${room}/ws`, {
      headers: { "x-member-id": "mallory", "x-member-verified": "true", "x-member-info": encodeURIComponent('{"admin":true}') },
    });
    const frames: string[] = [];
    ws.on("message", (d) => frames.push(d.toString()));
    await new Promise((resolve) => ws.once("open", resolve));
    await until(() => frames.some((f) => f.includes('"presence"')), { timeoutMs: 5000, everyMs: 20, what: "the presence sync" });
    // The welcome, then the room's picture (the two may share a frame).
    const events = frames.flatMap((f) => [JSON.parse(f) as { type: string }].flat());
    expect(events[1]).toMatchObject({
      type: "presence",
      action: "sync",
      count: 0,
      members: [],
    });
    ws.close();
  });

  it("refuses bad member names and data in open mode with 400 and a JSON body", async () => {
    const room = "presence-bad";
    const cases: [string, RegExp][] = [
      ["?member=x&info=not-json", /not JSON/],
      [`?member=x&info=${encodeURIComponent("[1,2]")}`, /JSON object/],
      [`?member=x&info=${encodeURIComponent(JSON.stringify({ pad: "z".repeat(1100) }))}`, /1024 bytes/],
      ["?info=%7B%7D", /needs member/],
      [`?member=${"m".repeat(300)}`, /1-256/],
    ];
    for (const [query, message] of cases) {
      const res = await refusedUpgrade(`${server.wsUrl}/rooms/${room}/ws${query}`);
      expect(res.status, query).toBe(400);
      const body = JSON.parse(res.body) as { error: string; message: string };
      expect(body.error).toBe("bad_request");
      expect(body.message).toMatch(message);
    }
    // Nothing was created for them.
    expect((await presencePage(room)).status).toBe(404);
  });
});
