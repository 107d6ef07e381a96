import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { ServerMessage, PresenceEvent } from "../../protocol";
// The raw client documented in docs/protocol.md, imported as it is printed there.
import { followRoom as untypedFollowRoom } from "../../docs/examples/raw-client.mjs";
import { startServer, type LocalServer } from "../helpers/server";
import { publish, roomStats } from "../helpers/socket";
import { Recorder, waitFor } from "../helpers/sdk-harness";
import { startProxy, type TcpProxy } from "../helpers/sdk-proxy";
import { sleep } from "../helpers/wait";

/** The example is plain JavaScript: this is the shape it is used with. */
const followRoom = untypedFollowRoom as unknown as (
  url: string,
  onMessage: (message: ServerMessage) => void,
  options: { WebSocket: unknown; onLost?: (event: unknown) => void; onPresence?: (event: PresenceEvent) => void },
) => { close(): void };

const WINDOW = 16 * 1024;
let server: LocalServer;
let proxy: TcpProxy;

beforeAll(async () => {
  server = await startServer({ vars: { WINDOW_BYTES: String(WINDOW) } });
  proxy = await startProxy(server.port);
});

afterAll(async () => {
  await proxy?.close();
  await server?.stop();
});

describe("the raw client in docs/protocol.md", () => {
  it("is printed in the docs exactly as tested", () => {
    const code = readFileSync(new URL("../../docs/examples/raw-client.mjs", import.meta.url), "utf8");
    const doc = readFileSync(new URL("../../docs/protocol.md", import.meta.url), "utf8");
    expect(doc).toContain("```js\n" + code + "```");
    expect(code.trimEnd().split("\n").length).toBeLessThanOrEqual(40);
  });

  it("gets every message once and in order through bursts, a small window and dropped connections", async () => {
    const room = "raw-follow";
    const received: ServerMessage[] = [];
    const lost: unknown[] = [];
    const follower = followRoom(`${proxy.wsUrl}/rooms/${room}/ws`, (m) => received.push(m), {
      WebSocket,
      onLost: (e) => lost.push(e),
    });
    await waitFor(() => proxy.accepted > 0, "the client to connect");
    await sleep(200);
    const N = 600;
    let next = 0;
    // Ten publishes in flight, ~2 KB each: far more than the 16 KiB window, so sockets fall behind and catch up.
    const publishers = Array.from({ length: 10 }, async () => {
      while (next < N) {
        const i = next++;
        await publish(server.url, room, { i, pad: "y".repeat(2000) });
        // Twice during the burst the network drops every connection, the second time once the client is back.
        if (i === 200) proxy.drop();
        if (i === 400) {
          await waitFor(() => proxy.accepted >= 2, "the client to reconnect");
          proxy.drop();
        }
      }
    });
    await Promise.all(publishers);
    await waitFor(() => received.length >= N, `${N} messages (got ${received.length})`, 30_000);
    expect(received.map((m) => m.seq)).toEqual(Recorder.range(1, N));
    expect(lost).toEqual([]);
    expect(proxy.accepted).toBeGreaterThanOrEqual(3);
    follower.close();
    // A client that acks as documented is never closed by the room for it.
    const stats = await roomStats(server.url, room);
    expect(stats.kicks).toBe(0);
    expect(stats.refusals.rate_limited ?? 0).toBe(0);
    expect(stats.refusals.bad_ack ?? 0).toBe(0);
  });

  it("keeps seeing every join in a room with only presence traffic, far more than its window", async () => {
    const room = "raw-presence";
    const presence: PresenceEvent[] = [];
    const follower = followRoom(`${server.wsUrl}/rooms/${room}/ws?member=raw`, () => {}, { WebSocket, onPresence: (e) => presence.push(e) });
    await waitFor(() => presence.length >= 1, "the sync");
    // 60 members with ~900 bytes of data each: ~55 KB of joins, more than three windows, and no message to ack.
    const members: WebSocket[] = [];
    for (let i = 0; i < 60; i++) {
      const info = encodeURIComponent(JSON.stringify({ pad: "q".repeat(900) }));
      const ws = new WebSocket(`${server.wsUrl}/rooms/${room}/ws?member=m${i}&info=${info}`);
      await new Promise((resolve) => ws.once("open", resolve));
      members.push(ws);
    }
    // The client's view, from the events as an app applies them.
    const view = new Set<string>();
    const apply = (e: PresenceEvent) => {
      if (e.action === "sync") {
        view.clear();
        for (const m of e.members ?? []) view.add(m.id);
      } else if (e.action === "join") view.add(e.member.id);
      else if (e.action === "leave") view.delete(e.member.id);
    };
    await waitFor(() => (view.clear(), presence.forEach(apply), view.size === 61), `61 members (have ${view.size})`);
    // In order; a fresh picture stands in for events only when an ack came too late for the next one.
    const joined = presence.flatMap((e) => (e.action === "join" ? [Number(e.member.id.slice(1))] : []));
    expect(joined).toEqual([...joined].sort((a, b) => a - b));
    for (const ws of members) ws.close();
    follower.close();
  });
});
