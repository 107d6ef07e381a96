import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pusherRoom, SOCKET_ID_PATTERN } from "../../protocol/pusher";
import Echo from "laravel-echo";
import Pusher from "pusher-js";
import PusherServer from "pusher";
import { randomBytes } from "node:crypto";
import { APP, backEnd, connected, frontEnd, PusherSocket, pusherVars, record } from "../helpers/pusher";
import { startServer, type LocalServer } from "../helpers/server";
import { publish, TestSocket } from "../helpers/socket";
import { sleep, until } from "../helpers/wait";

/**
 * The Pusher front door with the stock client, pusher-js, configured as an app
 * that moves off Pusher would configure it (docs/pusher.md): channels of every
 * kind, presence between clients, client events, cache channels, reconnecting
 * after a restart. Channel authorizations are signed by the stock server SDK.
 */
const PUBLISH_KEY = "pusher-clients-publish-key";
let server: LocalServer;
const clients: Pusher[] = [];

beforeAll(async () => {
  server = await startServer({ env: { ...pusherVars(), PUBLISH_KEY }, vars: { PRESENCE_LEAVE_DELAY_MS: "200" } });
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await server?.stop();
});

function client(...args: Parameters<typeof frontEnd> extends [unknown, ...infer Rest] ? Rest : never): Pusher {
  const made = frontEnd(server, ...args);
  clients.push(made);
  return made;
}

/** Publishes into a channel's room through this service's own HTTP API. */
function publishTo(channel: string, data: unknown): Promise<unknown> {
  return publish(server.url, encodeURIComponent(pusherRoom(APP.id, channel)), data, { headers: { authorization: `Bearer ${PUBLISH_KEY}` } });
}

