import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  CloseCode,
  type BroadcastResult as BroadcastAnswer,
  type ServerMessage,
  type RoomList,
  type RoomListEntry as RoomEntry,
  type WelcomeEvent,
} from "../../protocol";
import { startServer, type LocalServer } from "../helpers/server";
import { managedServers } from "../helpers/servers";
import { publish, TestSocket } from "../helpers/socket";
import { eventually } from "../helpers/wait";

/**
 * The coordinator end to end: registry reports from real rooms, GET /rooms,
 * POST /broadcast, and how the registry heals.
 *
 * IDLE_TIMEOUT_SECONDS sets the rooms' sweep interval, which is also their
 * registry heartbeat (entries live 4 intervals). A small value makes counts and
 * expiry observable within a test, and makes the room close sockets silent for
 * that long, so every socket here pings every second.
 */
const IDLE_SECONDS = 3;
const TTL_MS = IDLE_SECONDS * 4 * 1000;

/** Sockets that ping every second until closed, so the short idle timeout never reaps them. */
class Clients {
  readonly #sockets = new Set<TestSocket>();
  readonly #timer = setInterval(() => {
    for (const s of this.#sockets) if (s.ws.readyState === s.ws.OPEN) s.send("ping");
  }, 1000);

  async open(server: LocalServer, room: string, query = ""): Promise<TestSocket> {
    const socket = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws${query}`);
    this.#sockets.add(socket);
    await socket.waitFor((s) => s.events.some((e) => e.type === "welcome"), 10_000, "welcome");
    return socket;
  }

  async openMany(server: LocalServer, rooms: string[], perRoom: number): Promise<Map<string, TestSocket[]>> {
    const byRoom = new Map<string, TestSocket[]>();
    await Promise.all(
      rooms.map(async (room) => byRoom.set(room, await Promise.all(Array.from({ length: perRoom }, () => this.open(server, room))))),
    );
    return byRoom;
  }

  close(socket: TestSocket): void {
    this.#sockets.delete(socket);
    socket.close();
  }

  /** Closes every socket and stops pinging; the instance is done after this. */
  closeAll(): void {
    for (const s of this.#sockets) s.close();
    this.#sockets.clear();
    clearInterval(this.#timer);
  }
}

async function listRooms(server: LocalServer, params: Record<string, string> = {}): Promise<RoomList> {
  const res = await fetch(`${server.url}/rooms?${new URLSearchParams(params)}`);
  expect(res.status).toBe(200);
  return (await res.json()) as RoomList;
}

/** Every live room under `prefix`, following cursors. */
async function listAll(server: LocalServer, prefix: string, limit = 100): Promise<RoomEntry[]> {
  const all: RoomEntry[] = [];
  let cursor: string | null = null;
  do {
    const params: Record<string, string> = { prefix, limit: String(limit) };
    if (cursor) params.cursor = cursor;
    const page = await listRooms(server, params);
    all.push(...page.rooms);
    cursor = page.cursor;
  } while (cursor);
  return all;
}

async function countsOf(server: LocalServer, prefix: string): Promise<Record<string, number>> {
  return Object.fromEntries((await listAll(server, prefix)).map((e) => [e.room, e.connections]));
}

async function broadcast(server: LocalServer, body: unknown, key?: string): Promise<BroadcastAnswer> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (key !== undefined) headers["idempotency-key"] = key;
  const res = await fetch(`${server.url}/broadcast`, { method: "POST", headers, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  return (await res.json()) as BroadcastAnswer;
}

/**
 * Publishes a marker into each room and waits for every socket to receive it.
 * A room sends in seq order, so anything a socket was going to get before the
 * marker (a duplicate broadcast included) has arrived by then.
 */
async function settle(server: LocalServer, byRoom: Map<string, TestSocket[]>): Promise<void> {
  const marker = { marker: Math.random() };
  for (const room of byRoom.keys()) expect((await publish(server.url, room, marker)).status).toBe(200);
  for (const sockets of byRoom.values()) {
    for (const s of sockets) await s.waitFor((x) => x.messages.some((m) => JSON.stringify(m.data) === JSON.stringify(marker)), 10_000, "marker");
  }
}

const dataOf = (messages: ServerMessage[]) => messages.filter((m) => !(typeof m.data === "object" && m.data !== null && "marker" in m.data)).map((m) => m.data);

const names = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(2, "0")}`);

