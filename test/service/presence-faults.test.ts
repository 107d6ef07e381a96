import { sign } from "hono/jwt";
import { beforeAll, describe, expect, it } from "vitest";
import { CloseCode, type PresenceEvent, type RoomList } from "../../protocol";
import { mintToken } from "../../common/tokens";
import type { LocalServer } from "../helpers/server";
import { managedServers } from "../helpers/servers";
import { publish, roomStats, TestSocket } from "../helpers/socket";
import { sleep } from "../helpers/wait";

const serve = managedServers({ stopAfter: "all" });

/** Keeps sockets alive the way clients do: a ping every `everyMs`. */
function keepAlive(sockets: TestSocket[], everyMs: number): () => void {
  const timer = setInterval(() => {
    for (const s of sockets) if (!s.closeInfo) s.send("ping");
  }, everyMs);
  return () => clearInterval(timer);
}

function actions(socket: TestSocket): string[] {
  return socket.presence.map((e) => (e.action === "join" || e.action === "leave" ? `${e.action}:${e.member.id}:${e.count}` : `${e.action}:${e.count}`));
}

function syncs(socket: TestSocket): Extract<PresenceEvent, { action: "sync" }>[] {
  return socket.presence.filter((e): e is Extract<PresenceEvent, { action: "sync" }> => e.action === "sync");
}

