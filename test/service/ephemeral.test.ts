import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Pusher from "pusher-js";
import { CloseCode, type LostEvent, type WelcomeEvent } from "../../protocol";
import { pusherRoom } from "../../protocol/pusher";
import { APP, backEnd, frontEnd, pusherVars, record } from "../helpers/pusher";
import { startServer, type LocalServer } from "../helpers/server";
import { managedServers } from "../helpers/servers";
import { MuxSocket } from "../helpers/multiplex";
import { expectSeqs, publish, roomStats, TestSocket } from "../helpers/socket";
import { sleep } from "../helpers/wait";
import { WebhookReceiver } from "../helpers/webhook-receiver";

/**
 * Ephemeral rooms (a HISTORY_RULES rule with "store": false;
 * docs/history.md#ephemeral-rooms) on the local server with real sockets:
 * what survives hibernation and a restart, and the parts that work as in a
 * room that stores: the window and catch-up, presence, leaves, multiplexed
 * subscribers, webhooks (but message.published).
 */

const RULES = JSON.stringify([{ prefix: "tick:", store: false, maxMessages: 100 }]);
const SECRET = "ephemeral-webhook-secret";

describe("an ephemeral room across hibernation and a restart", () => {
  const serve = managedServers();

  it("keeps its seq and epoch through hibernation (its sockets carry them), and tells a resume from before it what it no longer holds", async () => {
    const server = await serve({ vars: { HISTORY_RULES: RULES } });
    const room = "tick:hibernate";
    const live = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    for (let i = 1; i <= 3; i++) await publish(server.url, room, { i });
    await live.waitForMessages(3);
    const epoch = (live.events[0] as WelcomeEvent).epoch;
    const before = await roomStats(server.url, room);

    // Idle past the runtime's 10 s eviction delay; heartbeats are answered without waking the room.
    for (let i = 0; i < 6; i++) {
      await sleep(2500);
      live.send("ping");
    }
    const answer = await publish(server.url, room, { i: 4 });
    expect(answer.body).toMatchObject({ seq: 4, recipients: 1 });
    await live.waitForMessages(4);
    expectSeqs(live.messages, 1, 4);
    const after = await roomStats(server.url, room);
    // A new instance (the room was evicted), on the same history: seq and epoch carried on.
    expect(after.instanceStartedAt).toBeGreaterThan(before.instanceStartedAt + 10_000);
    expect(after).toMatchObject({ epoch, seq: 4, historyRowsWritten: 0 });

    // What was published before it hibernated is gone from memory: a resume from there is told so.
    const resumed = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?since=1&epoch=${epoch}`);
    await resumed.waitForMessages(1);
    expect(resumed.events.find((e) => e.type === "lost")).toMatchObject({ reason: "history", from: 2, to: 3 });
    expectSeqs(resumed.messages, 4, 4);
    live.close();
    resumed.close();
  }, 45_000);

  it("starts a new epoch after a restart: a resume is told lost (epoch), as after any history restarted", async () => {
    const server = await serve({ vars: { HISTORY_RULES: RULES } });
    const room = "tick:restart";
    const live = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    for (let i = 1; i <= 5; i++) await publish(server.url, room, { i });
    await live.waitForMessages(5);
    const epoch = (live.events[0] as WelcomeEvent).epoch;

    await server.restart();
    expect((await live.closed).code).toBe(CloseCode.SERVICE_RESTART);
    const first = await publish(server.url, room, { after: 1 });
    expect(first.body).toMatchObject({ seq: 1 });
    const resumed = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?since=5&epoch=${epoch}`);
    await resumed.waitFor((s) => s.events.some((e) => e.type === "lost"), 10_000, "lost");
    expect(resumed.events.find((e) => e.type === "lost")).toMatchObject({ reason: "epoch", from: 1, to: 1 } satisfies Partial<LostEvent>);
    const welcome = resumed.events[0] as WelcomeEvent;
    expect(welcome.epoch).not.toBe(epoch);
    await publish(server.url, room, { after: 2 });
    await resumed.waitForMessages(1);
    expectSeqs(resumed.messages, 2, 2);
    resumed.close();
  }, 45_000);

  it("followed only over GET /ws, starts a new epoch once evicted: the hub closes its connections (1012) rather than mixing two histories", async () => {
    const server = await serve({ vars: { HISTORY_RULES: RULES } });
    const room = "tick:mux-only";
    const mux = await MuxSocket.open(`${server.wsUrl}/ws`);
    mux.subscribe(room);
    await mux.waitFor((s) => s.of("subscribed").length === 1, 10_000, "subscribed");
    for (let i = 1; i <= 3; i++) await publish(server.url, room, { i });
    await mux.waitForMessages(room, 3);
    const epoch = mux.epochs.get(room) as string;

    // The room holds no socket of its own to carry its seq: idle, it is evicted, and the hub hibernates.
    for (let i = 0; i < 6; i++) {
      await sleep(2500);
      mux.send("ping");
    }
    expect((await publish(server.url, room, { i: "after" })).body).toMatchObject({ seq: 1 });
    expect((await mux.closed).code).toBe(CloseCode.SERVICE_RESTART);
    // Nothing of the new history reached the connection as if it followed the old one.
    expect(mux.messages(room).map((m) => m.seq)).toEqual([1, 2, 3]);

    const again = await MuxSocket.open(`${server.wsUrl}/ws`);
    again.subscribe(room, { since: 3, epoch });
    await again.waitFor((s) => s.of("lost", room).length === 1, 10_000, "lost");
    expect(again.of("lost", room)[0]).toMatchObject({ reason: "epoch", from: 1, to: 1 });
    await publish(server.url, room, { i: "next" });
    await again.waitForMessages(room, 1);
    expect(again.messages(room).map((m) => m.seq)).toEqual([2]);
    again.close();
  }, 45_000);
});

