import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fileURLToPath } from "node:url";
import type { ServerError, PublishedEvent, RoomStats, ServerEvent } from "../../protocol";
import { MuxSocket } from "../helpers/multiplex";
import { startServer, type LocalServer } from "../helpers/server";
import { roomStats, TestSocket } from "../helpers/socket";

/**
 * Hooks in rooms that grow past one object (test/hooks-sharded/worker.ts,
 * ROOM_SHARD_SOCKETS=2): a room with only beforePublish shards, and its
 * root's hook sees every publish, from sockets on leaves too; a room with a
 * connection hook keeps every socket in its own object, where the hook runs.
 */

const config = fileURLToPath(new URL("../hooks-sharded/wrangler.toml", import.meta.url));
const noLeaves = fileURLToPath(new URL("../hooks-sharded/no-leaves.toml", import.meta.url));
let server: LocalServer;
let unbound: LocalServer;

beforeAll(async () => {
  [server, unbound] = await Promise.all([
    startServer({ build: true, args: ["--config", config], gate: "off" }),
    startServer({ build: true, args: ["--config", noLeaves], gate: "off" }),
  ]);
});

afterAll(async () => {
  await Promise.all([server?.stop("SIGKILL"), unbound?.stop("SIGKILL")]);
});

const of = <T extends ServerEvent>(socket: TestSocket, type: string): T[] => socket.events.filter((e) => e.type === type) as T[];

async function openSockets(base: string, room: string, count: number): Promise<TestSocket[]> {
  const sockets: TestSocket[] = [];
  for (let i = 0; i < count; i++) {
    const socket = await TestSocket.open(`${base}/rooms/${room}/ws`);
    await socket.waitFor((s) => s.events.some((e) => e.type === "welcome"), 5000, "the welcome");
    sockets.push(socket);
  }
  return sockets;
}

describe("hooks in sharded rooms", () => {
  it("passes publishes from sockets on leaves through the root's beforePublish, refusals included", async () => {
    const room = "checked-sharded";
    const sockets = await openSockets(server.wsUrl, room, 5);
    const stats = (await roomStats(server.url, room)) as RoomStats;
    expect(stats.connections).toBe(5);
    expect(stats.rootConnections).toBe(2);
    expect((stats.leaves ?? []).reduce((sum, leaf) => sum + leaf.connections, 0)).toBe(3);

    // The last socket opened is on a leaf.
    const onLeaf = sockets[4] as TestSocket;
    onLeaf.send({ type: "publish", data: { refuse: true }, id: "no" });
    onLeaf.send({ type: "publish", data: "hello", id: "yes" });
    await onLeaf.waitFor((s) => of(s, "published").length === 1 && of(s, "error").length === 1, 10_000, "both answers");
    expect(of<ServerError>(onLeaf, "error")[0]).toMatchObject({ code: "forbidden", id: "no", message: "refused by the room's rule" });
    expect(of<PublishedEvent>(onLeaf, "published")[0]).toMatchObject({ id: "yes", seq: 1 });

    const fromHttp = await fetch(`${server.url}/rooms/${room}/publish`, { method: "POST", body: JSON.stringify({ refuse: 1 }), headers: { "content-type": "application/json" } });
    expect(fromHttp.status).toBe(403);
    expect(await fromHttp.json()).toMatchObject({ error: "forbidden" });

    // Every socket, on the root and on the leaves, gets the one message published, as the hook made it.
    for (const socket of sockets) await socket.waitForMessages(1);
    for (const socket of sockets) expect(socket.messages.map((m) => [m.seq, m.data])).toEqual([[1, { data: "hello", source: "leaf" }]]);
    for (const socket of sockets) socket.close();
  });

  it("is one tree with multiplexed followers: leaves and hubs follow the root, and publishes over /ws pass its hook", async () => {
    const room = "checked-mux";
    const sockets = await openSockets(server.wsUrl, room, 5);
    const muxes = await Promise.all([MuxSocket.open(`${server.wsUrl}/ws`), MuxSocket.open(`${server.wsUrl}/ws`)]);
    for (const mux of muxes) mux.subscribe(room);
    for (const mux of muxes) await mux.waitFor((s) => s.of("subscribed").length === 1, 10_000, "subscribed");

    const stats = (await roomStats(server.url, room)) as RoomStats;
    expect(stats.connections).toBe(7);
    expect(stats.rootConnections).toBe(2);
    expect(stats.multiplexed).toBe(2);
    const lines = stats.leaves ?? [];
    expect(lines.filter((l) => l.hub === undefined).reduce((sum, l) => sum + l.connections, 0)).toBe(3);
    expect(lines.filter((l) => l.hub !== undefined).reduce((sum, l) => sum + l.connections, 0)).toBe(2);

    const sender = muxes[0] as MuxSocket;
    sender.send({ type: "publish", room, data: { refuse: true }, id: "no" });
    sender.send({ type: "publish", room, data: "over /ws", id: "yes" });
    await sender.waitFor((s) => s.of("published").length === 1 && s.of("error").length === 1, 10_000, "both answers");
    expect(sender.of("error")[0]).toMatchObject({ room, code: "forbidden", id: "no", message: "refused by the room's rule" });
    expect(sender.of("published")[0]).toMatchObject({ room, id: "yes", seq: 1 });
    // Every follower, on the root, the leaves and the hubs, gets the one message, as the hook made it.
    for (const socket of sockets) await socket.waitForMessages(1);
    for (const socket of sockets) expect(socket.messages.map((m) => [m.seq, m.data])).toEqual([[1, { data: "over /ws", source: "multiplexed" }]]);
    for (const mux of muxes) await mux.waitForMessages(room, 1);
    for (const mux of muxes) expect(mux.messages(room).map((m) => [m.seq, m.data])).toEqual([[1, { data: "over /ws", source: "multiplexed" }]]);
    for (const socket of [...sockets, ...muxes]) socket.close();
  });

  it("has no multiplexed connections under a route that remaps ROOMS to another class", async () => {
    await expect(MuxSocket.open(`${server.wsUrl}/listed/ws`)).rejects.toThrow("upgrade refused: HTTP 404");
  });

  it("keeps every socket of a room with onConnect in its own object", async () => {
    const room = "listed-one-object";
    const sockets = await openSockets(`${server.wsUrl}/listed`, room, 5);
    const stats = (await (await fetch(`${server.url}/listed/rooms/${room}`)).json()) as RoomStats;
    expect(stats.connections).toBe(5);
    expect(stats.leaves ?? []).toEqual([]);
    for (const socket of sockets) socket.close();
  });

  it("keeps every socket in one object in a worker that binds no LEAVES", async () => {
    const room = "no-leaves-bound";
    const sockets = await openSockets(unbound.wsUrl, room, 5);
    const stats = (await roomStats(unbound.url, room)) as RoomStats;
    expect(stats.connections).toBe(5);
    expect(stats.leaves ?? []).toEqual([]);
    for (const socket of sockets) socket.close();
  });
});