describe("broadcast and registry on one server", () => {
  let server: LocalServer;
  const clients = new Clients();

  beforeAll(async () => {
    server = await startServer({ vars: { IDLE_TIMEOUT_SECONDS: String(IDLE_SECONDS) } });
  });

  afterAll(async () => {
    clients.closeAll();
    await server?.stop();
  });

  it("delivers a broadcast to 50 rooms: every socket once, as the next message in its room's seq order", async () => {
    const rooms = names("bc-", 50);
    // Rooms start at different seqs, so each numbers the broadcast with its own next seq.
    for (const [i, room] of rooms.entries()) for (let k = 0; k < i % 3; k++) await publish(server.url, room, { before: k });
    const byRoom = await clients.openMany(server, rooms, 2);

    const answer = await broadcast(server, { data: { hello: "everyone" }, rooms });
    expect(answer).toMatchObject({ rooms: 50, sockets: 100, duplicates: 0, duplicate: false, failed: [], failedCount: 0, failedShards: [] });
    expect(answer.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);

    await settle(server, byRoom);
    for (const [i, room] of rooms.entries()) {
      for (const s of byRoom.get(room) ?? []) {
        const welcome = s.events[0] as WelcomeEvent;
        expect(welcome.seq).toBe(i % 3);
        // Exactly the broadcast, then the marker, with consecutive seqs after the welcome.
        expect(s.messages.map((m) => m.seq)).toEqual([welcome.seq + 1, welcome.seq + 2]);
        expect(dataOf(s.messages)).toEqual([{ hello: "everyone" }]);
      }
    }
  });

  it("delivers a prefix broadcast only to live rooms under the prefix", async () => {
    const matching = names("pfx-a-", 4);
    const others = names("pfx-b-", 3);
    const byRoom = await clients.openMany(server, [...matching, ...others], 1);
    await eventually(async () => Object.keys(await countsOf(server, "pfx-a-")).length === 4, { timeoutMs: 10_000, what: "pfx-a- rooms registered", everyMs: 200 });

    const answer = await broadcast(server, { data: "only a", prefix: "pfx-a-" });
    expect(answer).toMatchObject({ rooms: 4, sockets: 4, failedCount: 0, failedShards: [] });

    await settle(server, byRoom);
    for (const room of matching) for (const s of byRoom.get(room) ?? []) expect(dataOf(s.messages)).toEqual(["only a"]);
    for (const room of others) for (const s of byRoom.get(room) ?? []) expect(dataOf(s.messages)).toEqual([]);
  });

  it("never delivers a repeated idempotency key twice, by list or by prefix", async () => {
    const rooms = names("idem-", 3);
    const byRoom = await clients.openMany(server, rooms, 2);
    await eventually(async () => Object.keys(await countsOf(server, "idem-")).length === 3, { timeoutMs: 10_000, what: "idem- rooms registered", everyMs: 200 });

    const first = await broadcast(server, { data: "once", rooms }, "key-1");
    expect(first).toMatchObject({ idempotencyKey: "key-1", rooms: 3, sockets: 6, duplicates: 0, duplicate: false });
    const again = await broadcast(server, { data: "once", rooms }, "key-1");
    expect(again).toMatchObject({ idempotencyKey: "key-1", rooms: 3, sockets: 0, duplicates: 3, duplicate: true, failedCount: 0 });
    const byPrefix = await broadcast(server, { data: "once", prefix: "idem-" }, "key-1");
    expect(byPrefix).toMatchObject({ rooms: 3, sockets: 0, duplicates: 3, duplicate: true });

    // Without a header the service picks a key and says which; retrying with it is a duplicate.
    const generated = await broadcast(server, { data: "generated", rooms });
    expect(generated).toMatchObject({ sockets: 6, duplicate: false });
    const retried = await broadcast(server, { data: "generated", rooms }, generated.idempotencyKey);
    expect(retried).toMatchObject({ sockets: 0, duplicate: true });

    await settle(server, byRoom);
    for (const sockets of byRoom.values()) for (const s of sockets) expect(dataOf(s.messages)).toEqual(["once", "generated"]);
  });

  it("lists live rooms with their connection counts, in name order, page by page", async () => {
    const rooms = names("ls-", 12);
    const want: Record<string, number> = {};
    for (const [i, room] of rooms.entries()) {
      want[room] = (i % 3) + 1;
      for (let k = 0; k < want[room]; k++) await clients.open(server, room);
    }
    // A room reports 1 on its first socket; its heartbeat brings the count up to date.
    await eventually(async () => JSON.stringify(await countsOf(server, "ls-")) === JSON.stringify(want), { timeoutMs: 4 * IDLE_SECONDS * 1000, what: "counts", everyMs: 200 });

    const pages: RoomList[] = [];
    let cursor: string | null = null;
    do {
      const page: RoomList = await listRooms(server, cursor ? { prefix: "ls-", limit: "5", cursor } : { prefix: "ls-", limit: "5" });
      pages.push(page);
      cursor = page.cursor;
    } while (cursor && pages.length < 10);
    expect(pages.map((p) => p.rooms.length)).toEqual([5, 5, 2]);
    expect(pages.flatMap((p) => p.rooms)).toEqual(rooms.map((room) => ({ room, connections: want[room], members: 0 })));

    // An exact fit has no next page; a prefix matches nothing else.
    expect((await listRooms(server, { prefix: "ls-", limit: "12" })).cursor).toBeNull();
    expect((await listRooms(server, { prefix: "ls-0", limit: "100" })).rooms.map((e) => e.room)).toEqual(rooms.slice(0, 10));
    // Without a prefix the listing holds rooms of the other tests too.
    const everything = await listAll(server, "", 7);
    expect(everything.map((e) => e.room)).toEqual([...everything.map((e) => e.room)].sort());
    expect(everything.map((e) => e.room)).toEqual(expect.arrayContaining([...rooms, "bc-00", "pfx-a-00"]));
  });

  it("drops a room from the listing when its last socket leaves", async () => {
    const byRoom = await clients.openMany(server, ["gone-1", "gone-2"], 2);
    await eventually(async () => Object.keys(await countsOf(server, "gone-")).length === 2, { timeoutMs: 10_000, what: "gone- rooms registered", everyMs: 200 });

    for (const s of byRoom.get("gone-1") ?? []) clients.close(s);
    // The 1 -> 0 report, well before the entry could have expired.
    await eventually(async () => !("gone-1" in (await countsOf(server, "gone-"))), { timeoutMs: TTL_MS / 2, what: "gone-1 to leave the listing", everyMs: 200 });
    expect(Object.keys(await countsOf(server, "gone-"))).toEqual(["gone-2"]);
  });

  const refusals: [string, RequestInit & { path?: string }, number, string][] = [
    ["no data", { body: JSON.stringify({ rooms: ["a"] }) }, 400, "bad_request"],
    ["not JSON", { body: "{" }, 400, "bad_json"],
    ["not an object", { body: "[1]" }, 400, "bad_request"],
    ["rooms and prefix", { body: JSON.stringify({ data: 1, rooms: ["a"], prefix: "a" }) }, 400, "bad_request"],
    ["an empty room list", { body: JSON.stringify({ data: 1, rooms: [] }) }, 400, "bad_request"],
    ["an invalid room name", { body: JSON.stringify({ data: 1, rooms: ["ok", "not ok"] }) }, 400, "bad_room"],
    ["a room name that is not a string", { body: JSON.stringify({ data: 1, rooms: [7] }) }, 400, "bad_room"],
    ["an invalid prefix", { body: JSON.stringify({ data: 1, prefix: "-x" }) }, 400, "bad_request"],
    ["an unknown field", { body: JSON.stringify({ data: 1, room: "a" }) }, 400, "bad_request"],
    ["too many rooms", { body: JSON.stringify({ data: 1, rooms: names("r", 1001).map((n, i) => `${n}-${i}`) }) }, 413, "too_large"],
    ["data over the message limit", { body: JSON.stringify({ data: "x".repeat(70_000), rooms: ["a"] }) }, 413, "too_large"],
    ["a body over the limit", { body: JSON.stringify({ data: 1, pad: "x".repeat(300_000) }) }, 413, "too_large"],
    ["a bad Idempotency-Key", { body: JSON.stringify({ data: 1, rooms: ["a"] }), headers: { "idempotency-key": "has space" } }, 400, "bad_request"],
    ["GET /broadcast", { method: "GET" }, 405, "method_not_allowed"],
  ];
  for (const [name, init, status, error] of refusals) {
    it(`refuses a broadcast with ${name}: ${status} ${error}`, async () => {
      const res = await fetch(`${server.url}/broadcast`, { method: "POST", ...init });
      expect(res.status).toBe(status);
      expect(res.headers.get("content-type")).toContain("application/json");
      expect(await res.json()).toMatchObject({ error });
    });
  }

  for (const query of ["limit=0", "limit=1001", "limit=ten", "prefix=bad%20name", "cursor=not-a-cursor", "cursor=%25%25"]) {
    it(`refuses GET /rooms?${query}: 400 bad_request`, async () => {
      const res = await fetch(`${server.url}/rooms?${query}`);
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ error: "bad_request" });
    });
  }
});