describe("an ephemeral room's parts that work as in a room that stores", () => {
  let server: LocalServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start(SECRET);
    server = await startServer({
      vars: {
        HISTORY_RULES: RULES,
        // Two sockets on the room's own object, the rest on leaves.
        ROOM_SHARD_SOCKETS: "2",
        WINDOW_BYTES: "4096",
        WEBHOOK_URL: receiver.url,
        WEBHOOK_SECRET: SECRET,
        WEBHOOK_EVENTS: "room.occupied,room.vacated,member.joined,member.left,message.published",
        PRESENCE_LEAVE_DELAY_MS: "200",
      },
    });
  });

  afterAll(async () => {
    await server?.stop();
    await receiver?.stop();
  });

  it("catches a socket that stopped reading up from its ring as acks free its window", async () => {
    const room = "tick:window";
    const reader = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`, { autoAck: false });
    const payload = "x".repeat(400);
    for (let i = 1; i <= 40; i++) await publish(server.url, room, { i, payload });
    // About 4 KiB went out unacknowledged; the rest waits in the room's ring.
    await reader.waitFor((s) => s.messages.length > 0, 10_000, "first messages");
    await sleep(300);
    const held = reader.messages.length;
    expect(held).toBeLessThan(40);
    expect((await roomStats(server.url, room)).behind).toBe(1);
    while (reader.messages.length < 40) {
      const seen = reader.messages.length;
      reader.ack();
      await reader.waitFor((s) => s.messages.length > seen, 10_000, "catch-up after an ack");
    }
    expectSeqs(reader.messages, 1, 40);
    const stats = await roomStats(server.url, room);
    expect(stats.catchUpFrames).toBeGreaterThan(0);
    expect(stats.historyRowsWritten).toBe(0);
    reader.close();
  });

  it("spreads over leaves: every socket gets every message in order, and a leaf's socket resumes from its ring", async () => {
    const room = "tick:sharded";
    const sockets = await Promise.all([1, 2, 3, 4, 5].map(() => TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`)));
    for (let i = 1; i <= 10; i++) await publish(server.url, room, { i });
    for (const s of sockets) {
      await s.waitForMessages(10);
      expectSeqs(s.messages, 1, 10);
    }
    const stats = await roomStats(server.url, room);
    expect(stats.leaves?.reduce((sum, leaf) => sum + leaf.connections, 0)).toBe(3);
    expect(stats.historyRowsWritten).toBe(0);
    const epoch = (sockets[0]?.events[0] as WelcomeEvent).epoch;
    const resumed = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?since=6&epoch=${epoch}`);
    await resumed.waitForMessages(4);
    expectSeqs(resumed.messages, 7, 10);
    expect(resumed.events.some((e) => e.type === "lost")).toBe(false);
    for (const s of [...sockets, resumed]) s.close();
  });

  it("has presence, multiplexed subscribers, and every webhook but message.published", async () => {
    const room = "tick:mux";
    const stored = "stored-mux";
    const member = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?member=alice`);
    const mux = await MuxSocket.open(`${server.wsUrl}/ws?member=bob`);
    mux.subscribe(room);
    mux.subscribe(stored);
    await mux.waitFor((s) => s.of("subscribed").length === 2, 10_000, "subscribed");
    await member.waitFor((s) => s.presence.some((p) => p.action === "join" && p.member?.id === "bob"), 10_000, "bob's join");
    for (let i = 1; i <= 5; i++) {
      await publish(server.url, room, { i });
      await publish(server.url, stored, { i });
    }
    await mux.waitForMessages(room, 5);
    await mux.waitForMessages(stored, 5);
    expect(mux.messages(room).map((m) => m.seq)).toEqual([1, 2, 3, 4, 5]);
    await member.waitForMessages(5);

    await receiver.waitFor((r) => r.eventsOf(stored).filter((e) => e.type === "message.published").length === 5, 20_000, "the stored room's messages");
    await receiver.waitFor((r) => r.summary(room).includes("member.joined:bob"), 20_000, "the ephemeral room's members");
    const types = new Set(receiver.eventsOf(room).map((e) => e.type));
    expect(types.has("room.occupied")).toBe(true);
    expect(types.has("member.joined")).toBe(true);
    expect(types.has("message.published")).toBe(false);
    expect((await roomStats(server.url, room)).historyRowsWritten).toBe(0);
    member.close();
    mux.close();
  });
});

