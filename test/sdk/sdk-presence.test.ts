import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { RoomClient, type RoomPresenceEvent } from "../../client-sdk/src/index";
import { startServer, type LocalServer } from "../helpers/server";
import { TestSocket } from "../helpers/socket";
import { waitFor } from "../helpers/sdk-harness";
import { startProxy, type TcpProxy } from "../helpers/sdk-proxy";
import { sleep } from "../helpers/wait";

const WINDOW = 16 * 1024;
let server: LocalServer;
let proxy: TcpProxy;
const clients: RoomClient<unknown, { name: string; pad?: string }>[] = [];

beforeAll(async () => {
  server = await startServer({ vars: { WINDOW_BYTES: String(WINDOW), PRESENCE_LEAVE_DELAY_MS: "300" } });
  proxy = await startProxy(server.port);
});

afterAll(async () => {
  for (const c of clients) c.close();
  await proxy?.close();
  await server?.stop();
});

function follow(room: string, member: string) {
  const client = new RoomClient<unknown, { name: string; pad?: string }>(`${proxy.wsUrl}/rooms/${room}/ws`, {
    WebSocket,
    member,
    info: { name: member },
    backoff: { initialDelayMs: 50, maxDelayMs: 200 },
  });
  clients.push(client);
  const events: RoomPresenceEvent<{ name: string; pad?: string }>[] = [];
  client.addEventListener("presence", (e) => events.push(e));
  return { client, events };
}

describe("presence in the client", () => {
  it("keeps room.presence right through far more presence than its window, acking it as it goes", async () => {
    const room = "sdk-presence";
    const { client, events } = follow(room, "me");
    await waitFor(() => events.length >= 1, "the sync");
    expect(events[0]?.action).toBe("sync");
    expect([...(client.presence.members?.values() ?? [])]).toEqual([{ id: "me", info: { name: "me" }, connections: 1, verified: false }]);

    // 40 members with ~900 bytes of data each: more than twice the window, and no message to ack.
    const others: TestSocket[] = [];
    for (let i = 0; i < 40; i++) {
      const info = encodeURIComponent(JSON.stringify({ name: `m${i}`, pad: "x".repeat(900) }));
      others.push(await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?member=m${i}&info=${info}`));
    }
    await waitFor(() => client.presence.count === 41, `41 members (have ${client.presence.count})`);
    expect(client.presence.members?.size).toBe(41);
    expect(client.presence.members?.get("m7")?.info?.name).toBe("m7");
    // Joins arrive in order; when an ack comes too late for the next event (a 16 KiB window fills in
    // a few joins here), the room sends a fresh picture instead of the events in between.
    const joined = events.filter((e) => e.action === "join").map((e) => Number(e.member?.id.slice(1)));
    expect(joined).toEqual([...joined].sort((a, b) => a - b));
    expect(joined.length + events.filter((e) => e.action === "sync").length).toBeGreaterThanOrEqual(41);

    for (const s of others.slice(0, 10)) s.close();
    await waitFor(() => client.presence.count === 31, "ten leaves");
    // Leaves too may be summed up by a fresh picture when an ack comes late: each leave event names one
    // of the ten, and the picture holds exactly the thirty others and this client.
    const left = Array.from({ length: 10 }, (_, i) => `m${i}`);
    for (const e of events.filter((e) => e.action === "leave")) expect(left).toContain(e.member?.info?.name);
    expect([...(client.presence.members?.keys() ?? [])].sort()).toEqual(["me", ...Array.from({ length: 30 }, (_, i) => `m${i + 10}`)].sort());
    for (const s of others) s.close();
  });

  it("replaces its picture with the room's after a reconnect", async () => {
    const room = "sdk-presence-reconnect";
    const { client, events } = follow(room, "me");
    await waitFor(() => client.state === "open" && events.length >= 1, "open");
    const accepted = proxy.accepted;
    // While this client is away, someone joins and stays.
    proxy.refuse(true);
    proxy.drop();
    await waitFor(() => client.state === "reconnecting", "the drop");
    const late = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?member=late`);
    await sleep(200);
    proxy.refuse(false);
    await waitFor(() => proxy.accepted > accepted && client.presence.members?.has("late") === true, "the fresh sync");
    expect([...(client.presence.members?.keys() ?? [])].sort()).toEqual(["late", "me"]);
    expect(events.at(-1)?.action).toBe("sync");
    late.close();
  });
});
