import { env, exports } from "cloudflare:workers";
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { readCoordinatorConfig } from "../../common/coordinator-config";
import type { RoomCounterValues } from "../../protocol";
import { zeroCounters } from "../../common/counters";
import type { Coordinator } from "../../durable-objects/coordinator/coordinator";
import { Directory } from "../../durable-objects/coordinator/directory";
import { StorageSweep } from "../../durable-objects/coordinator/storage-sweep";
import type { GiveBackAnswer } from "../../durable-objects/coordinator/room-contract";
import { fanOut, type RoomDelivery } from "../../durable-objects/coordinator/fan-out";
import { prefixUpperBound, Registry } from "../../durable-objects/coordinator/registry";
import { decodeCursor, encodeCursor, parseBroadcastBody, parseListQuery } from "../../worker/coordinator/requests";
import { hashRoomName, shardOf, shardStub } from "../../common/coordinator-shards";
import type { Env } from "../../worker/env";
import { eventually, sleep } from "../helpers/wait";

const bindings = env as unknown as Env;
type Entry = { fetch(input: string, init?: RequestInit): Promise<Response> };
const worker = (exports as unknown as { default: Entry }).default;
const config = readCoordinatorConfig(bindings);

const shardFor = (room: string) => shardStub(bindings.COORDINATOR, shardOf(room, config.shards));
const listed = async (room: string) =>
  (await shardFor(room).list({ prefix: room, after: null, limit: 10 })).find((e) => e.room === room) ?? null;

describe("sharding", () => {
  it("hashes names stably and spreads them evenly over the shards", () => {
    // FNV-1a reference values: a change here would move every room to another shard.
    expect(hashRoomName("")).toBe(0x811c9dc5);
    expect(hashRoomName("a")).toBe(0xe40c292c);
    expect(hashRoomName("foobar")).toBe(0xbf9cf968);
    const counts = new Array<number>(16).fill(0);
    for (let i = 0; i < 16_000; i++) counts[shardOf(`room-${i}`, 16)]! += 1;
    for (const count of counts) expect(Math.abs(count - 1000)).toBeLessThan(150);
  });
});

describe("request parsing", () => {
  it("round-trips cursors and refuses anything else", () => {
    for (const room of ["a", "room-1", "Z.~:_-9", "x".repeat(64)]) expect(decodeCursor(encodeCursor(room))).toBe(room);
    for (const bad of ["", "abc", "!!!!", btoa("r1:bad name"), btoa("other:room")]) expect(decodeCursor(bad)).toBeNull();
    expect(parseListQuery({ cursor: encodeCursor("m") })).toMatchObject({ ok: true, value: { after: "m", prefix: "", limit: 100 } });
  });

  it("dedupes an explicit room list and keeps data as JSON text", () => {
    const parsed = parseBroadcastBody(JSON.stringify({ data: { a: [1, "two"] }, rooms: ["x", "y", "x"] }), config);
    expect(parsed).toEqual({ ok: true, value: { target: { kind: "rooms", rooms: ["x", "y"] }, dataJson: '{"a":[1,"two"]}' } });
    expect(parseBroadcastBody('{"data":null}', config)).toEqual({ ok: true, value: { target: { kind: "prefix", prefix: "" }, dataJson: "null" } });
    // An empty prefix is every live room, as no prefix is (coordinator.md): every name starts with it.
    expect(parseBroadcastBody('{"data":null,"prefix":""}', config)).toEqual(parseBroadcastBody('{"data":null}', config));
  });

  it("bounds a prefix range by incrementing its last character", () => {
    expect(prefixUpperBound("abc")).toBe("abd");
    expect(prefixUpperBound("a~")).toBe("a\x7f");
    for (const name of ["abc", "abc-1", "abc~~~"]) expect(name >= "abc" && name < prefixUpperBound("abc")).toBe(true);
    for (const name of ["abd", "ab", "abD"]) expect(name >= "abc" && name < prefixUpperBound("abc")).toBe(false);
  });
});

describe("fan-out", () => {
  const ok: RoomDelivery = { recipients: 2, duplicate: false };

  it("keeps at most `concurrency` sends in flight and counts every room", async () => {
    let inFlight = 0;
    let peak = 0;
    const rooms = Array.from({ length: 120 }, (_, i) => `r${i}`);
    const result = await fanOut(
      rooms,
      async () => {
        peak = Math.max(peak, ++inFlight);
        await sleep(1);
        inFlight -= 1;
        return ok;
      },
      { concurrency: 7, attempts: 3, backoffMs: 1 },
    );
    expect(peak).toBe(7);
    expect(result).toEqual({ rooms: 120, sockets: 240, duplicates: 0, refused: 0, failed: [], paced: 0 });
  });

  it("retries failing rooms, and reports the ones that never succeed after `attempts` tries", async () => {
    const calls = new Map<string, number>();
    const result = await fanOut(
      ["flaky", "dead", "fine"],
      async (room) => {
        const n = (calls.get(room) ?? 0) + 1;
        calls.set(room, n);
        if (room === "dead" || (room === "flaky" && n < 3)) throw new Error("overloaded");
        // A retry after a lost answer finds the key already published.
        return room === "flaky" ? { recipients: 0, duplicate: true } : ok;
      },
      { concurrency: 2, attempts: 3, backoffMs: 1 },
    );
    expect(Object.fromEntries(calls)).toEqual({ flaky: 3, dead: 3, fine: 1 });
    expect(result).toEqual({ rooms: 2, sockets: 2, duplicates: 1, refused: 0, failed: ["dead"], paced: 0 });
  });
});