describe("presence under flow control and idleness", () => {
  const WINDOW = 4096;
  const IDLE_SECONDS = 3;
  const LEAVE_DELAY_MS = 500;
  let server: LocalServer;
  const open = (room: string, member: string, info?: unknown, autoAck = true) => {
    const url = new URL(`${server.wsUrl}/rooms/${room}/ws`);
    url.searchParams.set("member", member);
    if (info !== undefined) url.searchParams.set("info", JSON.stringify(info));
    return TestSocket.open(url.toString(), { autoAck });
  };

  beforeAll(async () => {
    server = await serve({
      vars: { WINDOW_BYTES: String(WINDOW), IDLE_TIMEOUT_SECONDS: String(IDLE_SECONDS), PRESENCE_LEAVE_DELAY_MS: String(LEAVE_DELAY_MS) },
    });
  });

  it("holds a socket that stops acknowledging to one window of presence, never holds up its messages, and resyncs it once it acks", async () => {
    const room = "presence-window";
    const watcher = await open(room, "watcher", undefined, false);
    const stop = keepAlive([watcher], 1000);
    const big = { pad: "p".repeat(900) };
    const joined: TestSocket[] = [];
    // Twelve joins of ~1 KB each: three times the watcher's window.
    for (let i = 0; i < 12; i++) joined.push(await open(room, `m${String(i).padStart(2, "0")}`, big));
    await sleep(300);
    const bytes = (e: PresenceEvent) => new TextEncoder().encode(JSON.stringify(e)).length;
    const held = watcher.presence.reduce((sum, e) => sum + bytes(e), 0);
    // The window plus at most one event, not every event.
    expect(watcher.presence.length).toBeLessThan(8);
    expect(held).toBeLessThan(WINDOW + 1200);

    // Messages still get through: presence never fills the message window.
    await publish(server.url, room, "still flowing");
    await watcher.waitForMessages(1, 5000);

    // The watcher acknowledges what it has read (the message): it gets one fresh picture of all 13.
    watcher.ack();
    await watcher.waitFor((s) => syncs(s).length >= 2, 5000, "the fresh picture");
    const fresh = syncs(watcher).at(-1);
    expect(fresh?.count).toBe(13);
    expect(fresh?.members).toHaveLength(13);
    stop();
    for (const s of [watcher, ...joined]) s.close();
  });

  it("counts presence in the room's stats, GET /rooms and /metrics", async () => {
    const room = "presence-metrics";
    const a = await open(room, "a");
    const b = await open(room, "b");
    const c = await open(room, "b");
    const stop = keepAlive([a, b, c], 1000);
    await a.waitFor((s) => s.presence.length >= 2, 5000, "b's join");
    const stats = await roomStats(server.url, room);
    expect(stats).toMatchObject({ connections: 3, members: 2 });
    expect(stats.presenceEvents).toBeGreaterThanOrEqual(4);
    // The registry learns members with the room's heartbeat (every IDLE_TIMEOUT_SECONDS here).
    let listed: RoomList["rooms"][number] | undefined;
    for (let i = 0; i < 40 && listed?.members !== 2; i++) {
      await sleep(250);
      const list = (await (await fetch(`${server.url}/rooms?prefix=${room}`)).json()) as RoomList;
      listed = list.rooms.find((r) => r.room === room);
    }
    expect(listed).toEqual({ room, connections: 3, members: 2 });
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(Number(/^fanout_presence_members (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(2);
    expect(Number(/^fanout_presence_events_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(4);
    stop();
    for (const s of [a, b, c]) s.close();
  });

  it("lets a member whose socket went silent leave within the idle timeout", async () => {
    const room = "presence-ghost";
    const watcher = await open(room, "watcher");
    const stop = keepAlive([watcher], 1000);
    // The ghost never pings and never closes, as a phone that lost its network.
    const ghost = await open(room, "ghost");
    await watcher.waitFor((s) => s.presence.length >= 2, 5000, "the ghost's join");
    const joinedAt = Date.now();
    await watcher.waitFor((s) => s.presence.length >= 3, (IDLE_SECONDS * 2 + 5) * 1000, "the ghost's leave");
    // Reaped by the sweep (every IDLE_TIMEOUT_SECONDS) once idle that long, then the leave delay.
    expect(Date.now() - joinedAt).toBeLessThan(IDLE_SECONDS * 2000 + LEAVE_DELAY_MS + 2000);
    expect(actions(watcher)).toEqual(["sync:1", "join:ghost:2", "leave:ghost:1"]);
    expect((await ghost.closed).code).toBe(CloseCode.IDLE_TIMEOUT);
    stop();
    watcher.close();
  }, 30_000);
});

describe("presence with tokens, across hibernation and restarts", () => {
  const SECRET = "presence-test-secret";
  let server: LocalServer;
  const token = (sub: string, info?: Record<string, unknown>) => mintToken(SECRET, { prefix: "presence-", sub, ...(info ? { info } : {}) });
  const open = async (room: string, sub: string, info?: Record<string, unknown>) =>
    TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?token=${await token(sub, info)}`);
  const page = async (room: string) =>
    (await (await fetch(`${server.url}/rooms/${room}/presence`)).json()) as { count: number; connections: number; members: { id: string }[] };

  beforeAll(async () => {
    server = await serve({ vars: { TOKEN_SECRET: SECRET, PRESENCE_LEAVE_DELAY_MS: "500" } });
  });

  it("makes a token's sub the member and its info claim the member data, verified; ?member= cannot override it", async () => {
    const room = "presence-tokens";
    const url = `${server.wsUrl}/rooms/${room}/ws?token=${await token("user-1", { name: "Zoë", avatar: "https://example.com/z.png" })}&member=admin`;
    const s = await TestSocket.open(url);
    await s.waitFor((x) => x.presence.length >= 1, 5000, "the sync");
    expect(s.presence[0]).toMatchObject({
      action: "sync",
      members: [{ id: "user-1", info: { name: "Zoë", avatar: "https://example.com/z.png" }, connections: 1, verified: true }],
    });
    // A token without sub is in the room without being a member.
    const anonymous = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?token=${await mintToken(SECRET, { room })}`);
    await anonymous.waitFor((x) => x.presence.length >= 1, 5000, "the anonymous sync");
    expect(anonymous.presence[0]).toMatchObject({ action: "sync", count: 1 });
    expect(await page(room)).toMatchObject({ count: 1, connections: 2 });
    s.close();
    anonymous.close();
  });

  it("refuses tokens whose info claim is too large or not a JSON object, with a clear 401", async () => {
    const exp = Math.floor(Date.now() / 1000) + 600;
    const cases: [unknown, RegExp][] = [
      [{ pad: "x".repeat(1100) }, /at most 1024 bytes/],
      ["{\"name\":\"a string, not an object\"}", /JSON object/],
      [[1, 2, 3], /JSON object/],
    ];
    for (const [info, message] of cases) {
      const bad = await sign({ room: "presence-bad", sub: "u", exp, info }, SECRET, "HS256");
      const res = await fetch(`${server.url}/rooms/presence-bad/ws?token=${bad}`, { headers: { "X-Refusal": "http" } });
      expect(res.status).toBe(401);
      const body = (await res.json()) as { error: string; message: string };
      expect(body.error).toBe("unauthorized");
      expect(body.message).toMatch(message);
    }
    // And minting one is refused where it is made.
    await expect(mintToken(SECRET, { room: "presence-bad", info: { pad: "x".repeat(1100) } })).rejects.toThrow(/1024 bytes/);
  });

  it("is rebuilt from the sockets after the room hibernated: nobody is told, new members see everyone", async () => {
    const room = "presence-hibernate";
    const a = await open(room, "a", { n: 1 });
    const b = await open(room, "b");
    const stop = keepAlive([a, b], 2500);
    await a.waitFor((s) => s.presence.length >= 2, 5000, "b's join");
    const before = await roomStats(server.url, room);
    // The runtime evicts an object 10 s after its last event or timer (the counters' write
    // ~7 s after connecting is the last); pings are answered without waking the room.
    await sleep(19_000);
    const c = await open(room, "c");
    await c.waitFor((s) => s.presence.length >= 1, 5000, "c's sync");
    const after = await roomStats(server.url, room);
    expect(after.instanceStartedAt).toBeGreaterThan(before.instanceStartedAt + 10_000);
    expect(syncs(c)[0]?.members?.map((m) => [m.id, m.info ?? null]).sort()).toEqual([["a", { n: 1 }], ["b", null], ["c", null]]);
    await a.waitFor((s) => s.presence.length >= 3, 5000, "c's join");
    expect(actions(a)).toEqual(["sync:1", "join:b:2", "join:c:3"]);
    b.close();
    await a.waitFor((s) => s.presence.length >= 4, 5000, "b's leave");
    expect(actions(a).at(-1)).toBe("leave:b:2");
    stop();
    a.close();
    c.close();
  }, 40_000);

  it("tells the others of a member whose socket closed while the room hibernated", async () => {
    const room = "presence-close-asleep";
    const a = await open(room, "a");
    const b = await open(room, "b");
    const stop = keepAlive([a, b], 2500);
    await a.waitFor((s) => s.presence.length >= 2, 5000, "b's join");
    const before = await roomStats(server.url, room);
    // As above: long enough for the runtime to evict the room; b's close is what wakes it.
    await sleep(19_000);
    b.close();
    await a.waitFor((s) => s.presence.length >= 3, 8000, "b's leave");
    expect(actions(a)).toEqual(["sync:1", "join:b:2", "leave:b:1"]);
    const after = await roomStats(server.url, room);
    expect(after.instanceStartedAt).toBeGreaterThan(before.instanceStartedAt + 10_000);
    expect(after.members).toBe(1);
    stop();
    a.close();
  }, 40_000);

  it("starts empty after a restart and fills as clients reconnect", async () => {
    const room = "presence-restart";
    const a = await open(room, "a");
    const b = await open(room, "b");
    await a.waitFor((s) => s.presence.length >= 2, 5000, "b's join");
    // History keeps the room (a room with nothing stored is gone once empty).
    await publish(server.url, room, "kept");
    await server.restart();
    expect((await a.closed).code).toBe(CloseCode.SERVICE_RESTART);
    // The room still exists (its history), with nobody in it.
    expect(await page(room)).toMatchObject({ count: 0, connections: 0, members: [] });
    const back = await open(room, "a");
    await back.waitFor((s) => s.presence.length >= 1, 5000, "a's sync");
    expect(back.presence[0]).toMatchObject({ action: "sync", count: 1, members: [{ id: "a" }] });
    expect(await page(room)).toMatchObject({ count: 1, connections: 1 });
    back.close();
    void b;
  }, 60_000);
});