describe("pusher-js against the front door", () => {
  it("connects with a socket id the server SDKs sign, and gets a public channel's 200 events once each, in order", async () => {
    const alice = client();
    const socketId = await connected(alice);
    expect(socketId).toMatch(SOCKET_ID_PATTERN);
    const orders = record(alice, "orders");
    await orders.waitFor("pusher:subscription_succeeded");
    for (let n = 1; n <= 200; n++) await publishTo("orders", { n });
    const got = await orders.waitFor("message", 200, 20_000);
    expect(got).toEqual(Array.from({ length: 200 }, (_, i) => ({ n: i + 1 })));
    await sleep(200);
    expect(orders.of("message")).toHaveLength(200);
  });

  it("authorizes private channels with the server SDK's signature, refuses a bad one and keeps the connection", async () => {
    const good = client();
    const privateChannel = record(good, "private-ledger");
    await privateChannel.waitFor("pusher:subscription_succeeded");

    const forger = client({ badSignatures: true });
    await connected(forger);
    const refused = record(forger, "private-ledger");
    const [error] = await refused.waitFor("pusher:subscription_error");
    expect(error).toMatchObject({ type: "AuthError", status: 401 });
    // The connection stays: a public channel still works on it.
    const open = record(forger, "after-refusal");
    await open.waitFor("pusher:subscription_succeeded");
    expect(forger.connection.state).toBe("connected");

    await publishTo("private-ledger", { entry: 1 });
    await privateChannel.waitFor("message");
    await publishTo("after-refusal", { ok: true });
    await open.waitFor("message");
    expect(refused.of("message")).toEqual([]);
  });

  it("shows presence members between clients: the picture, joins and leaves, with user_info", async () => {
    const alice = client({ user: { id: "alice", info: { name: "Alice" } } });
    const room = record(alice, "presence-lobby");
    const [mine] = (await room.waitFor("pusher:subscription_succeeded")) as { count: number; me: { id: string } }[];
    expect(mine).toMatchObject({ count: 1, me: { id: "alice" } });

    const bob = client({ user: { id: "bob", info: { name: "Bob" } } });
    const bobs = record(bob, "presence-lobby");
    const [picture] = (await bobs.waitFor("pusher:subscription_succeeded")) as { count: number; members: Record<string, unknown> }[];
    expect(picture?.count).toBe(2);
    expect(picture?.members).toEqual({ alice: { name: "Alice" }, bob: { name: "Bob" } });
    const [added] = await room.waitFor("pusher:member_added");
    expect(added).toEqual({ id: "bob", info: { name: "Bob" } });

    bob.disconnect();
    const [removed] = await room.waitFor("pusher:member_removed");
    expect(removed).toMatchObject({ id: "bob" });
  });

  it("relays client events to the others with the sender's user_id, never back to the sender", async () => {
    const alice = client({ user: { id: "alice" } });
    const bob = client({ user: { id: "bob" } });
    const alices = record(alice, "presence-typing");
    // Pusher passes a client event's sender to the event's own bindings (not to global ones).
    const senders: unknown[] = [];
    alice.channel("presence-typing").bind("client-typing", (_data: unknown, meta: { user_id?: string }) => senders.push(meta.user_id));
    const bobs = record(bob, "presence-typing");
    await alices.waitFor("pusher:subscription_succeeded");
    await bobs.waitFor("pusher:subscription_succeeded");
    const channel = bob.channel("presence-typing");
    for (let i = 1; i <= 3; i++) expect(channel.trigger("client-typing", { i })).toBe(true);
    const got = await alices.waitFor("client-typing", 3);
    expect(got).toEqual([{ i: 1 }, { i: 2 }, { i: 3 }]);
    expect(senders).toEqual(["bob", "bob", "bob"]);
    await sleep(300);
    expect(bobs.of("client-typing")).toEqual([]);
  });

  it("gives a cache channel's new subscriber its last event, or pusher:cache_miss when it has none", async () => {
    const first = client();
    const empty = record(first, "cache-ticker");
    await empty.waitFor("pusher:cache_miss");
    await publishTo("cache-ticker", { price: 1 });
    await publishTo("cache-ticker", { price: 2 });
    await empty.waitFor("message", 2);

    const late = client();
    const cached = record(late, "cache-ticker");
    const [last] = await cached.waitFor("message");
    expect(last).toEqual({ price: 2 });
    await sleep(200);
    expect(cached.of("pusher:cache_miss")).toEqual([]);
    expect(cached.of("message")).toEqual([{ price: 2 }]);
  });

  it("signs a user in, delivers server-to-user events to that user only, and refuses another's user channel", async () => {
    const carol = client({ signin: { id: "carol" } });
    await connected(carol);
    const received: unknown[] = [];
    // This service's own publishes are events named `message` (docs/pusher.md#one-room-two-protocols).
    carol.user.bind("message", (data: unknown) => received.push(data));
    await carol.user.signinDonePromise;
    expect(carol.user.user_data).toMatchObject({ id: "carol" });
    // pusher-js subscribes #server-to-user-carol by itself after the sign-in.
    await until(() => carol.user.serverToUserChannel?.subscribed === true, { what: "the server-to-user channel" });
    // The room of a user's channel is private: this service's own API reaches it with the publish key.
    await publish(server.url, encodeURIComponent(pusherRoom(APP.id, "#server-to-user-carol")), { total: 12 }, { headers: { authorization: `Bearer ${PUBLISH_KEY}` } });
    await until(() => received.length === 1, { what: "the server-to-user event" });
    expect(received).toEqual([{ total: 12 }]);

    // pusher-js will not name another user's channel; a raw client can, and is refused.
    const mallory = await PusherSocket.open(server);
    await mallory.socketId();
    mallory.subscribe("#server-to-user-carol", { auth: "" });
    const [error] = await mallory.waitFor("pusher:subscription_error");
    expect(error?.data).toMatchObject({ type: "AuthError", status: 403 });
    mallory.close();
  });

  it("tells a signed-in user when users on its watchlist come online and go offline", async () => {
    const watcher = client({ signin: { id: "watcher", watchlist: ["dana", "erin"] } });
    const seen: { name: string; user_ids: string[] }[] = [];
    watcher.user.watchlist.bind("online", (event: { name: string; user_ids: string[] }) => seen.push(event));
    watcher.user.watchlist.bind("offline", (event: { name: string; user_ids: string[] }) => seen.push(event));
    await connected(watcher);
    await watcher.user.signinDonePromise;
    const dana = client({ signin: { id: "dana" } });
    await until(() => seen.some((e) => e.name === "online"), { what: "dana online" });
    expect(seen).toEqual([{ name: "online", user_ids: ["dana"] }]);
    dana.disconnect();
    await until(() => seen.length === 2, { what: "dana offline" });
    expect(seen[1]).toEqual({ name: "offline", user_ids: ["dana"] });

    // A watcher that signs in while a watched user is online hears so at once.
    const erin = client({ signin: { id: "erin" } });
    await connected(erin);
    await until(() => erin.user.serverToUserChannel?.subscribed === true, { what: "erin's channel" });
    const late = client({ signin: { id: "late", watchlist: ["erin"] } });
    const lateSeen: unknown[] = [];
    late.user.watchlist.bind("online", (event: unknown) => lateSeen.push(event));
    await until(() => lateSeen.length === 1, { what: "erin online, to a late watcher" });
    expect(lateSeen).toEqual([{ name: "online", user_ids: ["erin"] }]);
  });

  it("serves Laravel Echo: .listen on a private channel to events a Laravel back end broadcasts, and .here/.joining on a presence channel", async () => {
    const echo = new Echo({ broadcaster: "pusher", key: APP.key, client: client({ user: { id: "7", info: { name: "Ann" } } }) });
    const shipped: unknown[] = [];
    echo.private("orders.7").listen("OrderShipped", (event: unknown) => shipped.push(event));
    const here: unknown[][] = [];
    const joining: unknown[] = [];
    echo.join("chat.1").here((members: unknown[]) => here.push(members)).joining((member: unknown) => joining.push(member));
    await until(() => here.length === 1, { what: "Echo's here()" });
    expect(here[0]).toEqual([{ name: "Ann" }]);
    // What Laravel's pusher broadcaster sends: the event's class name, through the stock SDK.
    await until(() => (echo.connector as { pusher: Pusher }).pusher.channel("private-orders.7")?.subscribed === true, { what: "the private subscribe" });
    await backEnd(server).trigger("private-orders.7", "App\\Events\\OrderShipped", { order: { id: 7 } });
    await until(() => shipped.length === 1, { what: "OrderShipped" });
    expect(shipped).toEqual([{ order: { id: 7 } }]);
    const other = client({ user: { id: "8", info: { name: "Ben" } } });
    record(other, "presence-chat.1");
    await until(() => joining.length === 1, { what: "Echo's joining()" });
    expect(joining).toEqual([{ name: "Ben" }]);
    echo.disconnect();
  });

  it("passes encrypted channels' payloads through untouched: the server SDK encrypts, pusher-js decrypts, the room holds only ciphertext", async () => {
    const masterKey = randomBytes(32).toString("base64");
    const sdk = new PusherServer({ appId: APP.id, key: APP.key, secret: APP.secret, host: "127.0.0.1", port: String(server.port), useTLS: false, encryptionMasterKeyBase64: masterKey });
    // pusher-js's Node build decrypts encrypted channels itself (its web build needs pusher-js/with-encryption).
    const reader = new Pusher(APP.key, {
      cluster: "local", wsHost: "127.0.0.1", wsPort: server.port, forceTLS: false, enabledTransports: ["ws"], disableStats: true,
      channelAuthorization: { endpoint: "/unused", transport: "ajax", customHandler: ({ socketId, channelName }, callback) => callback(null, sdk.authorizeChannel(socketId, channelName)) },
    });
    clients.push(reader);
    const secretChannel = reader.subscribe("private-encrypted-vault");
    const got: unknown[] = [];
    secretChannel.bind("opened", (data: unknown) => got.push(data));
    await until(() => secretChannel.subscribed, { what: "the encrypted subscribe" });
    await sdk.trigger("private-encrypted-vault", "opened", { code: 1234 });
    await until(() => got.length === 1, { what: "the decrypted event" });
    expect(got).toEqual([{ code: 1234 }]);
    // What the room stored is the ciphertext the SDK sent, never the plain data.
    const page = (await (await fetch(`${server.url}/rooms/${encodeURIComponent(pusherRoom(APP.id, "private-encrypted-vault"))}/messages`, { headers: { authorization: `Bearer ${PUBLISH_KEY}` } })).json()) as { messages: { data: string }[] };
    expect(page.messages).toHaveLength(1);
    expect(JSON.parse(page.messages[0]!.data)).toEqual({ nonce: expect.any(String), ciphertext: expect.any(String) });
    expect(page.messages[0]!.data).not.toContain("1234");
  });

  it("keeps a private channel's room out of this service's own protocol in open mode", async () => {
    // The server runs with no TOKEN_SECRET: every room of its own protocol is open, but not these.
    const socket = await TestSocket.open(`${server.wsUrl}/rooms/${encodeURIComponent(pusherRoom(APP.id, "private-ledger"))}/ws`);
    const closed = await socket.closed;
    expect(closed.code).toBe(4003);
    const open = await TestSocket.open(`${server.wsUrl}/rooms/${encodeURIComponent(pusherRoom(APP.id, "orders"))}/ws`);
    await open.waitFor((s) => s.events.length > 0);
    expect(open.events[0]).toMatchObject({ type: "welcome" });
    open.close();
  });

  it("reconnects and resubscribes by itself after a restart (closed with 4200), and gets what is published after", async () => {
    const alice = client();
    const before = await connected(alice);
    const feed = record(alice, "restart-feed");
    await feed.waitFor("pusher:subscription_succeeded");
    await server.restart();
    await until(() => alice.connection.state === "connected" && alice.connection.socket_id !== before, { timeoutMs: 20_000, what: "pusher-js to reconnect" });
    await feed.waitFor("pusher:subscription_succeeded", 2, 20_000);
    await publishTo("restart-feed", { after: true });
    await feed.waitFor("message");
    expect(feed.of("message")).toEqual([{ after: true }]);
  });
});