describe("registry shard", () => {
  it("applies reports in the rooms' order, keeps tombstones, and stops listing expired entries", async () => {
    const stub = shardStub(bindings.COORDINATOR, 9_999);
    await stub.report({ room: "reg-a", connections: 1, at: 1000 });
    await stub.report({ room: "reg-b", connections: 4, at: 1000 });
    await stub.report({ room: "reg-a", connections: 3, at: 2000 });
    // Older than what is stored: a delayed report must not win.
    await stub.report({ room: "reg-a", connections: 1, at: 1500 });
    expect(await stub.list({ prefix: "reg-", after: null, limit: 10 })).toEqual([
      { room: "reg-a", connections: 3, members: 0 },
      { room: "reg-b", connections: 4, members: 0 },
    ]);

    // The room emptied; the "1" it had sent before arrives late and is ignored.
    await stub.report({ room: "reg-b", connections: 0, at: 3000 });
    await stub.report({ room: "reg-b", connections: 1, at: 2500 });
    expect(await stub.list({ prefix: "reg-", after: null, limit: 10 })).toEqual([{ room: "reg-a", connections: 3, members: 0 }]);
    expect(await stub.list({ prefix: "reg-", after: "reg-a", limit: 10 })).toEqual([]);

    // Time passes beyond the TTL without a heartbeat: unlisted at once, reclaimed by the sweep alarm.
    await runInDurableObject(stub, (_instance: Coordinator, state) => {
      state.storage.sql.exec(`UPDATE rooms SET expires_at = ? WHERE name = 'reg-a'`, Date.now() - 1);
    });
    expect(await stub.list({ prefix: "reg-", after: null, limit: 10 })).toEqual([]);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const { rows, alarm } = await runInDurableObject(stub, async (_instance: Coordinator, state) => ({
      rows: state.storage.sql.exec<{ name: string }>(`SELECT name FROM rooms ORDER BY name`).toArray().map((r) => r.name),
      alarm: await state.storage.getAlarm(),
    }));
    // The tombstone of reg-b lives until its own TTL, and the sweep is armed again for it.
    expect(rows).toEqual(["reg-b"]);
    expect(alarm).not.toBeNull();
  });

  it("adds the member count to a registry written before it existed, keeping its entries", async () => {
    const stub = bindings.ROOMS.get(bindings.ROOMS.idFromName("old-registry-storage"));
    const listed = await runInDurableObject(stub, (_instance, state) => {
      const sql = state.storage.sql;
      sql.exec(`CREATE TABLE rooms (name TEXT PRIMARY KEY, connections INTEGER NOT NULL, reported_at INTEGER NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID`);
      sql.exec(`INSERT INTO rooms VALUES ('old', 2, 1, ?)`, Date.now() + 60_000);
      const registry = new Registry(sql);
      registry.apply({ room: "new", connections: 1, members: 1, at: 1 }, Date.now() + 60_000, 0);
      return registry.list({ prefix: "", after: null, limit: 10 }, Date.now());
    });
    expect(listed).toEqual([
      { room: "new", connections: 1, members: 1 },
      { room: "old", connections: 2, members: 0 },
    ]);
  });

  it("writes an unchanged heartbeat only when the entry's remaining lifetime runs low", async () => {
    const stub = shardStub(bindings.COORDINATOR, 9_996);
    const written = await runInDurableObject(stub, (_instance: Coordinator, state) => {
      const registry = new Registry(state.storage.sql);
      const now = Date.now();
      return [
        registry.apply({ room: "hb", connections: 2, at: 1 }, now + 4000, now + 2500),
        // Same count, entry still has 4 s left, more than the 3.5 s threshold: skipped.
        registry.apply({ room: "hb", connections: 2, at: 2 }, now + 5000, now + 3500),
        // Same count, 4 s left is under the 4.5 s threshold: refreshed.
        registry.apply({ room: "hb", connections: 2, at: 3 }, now + 6000, now + 4500),
        // A changed count is always written.
        registry.apply({ room: "hb", connections: 3, at: 4 }, now + 6100, now + 4600),
        // So is a changed member count.
        registry.apply({ room: "hb", connections: 3, members: 2, at: 5 }, now + 6200, now + 4700),
      ];
    });
    expect(written).toEqual([true, false, true, true, true]);
    expect(await stub.list({ prefix: "", after: null, limit: 10 })).toEqual([{ room: "hb", connections: 3, members: 2 }]);
  });

  it("ignores malformed reports", async () => {
    const stub = shardStub(bindings.COORDINATOR, 9_998);
    await stub.report({ room: "bad name", connections: 1, at: 1 });
    await stub.report({ room: "ok", connections: -1, at: 1 });
    expect(await stub.list({ prefix: "", after: null, limit: 10 })).toEqual([]);
  });

  it("stores an entry in under 200 bytes", async () => {
    const stub = shardStub(bindings.COORDINATOR, 9_997);
    const { before, after } = await runInDurableObject(stub, async (instance: Coordinator, state) => {
      await instance.report({ room: "warm-up", connections: 1, at: 1 });
      const before = state.storage.sql.databaseSize;
      for (let i = 0; i < 10_000; i++) {
        await instance.report({ room: `tenant-${Math.floor(i / 100)}:room-${String(i).padStart(6, "0")}`, connections: 1 + (i % 50), at: 2 });
      }
      return { before, after: state.storage.sql.databaseSize };
    });
    const perEntry = (after - before) / 10_000;
    console.log(`registry storage: ${perEntry.toFixed(1)} bytes per entry (names of 20 characters)`);
    expect(perEntry).toBeLessThan(200);
  });
});

