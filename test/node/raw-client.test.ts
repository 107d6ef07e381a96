import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { MessageEvent } from "../../client-sdk/src/protocol";
// The raw client documented in docs/protocol.md, imported as it is printed there.
import { followRoom as untypedFollowRoom } from "../../docs/examples/raw-client.mjs";
import { startServer, type LocalServer } from "../helpers/server";
import { publish, roomStats } from "../helpers/socket";
import { Recorder, waitFor } from "./sdk-harness";
import { startProxy, type TcpProxy } from "./sdk-proxy";

/** The example is plain JavaScript: this is the shape it is used with. */
const followRoom = untypedFollowRoom as unknown as (
  url: string,
  onMessage: (message: MessageEvent) => void,
  options: { WebSocket: unknown; onLost: (event: unknown) => void },
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
    const received: MessageEvent[] = [];
    const lost: unknown[] = [];
    const follower = followRoom(`${proxy.wsUrl}/rooms/${room}/ws`, (m) => received.push(m), {
      WebSocket,
      onLost: (e) => lost.push(e),
    });
    await waitFor(() => proxy.accepted > 0, "the client to connect");
    await new Promise((r) => setTimeout(r, 200));
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
});
