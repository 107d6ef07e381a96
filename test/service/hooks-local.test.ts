import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import { PublishError, RoomClient, type RoomCustomEvent } from "../../client-sdk/src/index";
import type { ServerError, PublishedEvent, ServerEvent } from "../../protocol";
import { startServer, type LocalServer } from "../helpers/server";
import { publish, roomStats, TestSocket } from "../helpers/socket";
import { sleep } from "../helpers/wait";

/**
 * Hooks on the local server, with real sockets: the hook tests' worker
 * (test/hooks/worker.ts: the app mounted at /fanout, HookedRoom as ROOMS)
 * run by the launcher with --config and --mount. What only a real runtime
 * shows: a socket's frames keep their order through a hook that waits, and
 * what onConnect attached survives the room's hibernation, for beforePublish
 * and for onClose.
 */

const config = fileURLToPath(new URL("../hooks/wrangler.toml", import.meta.url));

let server: LocalServer;
let base: string;
let wsBase: string;

beforeAll(async () => {
  server = await startServer({ build: true, args: ["--config", config, "--mount", "/fanout"], gate: "off" });
  base = `${server.url}/fanout`;
  wsBase = `${server.wsUrl}/fanout`;
});

afterAll(async () => {
  await server?.stop("SIGKILL");
});

const of = <T extends ServerEvent>(socket: TestSocket, type: string): T[] => socket.events.filter((e) => e.type === type) as T[];

describe("hooks on the local server", () => {
  it("serves the worker's own routes and the mounted app; the launcher found its health check under the mount", async () => {
    expect(server.output()).toContain(`listening on ${server.url}/fanout`);
    expect(await (await fetch(`${server.url}/`)).text()).toBe("the team's own worker");
    expect(await (await fetch(`${base}/healthz`)).json()).toEqual({ ok: true });
  });

  it("passes a socket's publishes through beforePublish one at a time, in the order they were sent", async () => {
    const publisher = await TestSocket.open(`${wsBase}/rooms/order/ws`);
    await publisher.waitFor((s) => s.events.some((e) => e.type === "welcome"));
    // Waits of decreasing length: without the socket's queue the fast ones would overtake.
    const waits = [120, 0, 60, 0, 30, 0, 10, 0];
    waits.forEach((ms, i) => publisher.send({ type: "publish", data: { op: "slow", ms, i }, id: String(i) }));
    await publisher.waitFor((s) => of(s, "published").length === waits.length, 10_000, "every publish answered");
    const published = of<PublishedEvent>(publisher, "published");
    expect(published.map((p) => p.id)).toEqual(waits.map((_, i) => String(i)));
    expect(published.map((p) => p.seq)).toEqual(waits.map((_, i) => i + 1));
    await publisher.waitForMessages(waits.length);
    expect(publisher.messages.map((m) => (m.data as { i: number }).i)).toEqual(waits.map((_, i) => i));
    publisher.close();
  });

  it("keeps what onConnect attached through hibernation, for beforePublish and onClose", async () => {
    const room = "hibernating";
    const ann = await TestSocket.open(`${wsBase}/rooms/${room}/ws?name=ann`);
    const watcher = await TestSocket.open(`${wsBase}/rooms/${room}/ws`);
    ann.send({ type: "x-echo", id: "before" });
    await ann.waitFor((s) => of(s, "x-echo").length === 1);
    const attached = (of<ServerEvent & { data: { name: string; joinedAt: number } }>(ann, "x-echo")[0] as { data: { name: string; joinedAt: number } }).data;
    expect(attached.name).toBe("ann");
    ann.send({ type: "publish", data: { op: "transform", text: "before" }, id: "p1" });
    await watcher.waitForMessages(1);
    expect(watcher.messages[0]?.data).toMatchObject({ text: "before", by: "socket", name: "ann" });
    const before = await roomStats(base, room);

    // Idle for longer than the runtime's eviction delay after the room's last timer (its counters'
    // write, up to 7 s after the publish); heartbeats are answered by the runtime without waking it.
    for (let i = 0; i < 8; i++) {
      await sleep(2500);
      ann.send("ping");
      watcher.send("ping");
    }

    ann.send({ type: "publish", data: { op: "transform", text: "after" }, id: "p2" });
    await watcher.waitForMessages(2);
    const after = await roomStats(base, room);
    // A new instance: the constructor ran again, so the object had been evicted.
    expect(after.instanceStartedAt).toBeGreaterThan(before.instanceStartedAt + 10_000);
    expect(after.connections).toBe(2);
    // The data came back from the socket's attachment, as it was.
    expect(watcher.messages[1]?.data).toMatchObject({ text: "after", by: "socket", name: "ann" });
    ann.send({ type: "x-echo", id: "after" });
    await ann.waitFor((s) => of(s, "x-echo").length === 2);
    expect((of<ServerEvent & { data: unknown }>(ann, "x-echo")[1] as { data: unknown }).data).toEqual(attached);

    // onClose sees it too, and tells the room who left.
    ann.close();
    await watcher.waitForMessages(3);
    expect(watcher.messages[2]).toMatchObject({ seq: 3, data: { left: "ann", code: 1000, by: "client", open: false } });
    watcher.close();
  }, 45_000);

  it("answers an HTTP publish its hook refused with the status, and keeps serving", async () => {
    const refused = await fetch(`${base}/rooms/http-refusals/publish`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ op: "refuse", code: "rate_limited" }),
    });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toEqual({ error: "rate_limited", message: "refused on purpose" });
    const socket = await TestSocket.open(`${wsBase}/rooms/http-refusals/ws`);
    socket.send({ type: "publish", data: { op: "throw" }, id: "t" });
    await socket.waitFor((s) => of(s, "error").length === 1);
    expect(of<ServerError>(socket, "error")[0]).toMatchObject({ code: "internal", id: "t" });
    expect((await publish(base, "http-refusals", "fine")).body).toMatchObject({ seq: 1, recipients: 1 });
    await socket.waitForMessages(1);
    socket.close();
  });

  it("gives the SDK the room's refusals as PublishErrors, and its own events as custom events", async () => {
    const client = new RoomClient<unknown>({ url: `${wsBase}/rooms/sdk-hooks/ws?name=sam`, WebSocket });
    const custom: RoomCustomEvent[] = [];
    client.addEventListener("custom", (e) => custom.push(e));
    try {
      const refused = await client.publish({ op: "refuse", code: "forbidden" }).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(PublishError);
      expect(refused).toMatchObject({ code: "forbidden", message: "refused on purpose" });
      expect(await client.publish({ op: "transform" })).toBe(1);
      await client.send({ type: "x-echo", note: "from the SDK" });
      await expect.poll(() => custom.length, { timeout: 5000 }).toBe(1);
      expect(custom[0]?.event).toMatchObject({ type: "x-echo", frame: { type: "x-echo", note: "from the SDK" }, data: { name: "sam" } });
      await expect(client.send({ type: "not-custom" } as unknown as { type: "x-never" })).rejects.toMatchObject({ code: "bad_request" });
    } finally {
      client.close();
    }
  });
});
