import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PUSHER_ACTIVITY_TIMEOUT_SECONDS, PUSHER_PING, PUSHER_PONG, PusherCloseCode, pusherRoom, SOCKET_ID_PATTERN } from "../../protocol/pusher";
import { APP, backEnd, PusherSocket, pusherVars } from "../helpers/pusher";
import { startServer, type LocalServer } from "../helpers/server";
import { publish, roomStats } from "../helpers/socket";
import { sleep, until } from "../helpers/wait";

/**
 * The Pusher front door spoken by hand: what stock clients never send (frames
 * out of protocol, pongs nobody asked for, readers that stop reading), and the
 * codes each refusal gets (docs/pusher.md#close-codes).
 */
const WINDOW = 16 * 1024;
let server: LocalServer;
beforeAll(async () => {
  server = await startServer({ env: pusherVars(), vars: { WINDOW_BYTES: String(WINDOW), SLOW_GRACE_MS: "1500", PRESENCE_MAX_MEMBERS: "2" } });
});
afterAll(async () => {
  await server?.stop();
});

const roomOf = (channel: string): string => encodeURIComponent(pusherRoom(APP.id, channel));

describe("the door", () => {
  it("welcomes with a socket id the server SDKs sign and the activity timeout, data double-encoded", async () => {
    const socket = await PusherSocket.open(server);
    const [established] = await socket.waitFor("pusher:connection_established");
    expect(typeof established?.rawData).toBe("string");
    expect(established?.data).toMatchObject({ activity_timeout: PUSHER_ACTIVITY_TIMEOUT_SECONDS });
    expect((established?.data as { socket_id: string }).socket_id).toMatch(SOCKET_ID_PATTERN);
    socket.close();
  });

  it("refuses an unknown key and a protocol it cannot speak: pusher:error, then the code, so the client stops", async () => {
    for (const [options, code] of [
      [{ key: "not-the-key" }, PusherCloseCode.APP_NOT_FOUND],
      [{ query: "client=js&version=8.4.0" }, PusherCloseCode.NO_PROTOCOL],
      [{ query: "protocol=6" }, PusherCloseCode.UNSUPPORTED_PROTOCOL],
      [{ query: "protocol=seven" }, PusherCloseCode.BAD_PROTOCOL],
    ] as const) {
      const socket = await PusherSocket.open(server, options);
      const closed = await socket.closed;
      expect(closed.code).toBe(code);
      expect(socket.of("pusher:error")[0]?.data).toMatchObject({ code });
    }
  });

  it("answers pusher:ping with pusher:pong", async () => {
    const socket = await PusherSocket.open(server);
    await socket.socketId();
    socket.send(PUSHER_PING);
    await until(() => socket.events.some((e) => e.event === "pusher:pong"), { what: "pusher:pong" });
    expect(JSON.stringify({ event: "pusher:pong", data: {} })).toBe(PUSHER_PONG);
    socket.close();
  });
});

describe("frames out of protocol", () => {
  it("answers a malformed frame or an unknown event with pusher:error and keeps the connection", async () => {
    const socket = await PusherSocket.open(server);
    await socket.socketId();
    socket.send("{not json");
    socket.send({ event: "pusher:unknown", data: {} });
    socket.send({ event: "pusher:subscribe", data: { nochannel: true } });
    await socket.waitFor("pusher:error", 3);
    socket.subscribe("still-open");
    await socket.waitFor("pusher_internal:subscription_succeeded");
    expect(socket.closeCode).toBeNull();
    socket.close();
  });

  it("refuses a channel name Pusher would refuse with pusher:subscription_error", async () => {
    const socket = await PusherSocket.open(server);
    await socket.socketId();
    socket.subscribe("has spaces");
    socket.subscribe("x".repeat(165));
    const errors = await socket.waitFor("pusher:subscription_error", 2);
    expect(errors.map((e) => e.data)).toEqual([expect.objectContaining({ type: "InvalidChannel", status: 400 }), expect.objectContaining({ type: "InvalidChannel", status: 400 })]);
    socket.close();
  });

  it("closes a binary frame with 4009", async () => {
    const socket = await PusherSocket.open(server);
    await socket.socketId();
    socket.ws.send(Buffer.from([1, 2, 3]));
    expect((await socket.closed).code).toBe(PusherCloseCode.UNAUTHORIZED);
  });

  it("closes a pong for a ping it never sent with 4009: an answer nobody asked for proves nothing", async () => {
    const socket = await PusherSocket.open(server);
    await socket.socketId();
    socket.send({ event: "pusher:pong", data: {} });
    expect((await socket.closed).code).toBe(PusherCloseCode.UNAUTHORIZED);
  });
});