describe("room registration", () => {
  it("registers a room on its first socket, heals a lost entry at the next heartbeat, and unlists it when emptied", async () => {
    const room = "registration-heal";
    const res = await worker.fetch(`http://edge.test/rooms/${room}/ws`, { headers: { Upgrade: "websocket" } });
    expect(res.status).toBe(101);
    const ws = res.webSocket as WebSocket;
    ws.accept();
    await eventually(async () => (await listed(room)) !== null, { what: "0 -> 1 report" });
    expect(await listed(room)).toEqual({ room, connections: 1, members: 0 });

    // The shard loses the entry (a lost report, a restored backup...).
    await runInDurableObject(shardFor(room), (_instance: Coordinator, state) => {
      state.storage.sql.exec(`DELETE FROM rooms WHERE name = ?`, room);
    });
    expect(await listed(room)).toBeNull();

    // The room's sweep alarm is its heartbeat.
    const roomStub = bindings.ROOMS.get(bindings.ROOMS.idFromName(room));
    expect(await runDurableObjectAlarm(roomStub)).toBe(true);
    await eventually(async () => (await listed(room)) !== null, { what: "heartbeat report" });

    ws.close(1000, "bye");
    await eventually(async () => (await listed(room)) === null, { what: "1 -> 0 report" });
  });
});