describe("ephemeral rooms through the Pusher front door", () => {
  const serve = managedServers();

  it("makes every channel's room ephemeral with a pusher: rule: events reach pusher-js, a cache channel still hands its last event, no row is written", async () => {
    const server = await serve({ env: pusherVars(), vars: { HISTORY_RULES: JSON.stringify([{ prefix: "pusher:", store: false }]) } });
    const sdk = backEnd(server);
    const clients: Pusher[] = [];
    try {
      const first = frontEnd(server);
      clients.push(first);
      const ticker = record(first, "cache-ticker");
      await ticker.waitFor("pusher:cache_miss");
      for (let price = 1; price <= 3; price++) await sdk.trigger("cache-ticker", "price", { price });
      expect(await ticker.waitFor("price", 3)).toEqual([{ price: 1 }, { price: 2 }, { price: 3 }]);

      // A new subscriber gets the last event, read from the room's ring in memory.
      const late = frontEnd(server);
      clients.push(late);
      const cached = record(late, "cache-ticker");
      expect(await cached.waitFor("price")).toEqual([{ price: 3 }]);
      await sleep(200);
      expect(cached.of("pusher:cache_miss")).toEqual([]);

      const room = pusherRoom(APP.id, "cache-ticker");
      const stats = await roomStats(server.url, encodeURIComponent(room));
      expect(stats).toMatchObject({ seq: 3, historyRowsWritten: 0 });
    } finally {
      for (const client of clients) client.disconnect();
    }
  });
});
