import type Pusher from "pusher-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { HistoryPage, RoomStats } from "../../protocol";
import { pusherRoom } from "../../protocol/pusher";
import { startServer, type LocalServer } from "../helpers/server";
import { TestSocket } from "../helpers/socket";
import { readUntil, sleep, until } from "../helpers/wait";
import { APP, backEnd, connected, frontEnd, pusherVars, record, signedRequest, type FrontEndOptions, type Recorder } from "../helpers/pusher";

/**
 * Pusher's HTTP API (docs/pusher.md#the-http-api) against the local server,
 * called by the stock `pusher` server SDK and heard by stock pusher-js
 * clients: triggers to one and several channels with a sender excluded,
 * batches, the channel queries, presence users, terminated connections,
 * server-to-user events; and each malformed request answered with its
 * status and `{"error","message"}`.
 */

const roomOf = (channel: string) => pusherRoom(APP.id, channel);

/** Subscribes and waits until the server confirmed it; the recorder has what the channel sees. */
async function subscribed(client: Pusher, channel: string): Promise<Recorder> {
  const recorder = record(client, channel);
  await recorder.waitFor("pusher:subscription_succeeded");
  return recorder;
}

describe("the Pusher HTTP API", () => {
  let server: LocalServer;
  const clients: Pusher[] = [];
  const client = (options: FrontEndOptions = {}) => {
    const c = frontEnd(server, options);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    server = await startServer({ vars: { ...pusherVars(), PRESENCE_LEAVE_DELAY_MS: "200" } });
  });

  afterEach(() => {
    for (const c of clients.splice(0)) c.disconnect();
  });

  afterAll(async () => {
    await server?.stop("SIGKILL");
  });

  it("trigger: an event reaches a channel's pusher-js subscribers, and is a message of its room with a seq, in history and for this service's own subscribers", async () => {
    const sdk = backEnd(server);
    const a = client();
    const channel = await subscribed(a, "orders");
    const own = await TestSocket.open(`${server.wsUrl}/rooms/${encodeURIComponent(roomOf("orders"))}/ws`);
    const answer = await sdk.trigger("orders", "price", { amount: 42 });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({});
    expect(await channel.waitFor("price")).toEqual([{ amount: 42 }]);
    // The same event, as this service's own protocol shows it: its name beside the data (a string: Pusher's).
    await own.waitForMessages(1);
    expect(own.messages[0]).toMatchObject({ seq: 1, event: "price", data: '{"amount":42}' });
    own.close();
    const history = await fetch(`${server.url}/rooms/${encodeURIComponent(roomOf("orders"))}/messages`);
    expect(((await history.json()) as HistoryPage).messages.map((m) => [m.seq, m.data])).toEqual([[1, '{"amount":42}']]);
  });

  it("trigger to several channels, the sender excluded by socket_id, in order per channel", async () => {
    const sdk = backEnd(server);
    const sender = client();
    const other = client();
    const senderId = await connected(sender);
    const senderSeen = await Promise.all(["multi-a", "multi-b"].map((name) => subscribed(sender, name)));
    const otherSeen = await Promise.all(["multi-a", "multi-b"].map((name) => subscribed(other, name)));
    expect((await sdk.trigger(["multi-a", "multi-b"], "note", "excluded", { socket_id: senderId })).status).toBe(200);
    expect((await sdk.trigger(["multi-a", "multi-b"], "note", "everyone")).status).toBe(200);
    await until(() => otherSeen.every((r) => r.of("note").length === 2) && senderSeen.every((r) => r.of("note").length === 1), { what: "the events" });
    expect(otherSeen.map((r) => r.of("note"))).toEqual([
      ["excluded", "everyone"],
      ["excluded", "everyone"],
    ]);
    // The sender got the second event of each channel and not the first, which came before it.
    expect(senderSeen.map((r) => r.of("note"))).toEqual([["everyone"], ["everyone"]]);
  });

  it("trigger with info answers each channel's subscription_count, and user_count on presence channels", async () => {
    const sdk = backEnd(server);
    const ada = client({ user: { id: "ada" } });
    const adaTab = client({ user: { id: "ada" } });
    const bob = client({ user: { id: "bob" } });
    await Promise.all([subscribed(ada, "presence-lobby"), subscribed(adaTab, "presence-lobby"), subscribed(bob, "presence-lobby"), subscribed(bob, "counted")]);
    const answer = await sdk.trigger(["presence-lobby", "counted"], "hello", {}, { info: "user_count,subscription_count" });
    expect(await answer.json()).toEqual({
      channels: { "presence-lobby": { user_count: 2, subscription_count: 3 }, counted: { subscription_count: 1 } },
    });
  });

  it("triggerBatch: every event in order, each to its channel; more than 10 is 413", async () => {
    const sdk = backEnd(server);
    const a = client();
    const one = await subscribed(a, "batch-one");
    const two = await subscribed(a, "batch-two");
    const batch = Array.from({ length: 10 }, (_, i) => ({ channel: i % 2 === 0 ? "batch-one" : "batch-two", name: "e", data: { i } }));
    const answer = await sdk.triggerBatch(batch);
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({});
    await until(() => one.of("e").length + two.of("e").length === 10, { what: "the batch" });
    expect(one.of("e")).toEqual([0, 2, 4, 6, 8].map((i) => ({ i })));
    expect(two.of("e")).toEqual([1, 3, 5, 7, 9].map((i) => ({ i })));

    const withInfo = await sdk.triggerBatch([
      { channel: "batch-one", name: "e", data: "x", info: "subscription_count" },
      { channel: "batch-two", name: "e", data: "y" },
    ]);
    expect(await withInfo.json()).toEqual({ batch: [{ subscription_count: 1 }, {}] });

    const tooMany = await sdk.triggerBatch([...batch, { channel: "batch-one", name: "e", data: "eleventh" }]).catch((e: { status: number; body: string }) => e);
    expect(tooMany).toMatchObject({ status: 413 });
    expect(JSON.parse((tooMany as { body: string }).body)).toMatchObject({ error: "too_large" });
  });

  it("GET /channels lists the app's occupied channels, by prefix, with user counts of presence channels", async () => {
    const sdk = backEnd(server);
    const ada = client({ user: { id: "ada" } });
    const bob = client({ user: { id: "bob" } });
    await Promise.all([subscribed(ada, "listed-x"), subscribed(ada, "presence-listed"), subscribed(bob, "presence-listed"), subscribed(bob, "private-listed")]);
    const all = await readUntil(
      async () => (await (await sdk.get({ path: "/channels" })).json()) as { channels: Record<string, unknown> },
      (body) => ["listed-x", "presence-listed", "private-listed"].every((name) => name in body.channels),
      { what: "the channels listed" },
    );
    expect(all.channels["listed-x"]).toEqual({});
    // A member on one Pusher hub reaches the room's count with that hub's next report (a moment later).
    const presence = await readUntil(
      async () => (await (await sdk.get({ path: "/channels", params: { filter_by_prefix: "presence-", info: "user_count,subscription_count" } })).json()) as { channels: Record<string, unknown> },
      (body) => JSON.stringify(body.channels["presence-listed"]) === JSON.stringify({ user_count: 2, subscription_count: 2 }),
      { what: "both members counted" },
    );
    expect(Object.keys(presence.channels).every((name) => name.startsWith("presence-"))).toBe(true);
    expect(presence.channels["presence-listed"]).toEqual({ user_count: 2, subscription_count: 2 });
    const prefixed = (await (await sdk.get({ path: "/channels", params: { filter_by_prefix: "listed-" } })).json()) as { channels: Record<string, unknown> };
    expect(Object.keys(prefixed.channels)).toEqual(["listed-x"]);
    // user_count needs a presence- prefix.
    const refused = await signedRequest(server, "GET", "/channels", { params: { info: "user_count" } });
    expect(refused).toEqual({ status: 400, body: { error: "bad_request", message: expect.stringContaining("presence-") } });
  });

  it("GET /channels/{channel}: occupied and its counts; a channel nobody used is not occupied and gets no room", async () => {
    const sdk = backEnd(server);
    const ada = client({ user: { id: "ada" } });
    const bob = client({ user: { id: "bob" } });
    await Promise.all([subscribed(ada, "presence-info"), subscribed(bob, "presence-info")]);
    // A member on one Pusher hub reaches the room's count with that hub's next report (a moment later).
    const info = await readUntil(
      async () => (await sdk.get({ path: "/channels/presence-info", params: { info: "user_count,subscription_count" } })).json(),
      (body) => JSON.stringify(body) === JSON.stringify({ occupied: true, user_count: 2, subscription_count: 2 }),
      { what: "both members counted" },
    );
    expect(info).toEqual({ occupied: true, user_count: 2, subscription_count: 2 });
    const none = await sdk.get({ path: "/channels/never-used", params: { info: "subscription_count" } });
    expect(await none.json()).toEqual({ occupied: false, subscription_count: 0 });
    // Asking created nothing: the room of that channel is unknown to the service.
    expect((await fetch(`${server.url}/rooms/${encodeURIComponent(roomOf("never-used"))}`)).status).toBe(404);
    const notPresence = await signedRequest(server, "GET", "/channels/plain", { params: { info: "user_count" } });
    expect(notPresence).toEqual({ status: 400, body: { error: "bad_request", message: "user_count is an attribute of presence channels only" } });
  });

  it("GET /channels/{cache-…} with info=cache: the last event's data and how long it is kept", async () => {
    const sdk = backEnd(server);
    await sdk.trigger("cache-price", "tick", { p: 1 });
    await sdk.trigger("cache-price", "tick", { p: 2 });
    const body = (await (await sdk.get({ path: "/channels/cache-price", params: { info: "cache" } })).json()) as { occupied: boolean; cache?: { data: string; ttl: number } };
    expect(body.occupied).toBe(false);
    expect(body.cache?.data).toBe('{"p":2}');
    expect(body.cache?.ttl).toBeGreaterThan(1700);
    expect(body.cache?.ttl).toBeLessThanOrEqual(1800);
  });

  it("GET /channels/{presence-…}/users: each member once, however many connections it has", async () => {
    const sdk = backEnd(server);
    const tabs = [client({ user: { id: "ada" } }), client({ user: { id: "ada" } }), client({ user: { id: "bob" } })];
    await Promise.all(tabs.map((t) => subscribed(t, "presence-users")));
    const users = (await (await sdk.get({ path: "/channels/presence-users/users" })).json()) as { users: { id: string }[] };
    expect(users.users.map((u) => u.id).sort()).toEqual(["ada", "bob"]);
    const notPresence = await signedRequest(server, "GET", "/channels/plain/users");
    expect(notPresence).toEqual({ status: 400, body: { error: "bad_request", message: "only presence channels have users" } });
  });

  it("sendToUser reaches a signed-in pusher-js client; terminateUserConnections closes that user's connections and nobody else's", async () => {
    const sdk = backEnd(server);
    const got: unknown[] = [];
    const signedIn = (c: Pusher) => new Promise<void>((resolve) => c.bind("pusher:signin_success", () => resolve()));
    const carl = client({ signin: { id: "carl" } });
    const carlTab = client({ signin: { id: "carl" } });
    const dana = client({ signin: { id: "dana" } });
    carl.user.bind("notice", (data: unknown) => got.push(data));
    await Promise.all([signedIn(carl), signedIn(carlTab), signedIn(dana)]);
    // pusher-js subscribes to #server-to-user-carl once signed in.
    await until(() => carl.user.serverToUserChannel?.subscribed === true, { what: "carl's user channel" });
    expect((await sdk.sendToUser("carl", "notice", { text: "hi" })).status).toBe(200);
    await until(() => got.length === 1, { what: "the server-to-user event" });
    expect(got).toEqual([{ text: "hi" }]);

    expect((await sdk.terminateUserConnections("carl")).status).toBe(200);
    await until(() => carl.connection.state !== "connected" && carlTab.connection.state !== "connected", { what: "carl's connections closed", timeoutMs: 10_000 });
    await sleep(300);
    expect(dana.connection.state).toBe("connected");
  });

  it("answers 401 to a wrong secret, an unknown key and a stale clock, and to a request without its signature", async () => {
    const wrongSecret = await backEnd(server, "not-the-secret").trigger("orders", "price", {}).catch((e: { status: number; body: string }) => e);
    expect(wrongSecret).toMatchObject({ status: 401 });
    expect(JSON.parse((wrongSecret as { body: string }).body)).toMatchObject({ error: "unauthorized" });
    const unknownKey = await backEnd(server, APP.secret, "another-key").get({ path: "/channels" }).catch((e: { status: number; body: string }) => e);
    expect(unknownKey).toMatchObject({ status: 401 });
    expect(JSON.parse((unknownKey as { body: string }).body)).toEqual({ error: "unauthorized", message: "auth_key is not the key of this app" });

    const realNow = Date.now;
    let stale: string;
    try {
      Date.now = () => realNow() - 700_000;
      stale = backEnd(server).createSignedQueryString({ method: "GET", path: `/apps/${APP.id}/channels` });
    } finally {
      Date.now = realNow;
    }
    const staleAnswer = await fetch(`${server.url}/apps/${APP.id}/channels?${stale}`);
    expect(staleAnswer.status).toBe(401);
    expect(((await staleAnswer.json()) as { message: string }).message).toMatch(/auth_timestamp is 70\d s from the server's clock/);

    const unsigned = await fetch(`${server.url}/apps/${APP.id}/channels`);
    expect(unsigned.status).toBe(401);
    expect(await unsigned.json()).toMatchObject({ error: "unauthorized" });
    const noSignature = await signedRequest(server, "GET", "/channels", { query: (q) => q.replace(/&auth_signature=[0-9a-f]+/, "") });
    expect(noSignature).toEqual({ status: 401, body: { error: "unauthorized", message: "auth_signature is missing" } });
    const body = JSON.stringify({ name: "e", channel: "orders", data: "x" });
    const otherBody = await signedRequest(server, "POST", "/events", { body, sentBody: body.replace('"x"', '"y"') });
    expect(otherBody).toEqual({ status: 401, body: { error: "unauthorized", message: "body_md5 is not the MD5 of the body" } });
  });

  it("answers each malformed request with its status and error", async () => {
    const post = (body: string) => signedRequest(server, "POST", "/events", { body });
    const event = (fields: Record<string, unknown>) => post(JSON.stringify({ name: "e", channel: "orders", data: "x", ...fields }));
    const cases: [string, Promise<{ status: number; body: Record<string, unknown> }>, number, string][] = [
      ["a body that is not JSON", post("{not json"), 400, "bad_json"],
      ["data that is not a string", event({ data: { a: 1 } }), 400, "bad_request"],
      ["data over 10 KB", event({ data: "x".repeat(10 * 1024 + 1) }), 413, "too_large"],
      ["no channel", post(JSON.stringify({ name: "e", data: "x" })), 400, "bad_request"],
      ["an invalid channel name", event({ channel: "spaces are not allowed" }), 400, "bad_request"],
      ["more than 100 channels", event({ channel: undefined, channels: Array.from({ length: 101 }, (_, i) => `c${i}`) }), 400, "bad_request"],
      ["an event name over 200 characters", event({ name: "e".repeat(201) }), 400, "bad_request"],
      ["a client event over HTTP", event({ name: "client-typing", channel: "private-x" }), 403, "forbidden"],
      ["a protocol event over HTTP", event({ name: "pusher:subscribe" }), 403, "forbidden"],
      ["a socket_id that is not one", event({ socket_id: "abc" }), 400, "bad_request"],
      ["an unknown info attribute", event({ info: "everything" }), 400, "bad_request"],
      ["a body over 1 MiB", post(JSON.stringify({ name: "e", channel: "orders", data: "x".repeat(1024 * 1024) })), 413, "too_large"],
      ["a batch that is not a list", signedRequest(server, "POST", "/batch_events", { body: JSON.stringify({ batch: {} }) }), 400, "bad_request"],
      ["an unknown app id", signedRequest(server, "GET", "/channels", { appId: "999" }), 404, "not_found"],
      ["an unknown path", signedRequest(server, "GET", "/nothing"), 404, "not_found"],
      ["a GET of /events", signedRequest(server, "GET", "/events"), 405, "method_not_allowed"],
      ["a parameter twice", signedRequest(server, "GET", "/channels", { query: (q) => `${q}&Info=user_count&info=x` }), 400, "bad_request"],
    ];
    for (const [what, answer, status, error] of cases) {
      const got = await answer;
      expect({ what, status: got.status, error: got.body.error, hasMessage: typeof got.body.message === "string" }).toEqual({ what, status, error, hasMessage: true });
    }
    // Nothing refused was published.
    const orders = await fetch(`${server.url}/rooms/${encodeURIComponent(roomOf("orders"))}`);
    expect(((await orders.json()) as RoomStats).seq).toBe(1);
  });
});

describe("the Pusher HTTP API with the front door off", () => {
  it("answers 404 and says which vars are missing", async () => {
    const off = await startServer();
    try {
      const answer = await fetch(`${off.url}/apps/${APP.id}/channels`);
      expect(answer.status).toBe(404);
      expect(await answer.json()).toEqual({ error: "not_found", message: "the Pusher HTTP API is off: PUSHER_APP_ID, PUSHER_APP_KEY and PUSHER_APP_SECRET are not set" });
    } finally {
      await off.stop("SIGKILL");
    }
  });
});
