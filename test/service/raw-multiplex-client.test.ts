import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { MultiplexEvent, PresenceEvent, RoomScoped, ServerMessage } from "../../protocol";
import { mintToken } from "../../common/tokens";
// The raw client of the multiplexed connection documented in docs/protocol.md, imported as it is printed there.
import { followRooms as untypedFollowRooms } from "../../docs/examples/raw-multiplex-client.mjs";
import { startServer, type LocalServer } from "../helpers/server";
import { publish, roomStats } from "../helpers/socket";
import { Recorder, waitFor } from "../helpers/sdk-harness";
import { startProxy, type TcpProxy } from "../helpers/sdk-proxy";
import { sleep } from "../helpers/wait";

type Message = RoomScoped<ServerMessage>;

/** The example is plain JavaScript: this is the shape it is used with. */
const followRooms = untypedFollowRooms as unknown as (
  url: string,
  rooms: string[],
  onMessage: (message: Message) => void,
  options: {
    WebSocket: unknown;
    onLost?: (event: unknown) => void;
    onPresence?: (event: RoomScoped<PresenceEvent>) => void;
    onRefused?: (event: MultiplexEvent) => void;
  },
) => { close(): void };

/** A WebSocket for the example that offers a token the way a browser does, in the subprotocol header. */
const withToken = (token: string) =>
  class extends WebSocket {
    constructor(url: string) {
      super(url, ["fanout.v1", `token.${token}`]);
    }
  };

const WINDOW = 16 * 1024;
const TOKEN_SECRET = "raw-multiplex-secret";
let server: LocalServer;
let proxy: TcpProxy;

beforeAll(async () => {
  server = await startServer({ vars: { WINDOW_BYTES: String(WINDOW), TOKEN_SECRET } });
  proxy = await startProxy(server.port);
});

afterAll(async () => {
  await proxy?.close();
  await server?.stop();
});

const byRoom = (received: Message[], room: string) => received.filter((m) => m.room === room).map((m) => m.seq);

describe("the raw multiplexed client in docs/protocol.md", () => {
  it("is printed in the docs exactly as tested", () => {
    const code = readFileSync(new URL("../../docs/examples/raw-multiplex-client.mjs", import.meta.url), "utf8");
    const doc = readFileSync(new URL("../../docs/protocol.md", import.meta.url), "utf8");
    expect(doc).toContain("```js\n" + code + "```");
    expect(code.trimEnd().split("\n").length).toBeLessThanOrEqual(50);
  });

  it("gets every message of each room once and in order through bursts, one small window and dropped connections", async () => {
    const rooms = ["rm-a", "rm-b", "rm-c"];
    const token = await mintToken(TOKEN_SECRET, { sub: "raw", grants: [{ prefix: "rm-" }] });
    const received: Message[] = [];
    const lost: unknown[] = [];
    const refused: MultiplexEvent[] = [];
    const accepted = proxy.accepted;
    const follower = followRooms(`${proxy.wsUrl}/ws`, rooms, (m) => received.push(m), {
      WebSocket: withToken(token),
      onLost: (e) => lost.push(e),
      onRefused: (e) => refused.push(e),
    });
    await waitFor(() => proxy.accepted > accepted, "the client to connect");
    await sleep(300);
    const N = 200;
    let next = 0;
    // Six publishes in flight over three rooms, ~2 KB each: far more than the connection's 16 KiB window.
    const publishers = Array.from({ length: 6 }, async () => {
      while (next < N * rooms.length) {
        const i = next++;
        await publish(server.url, rooms[i % rooms.length] as string, { i, pad: "y".repeat(2000) });
        // Twice during the burst the network drops the connection, the second time once the client is back.
        if (i === 200) proxy.drop();
        if (i === 400) {
          await waitFor(() => proxy.accepted >= accepted + 2, "the client to reconnect");
          proxy.drop();
        }
      }
    });
    await Promise.all(publishers);
    await waitFor(() => received.length >= N * rooms.length, `${N * rooms.length} messages (got ${received.length})`, 30_000);
    for (const room of rooms) expect(byRoom(received, room)).toEqual(Recorder.range(1, N));
    expect(lost).toEqual([]);
    expect(refused).toEqual([]);
    expect(proxy.accepted).toBeGreaterThanOrEqual(accepted + 3);
    follower.close();
    // A client that acks as documented is never closed by the server for it.
    for (const room of rooms) expect((await roomStats(server.url, room)).kicks).toBe(0);
  });

  it("is told which room its token does not open and keeps the others, across a restart of the server", async () => {
    const token = await mintToken(TOKEN_SECRET, { sub: "raw2", grants: [{ room: "rr-open" }, { room: "rr-too" }] });
    const received: Message[] = [];
    const refused: MultiplexEvent[] = [];
    const presence: RoomScoped<PresenceEvent>[] = [];
    const follower = followRooms(`${server.wsUrl}/ws`, ["rr-open", "rr-secret", "rr-too"], (m) => received.push(m), {
      WebSocket: withToken(token),
      onRefused: (e) => refused.push(e),
      onPresence: (e) => presence.push(e),
    });
    await waitFor(() => refused.length === 1 && presence.filter((e) => e.action === "sync").length === 2, "one refusal and two rooms' presence");
    expect(refused[0]).toMatchObject({ type: "error", room: "rr-secret", code: "forbidden" });
    for (const room of ["rr-open", "rr-too"]) await publish(server.url, room, "before");
    await waitFor(() => received.length === 2, "the messages before the restart");
    await server.restart();
    for (const room of ["rr-open", "rr-too"]) await publish(server.url, room, "after");
    await waitFor(() => received.length === 4, `the messages after the restart (got ${received.length})`, 20_000);
    for (const room of ["rr-open", "rr-too"]) expect(byRoom(received, room)).toEqual([1, 2]);
    // The refused room is not asked for again.
    expect(refused).toHaveLength(1);
    follower.close();
  });
});