describe("broadcast to every live room", () => {
  it("reaches every live room on the server and no room that has gone", async () => {
    const server = await startServer({ vars: { IDLE_TIMEOUT_SECONDS: String(IDLE_SECONDS), COORDINATOR_SHARDS: "3" } });
    const clients = new Clients();
    try {
      const live = ["all-x", "other", "zeta.9"];
      const byRoom = await clients.openMany(server, live, 1);
      const left = await clients.open(server, "left-early");
      await eventually(async () => (await listAll(server, "")).length === 4, { timeoutMs: 10_000, what: "4 rooms registered", everyMs: 200 });
      clients.close(left);
      await eventually(async () => (await listAll(server, "")).length === 3, { timeoutMs: 10_000, what: "left-early unlisted", everyMs: 200 });

      const answer = await broadcast(server, { data: { all: true } });
      expect(answer).toMatchObject({ rooms: 3, sockets: 3, failedCount: 0, failedShards: [] });
      await settle(server, byRoom);
      for (const sockets of byRoom.values()) for (const s of sockets) expect(dataOf(s.messages)).toEqual([{ all: true }]);
    } finally {
      clients.closeAll();
      await server.stop();
    }
  });
});

describe("registry healing", () => {
  const serve = managedServers();
  let clients: Clients;

  beforeEach(() => {
    clients = new Clients();
  });

  afterEach(() => {
    clients.closeAll();
  });

  it("lists a room again once its clients reconnect after a restart", async () => {
    const server = await serve({ vars: { IDLE_TIMEOUT_SECONDS: String(IDLE_SECONDS) } });
    const byRoom = await clients.openMany(server, ["rs-1", "rs-2"], 2);
    await eventually(async () => JSON.stringify(await countsOf(server, "rs-")) === '{"rs-1":2,"rs-2":2}', { timeoutMs: 4 * IDLE_SECONDS * 1000, what: "rs- counts", everyMs: 200 });

    await server.restart();
    for (const sockets of byRoom.values()) for (const s of sockets) expect((await s.closed).code).toBe(CloseCode.SERVICE_RESTART);

    // Clients reconnect and resume; the rooms report themselves again.
    const again = new Map<string, TestSocket[]>();
    for (const [room, sockets] of byRoom) {
      again.set(room, await Promise.all(sockets.map((s) => clients.open(server, room, `?since=${(s.events[0] as WelcomeEvent).seq}`))));
    }
    await eventually(async () => JSON.stringify(await countsOf(server, "rs-")) === '{"rs-1":2,"rs-2":2}', { timeoutMs: 4 * IDLE_SECONDS * 1000, what: "rs- counts after restart", everyMs: 200 });

    // And the healed registry drives broadcasts again.
    const answer = await broadcast(server, { data: "after restart", prefix: "rs-" });
    expect(answer).toMatchObject({ rooms: 2, sockets: 4, failedCount: 0 });
    await settle(server, again);
    for (const sockets of again.values()) for (const s of sockets) expect(dataOf(s.messages)).toEqual(["after restart"]);
  });

  it("expires the entry of a room that died without reporting, within the TTL", async () => {
    const server = await serve({ vars: { IDLE_TIMEOUT_SECONDS: "5" } });
    const ttlMs = 5 * 4 * 1000;
    await clients.openMany(server, ["ttl-dead", "ttl-live"], 1);
    await eventually(async () => Object.keys(await countsOf(server, "ttl-")).length === 2, { timeoutMs: 10_000, what: "ttl- rooms registered", everyMs: 200 });
    // History keeps both rooms' storage past the TTL, so their alarms after the restart (overdue
    // when the restart outlasts the sweep interval) have nothing to give back and no reason to
    // report: only the TTL can unlist the room nobody comes back to.
    for (const room of ["ttl-dead", "ttl-live"]) await fetch(`${server.url}/rooms/${room}/publish`, { method: "POST", body: "kept" });

    // SIGKILL: no room gets to say it emptied, so the registry still lists both.
    await server.stop("SIGKILL");
    const killedAt = Date.now();
    await server.restart();
    expect(Object.keys(await countsOf(server, "ttl-"))).toEqual(["ttl-dead", "ttl-live"]);

    // One room's client comes back; the other room's never does.
    await clients.open(server, "ttl-live");
    await eventually(async () => !("ttl-dead" in (await countsOf(server, "ttl-"))), { timeoutMs: ttlMs + 10_000, what: "ttl-dead to expire", everyMs: 200 });
    const goneAfterMs = Date.now() - killedAt;
    expect(Object.keys(await countsOf(server, "ttl-"))).toEqual(["ttl-live"]);
    // Not before the TTL could have run out: the entries were written when the rooms registered, just before the kill.
    expect(goneAfterMs).toBeGreaterThanOrEqual(ttlMs - 5000);
  }, 90_000);
});