describe("storage given back when the shard asks", () => {
  const answers = new Map<string, GiveBackAnswer | Error>();
  const asked: string[] = [];
  const countedDeltas: RoomCounterValues[] = [];
  const sweepOn = (directory: Directory) =>
    new StorageSweep({
      directory,
      ask: async (room) => {
        asked.push(room);
        const answer = answers.get(room);
        if (answer instanceof Error) throw answer;
        return answer ?? { gone: false, due: null };
      },
      counted: (delta) => countedDeltas.push(delta),
    });
  const delta = (published: number): RoomCounterValues => ({ ...zeroCounters(), published });

  it("asks the rooms that are due, by name, and keeps or drops each by its answer", async () => {
    const stub = shardStub(bindings.COORDINATOR, 9_995);
    const result = await runInDurableObject(stub, async (_instance: Coordinator, state) => {
      const directory = new Directory(state.storage.sql);
      const now = Date.now();
      for (const [room, due] of [["gone-a", now - 3], ["gone-b", now - 2], ["later", now - 1], ["live", now - 1], ["failing", now - 1], ["not-yet", now + 60_000]] as const) {
        directory.add(room, due);
      }
      answers.set("gone-a", { gone: true, delta: delta(2) });
      answers.set("gone-b", { gone: true, delta: delta(3) });
      answers.set("later", { gone: false, due: now + 5000 });
      answers.set("live", { gone: false, due: null });
      answers.set("failing", new Error("the room's object is overloaded"));
      const more = await sweepOn(directory).run(now);
      const rows = state.storage.sql.exec<{ name: string; due: number }>(`SELECT name, due FROM stored_rooms ORDER BY name`).toArray();
      return { more, rows, now };
    });
    expect(result.more).toBe(false);
    expect([...asked].sort()).toEqual(["failing", "gone-a", "gone-b", "later", "live"]);
    const dues = new Map(result.rows.map((r) => [r.name, r.due - result.now]));
    // Gone rooms leave the directory; the others are asked again when they said, in an hour, or in a minute.
    expect([...dues.keys()]).toEqual(["failing", "later", "live", "not-yet"]);
    expect(dues.get("later")).toBe(5000);
    expect(dues.get("live")).toBeGreaterThanOrEqual(3_600_000);
    expect(dues.get("failing")).toBeGreaterThanOrEqual(60_000);
    expect(dues.get("not-yet")).toBe(60_000);
    // One totals write for the whole sweep, with both rooms' counters.
    expect(countedDeltas).toHaveLength(1);
    expect(countedDeltas[0]?.published).toBe(5);
  });

  it("keeps a room that listed itself again while it was asked, to ask it once more", async () => {
    const stub = shardStub(bindings.COORDINATOR, 9_994);
    const rows = await runInDurableObject(stub, async (_instance: Coordinator, state) => {
      const directory = new Directory(state.storage.sql);
      directory.add("rewritten", Date.now() - 1);
      let sweep: StorageSweep | null = null;
      sweep = new StorageSweep({
        directory,
        ask: async (room) => {
          // A publish reached the room after it gave its storage back, and it listed itself before this answer arrived.
          sweep?.listed(room);
          return { gone: true, delta: null };
        },
        counted: () => undefined,
      });
      await sweep.run(Date.now());
      return state.storage.sql.exec<{ name: string }>(`SELECT name FROM stored_rooms`).toArray();
    });
    expect(rows).toEqual([{ name: "rewritten" }]);
  });

  it("gives a directory written before rooms were asked the column, each of its rooms due at once", async () => {
    const stub = shardStub(bindings.COORDINATOR, 9_993);
    const due = await runInDurableObject(stub, (_instance: Coordinator, state) => {
      const sql = state.storage.sql;
      sql.exec(`DROP TABLE IF EXISTS stored_rooms`);
      sql.exec(`CREATE TABLE stored_rooms (name TEXT PRIMARY KEY) WITHOUT ROWID`);
      sql.exec(`INSERT INTO stored_rooms (name) VALUES ('old-room')`);
      const directory = new Directory(sql);
      return { rooms: directory.due(Date.now(), 10), next: directory.nextDue(), has: directory.has("old-room") };
    });
    expect(due).toEqual({ rooms: ["old-room"], next: 0, has: true });
  });

  it("lists a room at its first write, to be asked once its history could have aged out", async () => {
    const room = "asked-later";
    const before = Date.now();
    const res = await worker.fetch(`http://edge.test/rooms/${room}/publish`, { method: "POST", body: "hello" });
    expect(res.status).toBe(200);
    const row = await runInDurableObject(shardFor(room), (_instance: Coordinator, state) =>
      state.storage.sql.exec<{ due: number }>(`SELECT due FROM stored_rooms WHERE name = ?`, room).toArray()[0],
    );
    // HISTORY_MAX_AGE_SECONDS is 120 in wrangler.toml.
    expect(row?.due).toBeGreaterThanOrEqual(before + 120_000);
    // Asked now, the room says when.
    const roomStub = bindings.ROOMS.get(bindings.ROOMS.idFromName(room));
    const answer = await roomStub.giveBack();
    expect(answer.gone).toBe(false);
    expect(!answer.gone && answer.due !== null && answer.due >= before + 120_000).toBe(true);
  });

  it("a room with a socket says it will tell; one that never wrote has nothing to give", async () => {
    const room = "asked-live";
    const res = await worker.fetch(`http://edge.test/rooms/${room}/ws`, { headers: { Upgrade: "websocket" } });
    expect(res.status).toBe(101);
    const ws = res.webSocket as WebSocket;
    ws.accept();
    expect(await bindings.ROOMS.get(bindings.ROOMS.idFromName(room)).giveBack()).toEqual({ gone: false, due: null });
    ws.close(1000, "bye");
    expect(await bindings.ROOMS.get(bindings.ROOMS.idFromName("asked-empty")).giveBack()).toEqual({ gone: true, delta: null });
  });

  it("an instance that knows no name for its room answers retryably, never 500, and reports nothing", async () => {
    // An object addressed without a name, as the runtime starts one for an alarm: nothing stored names it.
    const stub = bindings.ROOMS.get(bindings.ROOMS.newUniqueId());
    expect(await stub.publish('"hello"')).toEqual({ refused: { error: "over_capacity", message: "the room is restarting; retry" } });
    const again = bindings.ROOMS.get(bindings.ROOMS.newUniqueId());
    const res = await again.fetch("http://room/rooms/x/ws", { headers: { Upgrade: "websocket" } });
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ error: "over_capacity" });
    expect(await listed("")).toBeNull();
  });
});
