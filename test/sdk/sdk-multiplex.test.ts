import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import {
  FanoutClient,
  PublishError,
  TokenRefreshError,
  type FanoutClientOptions,
  type RoomSubscription,
  type SubscriptionCause,
  type SubscriptionState,
} from "../../client-sdk/src/index";
import { FakeMultiplexServer, fakeJwt, type FakeMultiplexOptions } from "../helpers/sdk-fake-multiplex-server";
import { waitFor } from "../helpers/sdk-harness";
import { sleep } from "../helpers/wait";

/**
 * FanoutClient and its RoomSubscriptions against the in-process multiplexed
 * server (sdk-fake-multiplex-server.ts), which speaks protocol/multiplex.ts:
 * many rooms over one socket, each with its own position, presence, acks and
 * refusals, one window and one frame budget for the connection. The server
 * checks every ack as a claim (a wrong one closes the connection with 4000)
 * and enforces the window and the budgets, so a client that got them wrong
 * fails here. The same against the real service: sdk-multiplex-server.test.ts.
 */

const servers: FakeMultiplexServer[] = [];
const clients: FanoutClient[] = [];
async function fake(options: FakeMultiplexOptions = {}): Promise<FakeMultiplexServer> {
  const server = await FakeMultiplexServer.start(options);
  servers.push(server);
  return server;
}
function connect(server: FakeMultiplexServer, options: Partial<FanoutClientOptions> = {}): FanoutClient {
  const client = new FanoutClient({ WebSocket, url: server.url, backoff: { initialDelayMs: 20, maxDelayMs: 40 }, ...options });
  clients.push(client);
  return client;
}
afterEach(async () => {
  for (const client of clients.splice(0)) client.close();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

/** Everything one subscription delivered, in order. */
class SubscriptionLog {
  readonly seqs: number[] = [];
  readonly data: unknown[] = [];
  readonly states: Array<{ state: SubscriptionState; cause: SubscriptionCause; code?: string }> = [];
  readonly lost: Array<{ reason: string; from: number; to: number }> = [];
  readonly errors: string[] = [];
  readonly presence: string[] = [];

  constructor(readonly subscription: RoomSubscription) {
    subscription.addEventListener("message", (e) => {
      this.seqs.push(e.seq);
      this.data.push(e.data);
    });
    subscription.addEventListener("state", (e) => this.states.push(e.code === undefined ? { state: e.state, cause: e.cause } : { state: e.state, cause: e.cause, code: e.code }));
    subscription.addEventListener("lost", (e) => this.lost.push({ reason: e.reason, from: e.from, to: e.to }));
    subscription.addEventListener("error", (e) => this.errors.push(`${e.code}: ${e.message}`));
    subscription.addEventListener("presence", (e) => this.presence.push(`${e.action}:${e.presence.count}`));
  }
}
function follow(client: FanoutClient, room: string, options: { since?: number; epoch?: string } = {}): SubscriptionLog {
  return new SubscriptionLog(client.room(room, options));
}
const subscribed = (...logs: SubscriptionLog[]) => () => logs.every((l) => l.subscription.state === "subscribed");

describe("subscribing over one connection", () => {
  it("follows several rooms on one socket, each with its own messages, and stops one without touching the others", async () => {
    const server = await fake();
    const client = connect(server);
    const [a, b] = [follow(client, "a"), follow(client, "b")];
    expect(client.room("a")).toBe(a.subscription); // one subscription per room
    await waitFor(subscribed(a, b), "both rooms subscribed");
    expect(server.connections).toHaveLength(1);
    expect(server.connections[0]!.subscribes.map((f) => f.room)).toEqual(["a", "b"]);
    expect(a.states).toEqual([{ state: "subscribed", cause: "subscribed" }]);

    server.publish("a", "a1", "a2");
    server.publish("b", "b1");
    await waitFor(() => a.seqs.length === 2 && b.seqs.length === 1, "the messages");
    expect([a.data, b.data]).toEqual([["a1", "a2"], ["b1"]]);

    b.subscription.unsubscribe();
    expect(b.states.at(-1)).toEqual({ state: "unsubscribed", cause: "unsubscribe" });
    expect(client.rooms.has("b")).toBe(false);
    const connection = server.connections[0]!;
    await server.waitFor(() => !connection.rooms.has("b"), "the server to stop following b");
    expect(connection.framesOf("unsubscribe").map((f) => f.room)).toEqual(["b"]);
    server.publish("a", "a3");
    server.publish("b", "b2"); // nobody follows b any more
    await waitFor(() => a.seqs.length === 3, "a's third message");
    await sleep(100);
    expect(b.seqs).toEqual([1]);
    await expect(b.subscription.publish("late")).rejects.toMatchObject({ code: "closed" });

    // Asked for again, the room is a new subscription from where the old one stood.
    const again = follow(client, "b", { since: b.subscription.lastSeq, epoch: b.subscription.epoch });
    await waitFor(subscribed(again), "b again");
    await waitFor(() => again.seqs.length === 1, "the message b missed");
    expect(again.data).toEqual(["b2"]);
    expect(client.state).toBe("open");
    expect(server.connections).toHaveLength(1);
  });

  it("takes the answer to an unsubscribe for no news when the room is asked for again at once", async () => {
    const server = await fake();
    const client = connect(server);
    const first = follow(client, "r");
    await waitFor(subscribed(first), "the room");
    server.publish("r", 1, 2, 3);
    await waitFor(() => first.seqs.length === 3, "three messages");
    // Leave and come back before the server answered: the answer must not end the new subscription.
    first.subscription.unsubscribe();
    const second = follow(client, "r", { since: 1, epoch: first.subscription.epoch });
    await waitFor(subscribed(second), "the room again");
    await waitFor(() => second.seqs.length === 2, "the messages after seq 1");
    server.publish("r", 4);
    await waitFor(() => second.seqs.length === 3, "a live message");
    expect(second.seqs).toEqual([2, 3, 4]);
    expect(second.states).toEqual([{ state: "subscribed", cause: "subscribed" }]);
    expect(server.connections[0]!.received.flatMap((r) => (r.frame && r.frame.type !== "ack" ? [r.frame.type] : []))).toEqual(["subscribe", "unsubscribe", "subscribe"]);
  });

  it("refuses one room for its token with the connection and the other rooms going on", async () => {
    const server = await fake({ grants: (_token, room) => room !== "secret" });
    const client = connect(server, { token: "t" });
    const states: string[] = [];
    client.addEventListener("state", (e) => states.push(e.state));
    const [open, secret, other] = [follow(client, "open"), follow(client, "secret"), follow(client, "other")];
    await waitFor(() => secret.subscription.state === "unsubscribed" && open.subscription.state === "subscribed" && other.subscription.state === "subscribed", "the refusal");
    expect(secret.states).toEqual([{ state: "unsubscribed", cause: "forbidden", code: "forbidden" }]);
    expect(client.rooms.has("secret")).toBe(false);
    server.publish("open", 1);
    server.publish("other", 2);
    await waitFor(() => open.seqs.length === 1 && other.seqs.length === 1, "messages in the granted rooms");
    expect(states).toEqual(["open"]);
    expect(server.connections).toHaveLength(1);
    expect(server.open).toHaveLength(1);
  });

  it("surfaces too_many_rooms on the room past the connection's maxRooms; leaving one makes room", async () => {
    const server = await fake({ maxRooms: 2 });
    const client = connect(server);
    const logs = ["r1", "r2", "r3"].map((room) => follow(client, room));
    await waitFor(() => logs[2]!.subscription.state === "unsubscribed", "the third room's refusal");
    expect(logs[2]!.states).toEqual([{ state: "unsubscribed", cause: "too_many_rooms", code: "too_many_rooms" }]);
    await waitFor(subscribed(logs[0]!, logs[1]!), "the first two");
    expect(client.limits?.maxRooms).toBe(2);

    logs[0]!.subscription.unsubscribe();
    const third = follow(client, "r3");
    await waitFor(subscribed(third), "r3 once there is room");
    expect(server.connections).toHaveLength(1);
  });

  it("subscribes no faster than the welcome's subscribeRate allows, queueing the rest", async () => {
    // The server refuses any subscribe over 4 at once and 2 a second after: the client must never be refused.
    const server = await fake({ subscribeRate: { perSecond: 2, burst: 4 } });
    const client = connect(server);
    const rooms = Array.from({ length: 6 }, (_, i) => `room-${i}`);
    const logs = rooms.map((room) => follow(client, room));
    await waitFor(subscribed(...logs), "every room subscribed", 10_000);
    const connection = server.connections[0]!;
    expect(connection.subscribes.map((f) => f.room)).toEqual(rooms);
    expect(logs.flatMap((l) => l.errors)).toEqual([]); // not one rate_limited refusal
    // Half the burst at once, then no faster than three quarters of the rate.
    const times = connection.subscribes.map((f) => f.at);
    expect(times[1]! - times[0]!).toBeLessThan(500);
    for (let i = 2; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(600);
  });

  it("asks again, later, for a room the server refused for its subscribe rate", async () => {
    // This server enforces less than it announces: one subscribe, then one a second.
    const server = await fake({ subscribeRate: { perSecond: 10, burst: 10 }, enforcedSubscribeRate: { perSecond: 1, burst: 1 } });
    const client = connect(server);
    const [a, b] = [follow(client, "a"), follow(client, "b")];
    await waitFor(subscribed(a, b), "both rooms", 10_000);
    expect(b.errors).toEqual(["rate_limited: subscribes over the connection's subscribe rate"]);
    expect(b.states).toEqual([{ state: "subscribed", cause: "subscribed" }]); // never unsubscribed on the way
    expect(server.connections[0]!.subscribes.map((f) => f.room)).toEqual(["a", "b", "b"]);
  });
});

describe("after the connection drops", () => {
  it("resumes every subscription from its own position and epoch, and only the room whose history changed hears of it", async () => {
    // While `away`, the server turns connections back (1013: try again later), so the client stays away.
    let away = false;
    const server = await fake({ admit: () => (away ? { close: 1013, reason: "busy" } : "welcome") });
    const client = connect(server);
    const logs = ["a", "b", "c"].map((room) => follow(client, room));
    const [a, b, c] = logs as [SubscriptionLog, SubscriptionLog, SubscriptionLog];
    await waitFor(subscribed(a, b, c), "three rooms");
    server.publish("a", 1, 2, 3);
    server.publish("b", 1);
    await waitFor(() => a.seqs.length === 3 && b.seqs.length === 1, "the first messages");

    away = true;
    server.connections[0]!.close(1012, "restart");
    await waitFor(() => a.subscription.state === "subscribing", "the drop");
    // While the client is away: more in every room, and c's history is lost.
    server.publish("a", 4, 5);
    server.publish("b", 2);
    server.publish("c", 1);
    const cEpoch = c.subscription.epoch;
    server.loseHistory("c");
    server.publish("c", "new 1");
    away = false;
    await waitFor(subscribed(a, b, c), "the resubscribes");
    const second = server.connections.at(-1)!;
    const asked = Object.fromEntries(second.subscribes.map((f) => [f.room, [f.since, f.epoch]]));
    expect(asked).toEqual({ a: [3, server.room("a").epoch], b: [1, server.room("b").epoch], c: [0, cEpoch] });
    await waitFor(() => a.seqs.length === 5 && b.seqs.length === 2 && c.lost.length === 1, "what was missed");
    server.publish("c", "new 2");
    await waitFor(() => c.seqs.length === 1, "c's next message");
    expect(a.seqs).toEqual([1, 2, 3, 4, 5]);
    expect(b.seqs).toEqual([1, 2]);
    expect([a.lost, b.lost]).toEqual([[], []]);
    expect(c.lost).toEqual([{ reason: "epoch", from: 1, to: 1 }]);
    expect(c.data).toEqual(["new 2"]);
    expect(c.subscription.epoch).toBe(server.room("c").epoch);
    for (const log of logs) {
      expect(log.states.map((s) => [s.state, s.cause])).toEqual([
        ["subscribed", "subscribed"],
        ["subscribing", "connection_lost"],
        ["subscribed", "subscribed"],
      ]);
    }
    expect(server.open).toHaveLength(1);
  });

  it("resubscribes after a drop while the subscribes were still queued, and ends every room when the client closes", async () => {
    const server = await fake({ subscribeRate: { perSecond: 1, burst: 2 } });
    const client = connect(server);
    const logs = ["a", "b", "c"].map((room) => follow(client, room));
    await waitFor(() => logs[0]!.subscription.state === "subscribed", "the first room");
    server.connections[0]!.close(1012, "restart"); // b and c were still waiting for the budget
    await waitFor(subscribed(...logs), "every room on the second connection", 10_000);
    expect(server.connections.map((c) => c.subscribes.map((f) => f.room))).toEqual([["a"], ["a", "b", "c"]]);

    client.close();
    for (const log of logs) expect(log.states.at(-1)).toEqual({ state: "unsubscribed", cause: "connection_closed" });
    expect(client.rooms.size).toBe(0);
    expect(client.room("late").state).toBe("unsubscribed");
  });
});

describe("acknowledgements on one window", () => {
  it("acks each room with its own last message and tag, every room at once when the connection's window is half full", async () => {
    const server = await fake({ window: 4000 });
    const client = connect(server, { ackDelayMs: 5000 });
    const [a, b] = [follow(client, "a"), follow(client, "b")];
    await waitFor(subscribed(a, b), "both rooms");
    const connection = server.connections[0]!;
    await sleep(50);
    const before = connection.acks.length; // the presence syncs are not yet half a window

    // 1,200 + 900 bytes in two rooms: together past half the window, neither alone.
    server.publish("a", "x".repeat(1200));
    await sleep(100);
    expect(connection.acks.length).toBe(before);
    server.publish("b", "y".repeat(900));
    await server.waitFor(() => connection.acks.length >= before + 2, "acks for both rooms", 2000);
    const acks = connection.acks.slice(before).map(({ room, seq, tag }) => ({ room, seq, tag }));
    expect(acks).toEqual(
      expect.arrayContaining([
        { room: "a", seq: 1, tag: server.room("a").history[0]!.tag },
        { room: "b", seq: 1, tag: server.room("b").history[0]!.tag },
      ]),
    );
    expect(connection.unacked).toBe(0);
  });

  it("acks within ackDelayMs once per room, presence with the room's last seq, and keeps a burst across rooms flowing through a small window", async () => {
    const server = await fake({ window: 3000 });
    const client = connect(server, { ackDelayMs: 300 });
    const [a, b] = [follow(client, "a", {}), follow(client, "b")];
    await waitFor(subscribed(a, b), "both rooms");
    const connection = server.connections[0]!;
    // The presence syncs that followed each subscribe are acked with the seq each room stood at.
    await server.waitFor(() => connection.unacked === 0, "the syncs acked", 2000);
    expect(connection.acks.map((x) => [x.room, x.seq]).sort()).toEqual([
      ["a", 0],
      ["b", 0],
    ]);

    // Far more than the window, in both rooms: the server holds what does not fit until acks free it.
    const burst = Array.from({ length: 40 }, (_, i) => `${i}:${"z".repeat(200)}`);
    for (const data of burst) {
      server.publish("a", data);
      server.publish("b", data);
    }
    await waitFor(() => a.seqs.length === 40 && b.seqs.length === 40, "every message of both rooms", 15_000);
    expect(a.data).toEqual(burst);
    expect(b.data).toEqual(burst);
    expect(connection.mostUnacked).toBeLessThanOrEqual(3000);
    await server.waitFor(() => connection.unacked === 0, "everything acked", 2000);
    expect(server.open).toHaveLength(1); // no ack was refused
  });
});

describe("presence per room", () => {
  it("keeps each room's members apart", async () => {
    const server = await fake();
    server.room("a").members = [{ id: "ann", connections: 1, verified: true, info: { name: "Ann" } }];
    const client = connect(server);
    const [a, b] = [follow(client, "a"), follow(client, "b")];
    await waitFor(() => a.presence.length === 1 && b.presence.length === 1, "a sync per room");
    expect([a.subscription.presence.count, b.subscription.presence.count]).toEqual([1, 0]);
    expect([...(a.subscription.presence.members?.keys() ?? [])]).toEqual(["ann"]);

    // A message in b, then a join: the join's ack names b's last seq with the join's tag.
    server.publish("b", "hello");
    await waitFor(() => b.seqs.length === 1, "b's message");
    server.presence("b", { type: "presence", action: "join", count: 1, member: { id: "bob", connections: 1, verified: false } });
    await waitFor(() => b.presence.length === 2, "b's join");
    expect(b.presence).toEqual(["sync:0", "join:1"]);
    const connection = server.connections[0]!;
    await server.waitFor(() => connection.unacked === 0, "everything acked", 3000);
    expect(connection.acks.filter((x) => x.room === "b").at(-1)?.seq).toBe(1);
    expect(server.open).toHaveLength(1); // the server took every ack as a true claim
    expect(a.presence).toEqual(["sync:1"]);
    expect([...(b.subscription.presence.members?.keys() ?? [])]).toEqual(["bob"]);
    expect([...(a.subscription.presence.members?.keys() ?? [])]).toEqual(["ann"]);
  });
});

describe("publishing", () => {
  it("publishes into the right room, waits until the room is subscribed, and refuses locally what is over maxMessageBytes", async () => {
    const server = await fake({ maxMessageBytes: 100 });
    const client = connect(server);
    const a = follow(client, "a");
    const b = follow(client, "b");
    const early = a.subscription.publish("before the welcome");
    const [atLimit, oneOver] = ["😀".repeat(24) + "é", "😀".repeat(24) + "éa"];
    expect(Buffer.byteLength(JSON.stringify(atLimit))).toBe(100);
    expect(await early).toBe(1);
    const results = await Promise.allSettled([a.subscription.publish(atLimit), a.subscription.publish(oneOver), b.subscription.publish({ to: "b" })]);
    expect(results.map((r) => (r.status === "fulfilled" ? r.value : (r.reason as PublishError).code))).toEqual([2, "too_large", 1]);
    const published = server.connections[0]!.framesOf("publish").map((f) => [f.room, f.data]);
    expect(published).toEqual([
      ["a", "before the welcome"],
      ["a", atLimit],
      ["b", { to: "b" }],
    ]);
    await waitFor(() => a.seqs.length === 2 && b.seqs.length === 1, "the publishes delivered back");
    expect(server.open).toHaveLength(1);
    expect(client.state).toBe("open");
  });

  it("holds a room's publish while its subscribe waits for the subscribe budget, and lets another room's go first", async () => {
    const server = await fake({ subscribeRate: { perSecond: 1, burst: 2 } });
    const client = connect(server);
    const [a, b] = [follow(client, "a"), follow(client, "b")];
    await waitFor(subscribed(a), "the first room");
    expect(b.subscription.state).toBe("subscribing"); // its subscribe waits about a second
    const toB = b.subscription.publish("to b");
    const toA = a.subscription.publish("to a");
    expect(await toA).toBe(1);
    expect(await toB).toBe(1);
    const connection = server.connections[0]!;
    const order = connection.received.flatMap((r) => (r.frame?.type === "subscribe" || r.frame?.type === "publish" ? [`${r.frame.type} ${r.frame.room}`] : []));
    expect(order).toEqual(["subscribe a", "publish a", "subscribe b", "publish b"]);
  });

  it("rejects a publish when its room's subscription ends before it could go", async () => {
    const server = await fake({ grants: (_token, room) => room !== "closed-room" });
    const client = connect(server);
    const log = follow(client, "closed-room");
    const publish = log.subscription.publish("never sent");
    await expect(publish).rejects.toBeInstanceOf(PublishError);
    await expect(publish).rejects.toMatchObject({ code: "closed" });
    expect(log.states.at(-1)?.cause).toBe("forbidden");
    expect(server.connections[0]!.framesOf("publish")).toEqual([]);
  });
});

describe("tokens", () => {
  it("reconnects with the token function's next token after a 4001 and resumes every room", async () => {
    const server = await fake();
    let calls = 0;
    const client = connect(server, { token: () => `t${++calls}` });
    const [a, b] = [follow(client, "a"), follow(client, "b")];
    await waitFor(subscribed(a, b), "both rooms");
    server.publish("a", 1);
    await waitFor(() => a.seqs.length === 1, "a message");
    server.connections[0]!.close(4001, "the token has expired");
    await waitFor(() => server.connections.length === 2 && a.subscription.state === "subscribed" && b.subscription.state === "subscribed", "the reconnect");
    expect(server.connections.map((c) => c.protocols)).toEqual([
      ["fanout.v1", "token.t1"],
      ["fanout.v1", "token.t2"],
    ]);
    expect(server.connections[1]!.subscribes.find((f) => f.room === "a")?.since).toBe(1);
    server.publish("a", 2);
    await waitFor(() => a.seqs.length === 2, "the next message");
    expect(a.seqs).toEqual([1, 2]);
  });

  it("refreshes on the open connection with auth, and ends the rooms the new token no longer grants", async () => {
    // Tokens name the rooms they grant: "rooms.a.b".
    const server = await fake({ grants: (token, room) => (token ?? "").split(".").slice(1).includes(room) });
    const client = connect(server, { token: "rooms.a.b" });
    const [a, b] = [follow(client, "a"), follow(client, "b")];
    await waitFor(subscribed(a, b), "both rooms");
    const authorized: number[] = [];
    client.addEventListener("authorized", (e) => authorized.push(e.exp));

    const exp = await client.refreshToken("rooms.a");
    expect(exp).toBeGreaterThan(Date.now() / 1000);
    expect(authorized).toEqual([exp]);
    expect(b.states.at(-1)).toEqual({ state: "unsubscribed", cause: "forbidden", code: "forbidden" });
    expect(a.subscription.state).toBe("subscribed");
    server.publish("a", "still here");
    await waitFor(() => a.seqs.length === 1, "a's message");
    expect(server.connections).toHaveLength(1);
    expect(server.connections[0]!.framesOf("auth").map((f) => f.token)).toEqual(["rooms.a"]);

    // A later connection opens with the token given last (it replaced the fixed one).
    server.connections[0]!.close(1012, "restart");
    await waitFor(() => server.connections.length === 2 && a.subscription.state === "subscribed", "the reconnect");
    expect(server.connections[1]!.token).toBe("rooms.a");
  });

  it("rejects a refresh the server refuses, and one it cannot send", async () => {
    const server = await fake({ expiryOf: (token) => (token === "bad" ? null : 2_000_000_000) });
    const client = connect(server, { token: "good" });
    await waitFor(() => client.state === "open", "the connection");
    await expect(client.refreshToken("bad")).rejects.toMatchObject({ name: "TokenRefreshError", code: "unauthorized" });
    await expect(client.refreshToken("x".repeat(9000))).rejects.toMatchObject({ code: "bad_request" });
    await expect(client.refreshToken()).rejects.toMatchObject({ code: "bad_request" }); // no token function to ask
    expect(await client.refreshToken("good-again")).toBe(2_000_000_000);
    expect(server.connections[0]!.framesOf("auth").map((f) => f.token)).toEqual(["bad", "good-again"]);
    client.close();
    await expect(client.refreshToken("late")).rejects.toBeInstanceOf(TokenRefreshError);
  });

  it("with a token function, refreshes by itself before the token expires, without reconnecting", async () => {
    const server = await fake();
    const expiries: number[] = [];
    const client = connect(server, {
      refreshBeforeExpiryMs: 2000,
      token: () => {
        const exp = Math.floor(Date.now() / 1000) + 3;
        expiries.push(exp);
        return fakeJwt({ exp });
      },
    });
    const a = follow(client, "a");
    await waitFor(subscribed(a), "the room");
    const connection = server.connections[0]!;
    await server.waitFor(() => connection.framesOf("auth").length >= 1, "an auth frame", 4000);
    const [auth] = connection.framesOf("auth");
    expect(auth!.at - connection.openedAt).toBeLessThan(3000); // before the first token expired
    expect(expiries.length).toBeGreaterThanOrEqual(2);
    await waitFor(() => connection.received.length > 0 && connection.token === auth!.token, "the server to take it");
    expect(server.connections).toHaveLength(1);
    expect(a.subscription.state).toBe("subscribed");
  });
});
