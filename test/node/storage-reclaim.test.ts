import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type LocalServer } from "../helpers/server";
import { publish, roomStats, TestSocket } from "../helpers/socket";
import { eventually, sleep } from "../helpers/wait";

// Rooms give their storage back when their coordinator shard asks them by name
// (docs/security.md#room-names-and-storage). The runtime starts an object for
// an alarm without its name, and locally every later start of that object too,
// until it forgets the object about a minute after its last call: a room must
// neither give its storage back and so forget its name there, nor report or
// store anything under an empty one.

let server: LocalServer;

beforeAll(async () => {
  // A short history bound, and a sweep alarm every 3 s for a room with sockets.
  server = await startServer({ vars: { HISTORY_MAX_AGE_SECONDS: "2", IDLE_TIMEOUT_SECONDS: "3" } });
});

afterAll(async () => {
  await server?.stop();
});

const status = async (path: string) => (await fetch(`${server.url}${path}`)).status;

describe("rooms the runtime starts without their name", () => {
  it("give their storage back after a restart, and are known by name when used again: no error, no empty name, no 500", async () => {
    // A room only published into, and one with a socket (its sweep alarm set).
    const quiet = "woken-quiet";
    const held = "woken-held";
    expect((await publish(server.url, quiet, { n: 1 })).status).toBe(200);
    const socket = await TestSocket.open(`${server.wsUrl}/rooms/${held}/ws`);
    expect((await publish(server.url, held, { n: 1 })).status).toBe(200);
    await socket.waitFor((s) => s.events.some((e) => e.type === "message"));

    // A restart: an object its alarm wakes now starts without its name.
    await server.restart();
    await eventually(async () => (await status(`/rooms/${quiet}`)) === 404 && (await status(`/rooms/${held}`)) === 404, {
      timeoutMs: 40_000,
      everyMs: 500,
      what: "both rooms giving their storage back",
    });

    // Past an instance's 10 s without calls: the next call starts each object again.
    await sleep(12_000);
    for (const room of [quiet, held]) {
      const again = await publish(server.url, room, { n: 2 });
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ room, seq: 1 });
      // Listed under its name: the directory knows it, and its stats name it.
      expect(await roomStats(server.url, room)).toMatchObject({ room, seq: 1 });
    }
    const back = await TestSocket.open(`${server.wsUrl}/rooms/${held}/ws`);
    await eventually(async () => {
      const list = (await (await fetch(`${server.url}/rooms`)).json()) as { rooms: { room: string }[] };
      return list.rooms.some((e) => e.room === held);
    }, { timeoutMs: 10_000, what: "the room listed by name" });
    const list = (await (await fetch(`${server.url}/rooms`)).json()) as { rooms: { room: string }[] };
    expect(list.rooms.map((e) => e.room)).not.toContain("");
    back.close();

    const output = server.output();
    expect(output).not.toContain('"event":"error"');
    expect(output).not.toMatch(/no name|"room":""/);
  }, 120_000);
});