describe("a window without acks", () => {
  const payload = (i: number) => ({ i, pad: "x".repeat(2000) });

  it("asks a reader to prove what it read with pings: one that answers gets everything, in order", async () => {
    const channel = "window-honest";
    const reader = await PusherSocket.open(server);
    await reader.socketId();
    reader.subscribe(channel);
    await reader.waitFor("pusher_internal:subscription_succeeded");
    for (let i = 1; i <= 60; i++) await publish(server.url, roomOf(channel), payload(i));
    const got = await reader.waitFor("message", 60, 15_000, channel);
    expect(got.map((e) => (e.data as { i: number }).i)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    // 120 KB through a 16 KB window: it was asked several times.
    expect(reader.of("pusher:ping").length).toBeGreaterThan(3);
    reader.close();
  });

  it("holds a reader that stops reading to its window, and closes it with 4100 (back off) when it stays behind", async () => {
    const channel = "window-stalled";
    const stalled = await PusherSocket.open(server);
    await stalled.socketId();
    stalled.subscribe(channel);
    await stalled.waitFor("pusher_internal:subscription_succeeded");
    stalled.pauseReading();
    for (let i = 1; i <= 60; i++) await publish(server.url, roomOf(channel), payload(i));
    const stats = await roomStats(server.url, roomOf(channel));
    const line = stats.leaves?.find((leaf) => leaf.pusherHub !== undefined);
    // A window, the ping, and one message past the half-window mark at most.
    expect(line?.windowBytesMax).toBeLessThanOrEqual(WINDOW + 2200);
    expect(line?.behind).toBe(1);
    await sleep(3000);
    (stalled.ws as unknown as { _socket: { resume(): void } })._socket.resume();
    expect((await stalled.closed).code).toBe(PusherCloseCode.OVER_CAPACITY);
  });
});

describe("client events", () => {
  it("are refused on public channels and on channels the connection does not follow, with the connection kept", async () => {
    const socket = await PusherSocket.open(server);
    await socket.socketId();
    socket.subscribe("public-chat");
    await socket.waitFor("pusher_internal:subscription_succeeded");
    socket.send({ event: "client-hello", channel: "public-chat", data: {} });
    socket.send({ event: "client-hello", channel: "private-elsewhere", data: {} });
    const errors = await socket.waitFor("pusher:error", 2);
    expect(errors.map((e) => (e.data as { message: string }).message)).toEqual([expect.stringContaining("private and presence"), expect.stringContaining("subscribe")]);
    expect(socket.closeCode).toBeNull();
    socket.close();
  });
});

describe("client events over their rate", () => {
  it("are refused with pusher:error 4301 past 10 per second, and the connection stays", async () => {
    const socket = await PusherSocket.open(server);
    await socket.socketId();
    // A presence channel, signed as the stock SDK signs it (the test's back end).
    const channel = "presence-rate";
    const socketId = await socket.socketId();
    const auth = backEnd(server).authorizeChannel(socketId, channel, { user_id: "fast" });
    socket.subscribe(channel, { auth: auth.auth, channel_data: auth.channel_data });
    await socket.waitFor("pusher_internal:subscription_succeeded");
    for (let i = 0; i < 15; i++) socket.send({ event: "client-burst", channel, data: { i } });
    const errors = await socket.waitFor("pusher:error", 5);
    expect(errors.map((e) => (e.data as { code: number }).code)).toEqual([4301, 4301, 4301, 4301, 4301]);
    expect(socket.closeCode).toBeNull();
    socket.close();
  });
});

describe("isolation in open mode", () => {
  it("keeps a private channel's room from this service's own HTTP API and broadcasts without a publish key", async () => {
    // This server has no PUBLISH_KEY: open mode, which opens every room but these.
    const secret = roomOf("private-open-mode");
    const publish = await fetch(`${server.url}/rooms/${secret}/publish`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(publish.status).toBe(403);
    expect(((await publish.json()) as { error: string }).error).toBe("forbidden");
    expect((await fetch(`${server.url}/rooms/${secret}/messages`)).status).toBe(403);
    const broadcast = await fetch(`${server.url}/broadcast`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ data: { to: "all" }, rooms: [pusherRoom(APP.id, "private-open-mode"), pusherRoom(APP.id, "public-open-mode")] }),
    });
    expect(await broadcast.json()).toMatchObject({ rooms: 1, refused: 1 });
  });
});

