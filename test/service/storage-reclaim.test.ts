import { Agent, request } from "node:http";
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

describe("a burst of new rooms while earlier rooms give their storage back", () => {
  // Each room's database holds workerd's SQLite heap (~0.2 MB) from its first write until it
  // gives its storage back or is evicted, and the process has 512 MiB of it: a room must let go
  // once its history aged out, not a reclaim retry later (docs/benchmarks.md, the new-room burst).
  const AGE_SECONDS = 9;
  const BURST = 3000;
  const IN_FLIGHT = 20;
  let burstServer: LocalServer;

  beforeAll(async () => {
    burstServer = await startServer({ vars: { HISTORY_MAX_AGE_SECONDS: String(AGE_SECONDS) } });
  });

  afterAll(async () => {
    await burstServer?.stop();
  });

  /** A keep-alive publish: its status, or the connection error it ended in. */
  function post(agent: Agent, room: string): Promise<number | string> {
    return new Promise((resolve) => {
      const req = request(`${burstServer.url}/rooms/${room}/publish`, { method: "POST", agent, headers: { "content-type": "application/json" } }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      });
      req.setTimeout(30_000, () => req.destroy(new Error("no answer in 30 s")));
      req.on("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
      req.end('{"n":1}');
    });
  }

  it("answers every publish 200, logs no error, and each room lets go of its storage soon after its history aged out", async () => {
    const tag = Math.random().toString(36).slice(2, 8);
    const agent = new Agent({ keepAlive: true, maxSockets: IN_FLIGHT });
    // Earlier rooms, due while the burst runs.
    const earlier = Array.from({ length: 300 }, (_, i) => `early-${tag}-${i}`);
    const outcomes = new Map<string, number>();
    const count = (outcome: number | string) => outcomes.set(String(outcome), (outcomes.get(String(outcome)) ?? 0) + 1);
    for (let i = 0; i < earlier.length; i += IN_FLIGHT) (await Promise.all(earlier.slice(i, i + IN_FLIGHT).map((room) => post(agent, room)))).forEach(count);
    await sleep((AGE_SECONDS - 2) * 1000);

    // The burst: each publish into a room of its own, IN_FLIGHT at once. The first rooms' publish
    // times are kept: each is looked at once its history bound and a few seconds have passed.
    const rooms = Array.from({ length: BURST }, (_, i) => `burst-${tag}-${i}`);
    const watched = new Map<string, number>();
    const looks: Promise<[string, number, number]>[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < rooms.length) {
          const index = next++;
          const room = rooms[index] as string;
          const outcome = await post(agent, room);
          count(outcome);
          if (index < 20 && outcome === 200) {
            watched.set(room, Date.now());
            looks.push(
              sleep((AGE_SECONDS + 5) * 1000).then(async () => {
                const res = await fetch(`${burstServer.url}/rooms/${room}`);
                await res.arrayBuffer();
                return [room, res.status, Date.now() - (watched.get(room) ?? 0)];
              }),
            );
          }
        }
      }),
    );
    agent.destroy();
    // Every answer is a 200 (the code before answered hundreds with 500 SQLITE_NOMEM). A connection
    // reset, with nothing in the server's output, is a known open defect of the burst on a busy
    // machine (docs/benchmarks.md, the new-room burst): it is bounded here, not hidden.
    const resets = outcomes.get("ECONNRESET") ?? 0;
    outcomes.delete("ECONNRESET");
    expect(Object.fromEntries(outcomes)).toEqual({ "200": earlier.length + BURST - resets });
    expect(resets).toBeLessThanOrEqual((earlier.length + BURST) / 100);

    // Asked by their shard once their history aged out, the rooms gave their storage back: a room
    // that waited for a second alarm of its own would still hold it (and its memory) here.
    const seen = await Promise.all(looks);
    expect(seen.filter(([, status]) => status !== 404)).toEqual([]);
    for (const room of earlier.slice(0, 20)) expect((await fetch(`${burstServer.url}/rooms/${room}`)).status).toBe(404);

    const errorLines = burstServer
      .output()
      .split("\n")
      .filter((line) => /"event":"error"| error: |SQLITE_NOMEM|no name/.test(line));
    expect(errorLines).toEqual([]);
  }, 240_000);
});