describe("a presence channel at its member cap", () => {
  it("refuses a new member with LimitReached and keeps its connection; a member already there may open another", async () => {
    const sdk = backEnd(server);
    const join = async (user: string): Promise<PusherSocket> => {
      const socket = await PusherSocket.open(server);
      const auth = sdk.authorizeChannel(await socket.socketId(), "presence-capped", { user_id: user });
      socket.subscribe("presence-capped", { auth: auth.auth, channel_data: auth.channel_data });
      await until(() => socket.of("pusher_internal:subscription_succeeded").length + socket.of("pusher:subscription_error").length > 0, { what: `${user}'s answer` });
      return socket;
    };
    // The cap here is PRESENCE_MAX_MEMBERS (2), below Pusher's 100.
    const sockets = [await join("one"), await join("two")];
    const third = await join("three");
    expect(third.of("pusher:subscription_error")[0]?.data).toMatchObject({ type: "LimitReached", status: 4100 });
    expect(third.closeCode).toBeNull();
    const secondTab = await join("one");
    expect(secondTab.of("pusher_internal:subscription_succeeded")).toHaveLength(1);
    for (const socket of [...sockets, third, secondTab]) socket.close();
  });
});

describe("a connection's channels through hibernation", () => {
  it("keeps channels that outgrow the socket's attachment in the hub's storage, and follows them all again when the hub wakes", async () => {
    const socket = await PusherSocket.open(server);
    const socketId = await socket.socketId();
    const sdk = backEnd(server);
    // 20 presence channels, each with a member of ~1 KB of user_info: past what an attachment keeps (16 KiB).
    const info = { bio: "x".repeat(900) };
    for (let i = 0; i < 20; i++) {
      const channel = `presence-big-${i}`;
      const auth = sdk.authorizeChannel(socketId, channel, { user_id: "big", user_info: info });
      socket.subscribe(channel, { auth: auth.auth, channel_data: auth.channel_data });
    }
    socket.subscribe("big-public");
    await socket.waitFor("pusher_internal:subscription_succeeded", 21, 20_000);
    const hubLine = async () => (await roomStats(server.url, roomOf("big-public"))).leaves?.find((leaf) => leaf.pusherHub !== undefined);
    const before = await hubLine();
    // Idle past the runtime's eviction delay; pusher-js's exact ping is answered without waking the hub.
    for (let i = 0; i < 8; i++) {
      await sleep(2500);
      socket.send(PUSHER_PING);
    }
    await sdk.trigger("presence-big-19", "after-sleep", { n: 1 });
    await sdk.trigger("big-public", "after-sleep", { n: 2 });
    const got = await socket.waitFor("after-sleep", 2, 10_000);
    expect(got.map((e) => [e.channel, e.data])).toEqual([
      ["presence-big-19", { n: 1 }],
      ["big-public", { n: 2 }],
    ]);
    // A new instance of the hub: it had hibernated, and followed every channel again from its storage.
    expect((await hubLine())?.instanceStartedAt).toBeGreaterThan((before?.instanceStartedAt ?? 0) + 10_000);
    expect(socket.closeCode).toBeNull();
    socket.close();
  }, 60_000);
});

describe("a front door that is off", () => {
  let off: LocalServer;
  beforeAll(async () => {
    off = await startServer({ env: { PUSHER_APP_ID: APP.id, PUSHER_APP_KEY: APP.key, PUSHER_CLIENT_EVENTS: "0" } });
  });
  afterAll(async () => {
    await off?.stop();
  });

  it("says why to a client that knocks, and closes with 4001 so it stops", async () => {
    const socket = await PusherSocket.open(off);
    expect((await socket.closed).code).toBe(PusherCloseCode.APP_NOT_FOUND);
    expect((socket.of("pusher:error")[0]?.data as { message: string }).message).toContain("PUSHER_APP_SECRET");
  });
});
