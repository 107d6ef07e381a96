import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { DEFAULT_ACK_DELAY_MS, PublishError, RoomClient, type RoomClientOptions } from "../../client-sdk/src/index";
import { FakeRoomServer } from "../helpers/sdk-fake-server";
import { Recorder, waitFor } from "../helpers/sdk-harness";
import { sleep } from "../helpers/wait";

/**
 * The client against the in-process fake server: acks, token functions,
 * refusals, gaps and timeouts, checked to the frame. The same behaviours
 * against the real local server are in sdk-client.test.ts and sdk-access.test.ts.
 */

const servers: FakeRoomServer[] = [];
const clients: RoomClient[] = [];
async function fake(options: Parameters<typeof FakeRoomServer.start>[0] = {}): Promise<FakeRoomServer> {
  const server = await FakeRoomServer.start(options);
  servers.push(server);
  return server;
}
function open(server: FakeRoomServer, options: Partial<RoomClientOptions> = {}): { client: RoomClient; rec: Recorder } {
  const client = new RoomClient({ WebSocket, url: server.url, backoff: { initialDelayMs: 20, maxDelayMs: 40 }, ...options });
  clients.push(client);
  return { client, rec: new Recorder(client) };
}
afterEach(async () => {
  for (const client of clients.splice(0)) client.close();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

describe("acknowledgements", () => {
  it("acks at most once per ackDelayMs (default 1000 ms), naming the last message with its tag", async () => {
    expect(DEFAULT_ACK_DELAY_MS).toBe(1000);
    const server = await fake();
    const { client, rec } = open(server);
    await waitFor(() => client.state === "open", "the client to open");
    const connection = server.connections[0]!;

    // Ten small frames over ~450 ms: one ack for all of them, about a second after the first.
    const firstAt = Date.now();
    for (let i = 0; i < 10; i++) {
      server.publish({ i });
      await sleep(50);
    }
    await waitFor(() => rec.seqs.length === 10, "ten messages");
    await sleep(300); // 750+ ms after the first frame: still nothing
    expect(connection.acks).toEqual([]);
    await server.waitFor(() => connection.acks.length > 0, "an ack", 3000);
    const [ack] = connection.acks;
    const last = server.history.at(-1)!;
    expect(ack).toMatchObject({ type: "ack", seq: last.seq, tag: last.tag });
    // Timers run late on a loaded machine, never early.
    expect(ack!.at - firstAt).toBeGreaterThanOrEqual(DEFAULT_ACK_DELAY_MS - 5);
    expect(ack!.at - firstAt).toBeLessThan(DEFAULT_ACK_DELAY_MS + 1000);
    await sleep(1200);
    expect(connection.acks).toHaveLength(1); // nothing new arrived, nothing more to ack
  });

  it("acks a trickle at most once per ackDelayMs, and a burst over half the window at once", async () => {
    const server = await fake({ window: 4000 });
    const { client, rec } = open(server, { ackDelayMs: 400 });
    await waitFor(() => client.state === "open", "the client to open");
    const connection = server.connections[0]!;

    // A trickle: one small frame every 100 ms for 2 s is 20 frames and, at one ack per 400 ms, about 5 acks.
    for (let i = 0; i < 20; i++) {
      server.publish(i);
      await sleep(100);
    }
    await waitFor(() => rec.seqs.length === 20, "the trickle");
    await server.waitFor(() => connection.acks.at(-1)?.seq === 20, "the trickle acked", 3000);
    expect(connection.acks.length).toBeGreaterThanOrEqual(3);
    expect(connection.acks.length).toBeLessThanOrEqual(7);

    // Two frames of ~1200 bytes cross half of the 4000-byte window: acked at once, not 400 ms later.
    const before = connection.acks.length;
    const sentAt = Date.now();
    server.publish("x".repeat(1200));
    server.publish("y".repeat(1200));
    await server.waitFor(() => connection.acks.length > before, "the half-window ack", 3000);
    expect(connection.acks.at(-1)).toMatchObject({ seq: 22, tag: server.history.at(-1)!.tag });
    expect(connection.acks.at(-1)!.at - sentAt).toBeLessThan(300);
  });
});

describe("token functions", () => {
  it("asks for a token before every connection attempt and resumes with since and epoch", async () => {
    const server = await fake();
    let calls = 0;
    const { client, rec } = open(server, { token: async () => `t${++calls}` });
    await waitFor(() => client.state === "open", "the client to open");
    server.publish("a", "b");
    await waitFor(() => rec.seqs.length === 2, "two messages");

    server.connections[0]!.close(1012, "restart");
    await server.waitFor(() => server.open.length === 1 && server.connections.length === 2, "the reconnect");
    const second = server.connections[1]!;
    // Each token in the subprotocol offer beside fanout.v1, none in a URL.
    expect(server.connections.map((c) => c.protocols)).toEqual([
      ["fanout.v1", "token.t1"],
      ["fanout.v1", "token.t2"],
    ]);
    expect(server.connections.map((c) => c.url.searchParams.has("token"))).toEqual([false, false]);
    expect(second.url.searchParams.get("since")).toBe("2");
    expect(second.url.searchParams.get("epoch")).toBe(server.epoch);
    server.publish("c");
    await waitFor(() => rec.seqs.length === 3, "the third message");
    expect(rec.seqs).toEqual([1, 2, 3]);
    expect(rec.states.map((s) => [s.state, s.cause, s.code, s.reason])).toEqual([
      ["open", "welcome", undefined, undefined],
      ["reconnecting", "server_closed", 1012, "restart"],
      ["open", "welcome", undefined, undefined],
    ]);
  });

  it("after 4001 gets a new token and reconnects; stops at the third 4001 in a row without a welcome", async () => {
    // Connection 0 is welcomed and later closed with 4001 (its token expired); 1 is refused; 2 is welcomed;
    // after that every connection is refused.
    const server = await fake({ admit: (_url, i) => (i === 0 || i === 2 ? "welcome" : { close: 4001, reason: "the token has expired" }) });
    let calls = 0;
    const { client, rec } = open(server, { token: () => `t${++calls}` });
    await waitFor(() => client.state === "open", "the client to open");
    server.publish(1);
    await waitFor(() => rec.seqs.length === 1, "a message");
    server.connections[0]!.close(4001, "token expired");
    await server.waitFor(() => server.connections.length === 3 && server.connections[2]!.welcomed, "two attempts after the 4001");
    await waitFor(() => client.state === "open", "the client to open again");
    expect(server.connections[2]!.url.searchParams.get("since")).toBe("1");
    expect(rec.states.filter((s) => s.code === 4001).map((s) => [s.state, s.cause])).toEqual([["reconnecting", "auth_refused"]]);

    // Now three refusals in a row: closed for good.
    server.connections[2]!.close(4001, "token expired");
    await waitFor(() => client.state === "closed", "the client to stop");
    expect(server.connections).toHaveLength(5);
    expect(calls).toBe(5);
    expect(rec.states.at(-1)).toMatchObject({ state: "closed", cause: "auth_refused", code: 4001, reason: "the token has expired" });
    await sleep(200);
    expect(server.connections).toHaveLength(5);
  });

  it("stops at the first 4001 with a fixed token, and at 4003 with either", async () => {
    const server = await fake({ admit: (_url, _i, connection) => (connection.token === "fixed" ? { close: 4001 } : { close: 4003, reason: "the token does not open this room" }) });
    const fixed = open(server, { token: "fixed" });
    const refreshing = open(server, { token: () => "fresh" });
    await waitFor(() => fixed.client.state === "closed" && refreshing.client.state === "closed", "both clients to stop");
    await sleep(200);
    expect(server.connections.map((c) => c.token).sort()).toEqual(["fixed", "fresh"]);
    expect(fixed.rec.states.at(-1)).toMatchObject({ state: "closed", cause: "auth_refused", code: 4001 });
    expect(refreshing.rec.states.at(-1)).toMatchObject({ state: "closed", cause: "auth_refused", code: 4003, reason: "the token does not open this room" });
  });

  it("retries with backoff when the token function fails, and treats a hung one as a failed attempt", async () => {
    const server = await fake();
    let calls = 0;
    const { client, rec } = open(server, {
      connectTimeoutMs: 300,
      token: () => {
        calls += 1;
        if (calls === 1) throw new Error("token endpoint down");
        if (calls === 2) return new Promise<string>(() => {}); // never settles
        return Promise.resolve("ok");
      },
    });
    await waitFor(() => client.state === "open", "the client to open", 5000);
    expect(calls).toBe(3);
    expect(rec.errors).toEqual(["token: token endpoint down", "token: the token function did not answer within connectTimeoutMs"]);
    // One state change: the later failure happened while already reconnecting.
    expect(rec.states.map((s) => [s.state, s.cause])).toEqual([
      ["reconnecting", "token_failed"],
      ["open", "welcome"],
    ]);
    expect(server.connections).toHaveLength(1);
    expect(server.connections[0]!.token).toBe("ok");
  });
});

describe("where the token travels", () => {
  it("offers a fixed token in Sec-WebSocket-Protocol beside fanout.v1, keeping it out of every URL; tokenIn query puts it in the URL", async () => {
    const server = await fake();
    const inOffer = open(server, { token: "fixed.jwt-like_token" });
    const inQuery = open(server, { token: "fixed.jwt-like_token", tokenIn: "query" });
    const none = open(server);
    await waitFor(() => [inOffer, inQuery, none].every((c) => c.client.state === "open"), "the clients to open");
    const byToken = (protocols: string[], inUrl: string | null) =>
      server.connections.filter((c) => JSON.stringify(c.protocols) === JSON.stringify(protocols) && c.url.searchParams.get("token") === inUrl);
    expect(byToken(["fanout.v1", "token.fixed.jwt-like_token"], null)).toHaveLength(1);
    expect(byToken([], "fixed.jwt-like_token")).toHaveLength(1);
    expect(byToken([], null)).toHaveLength(1); // no token: no offer, as before
    // The URL the client shows never holds the token.
    expect([inOffer.client.url, inQuery.client.url, none.client.url]).toEqual([server.url, server.url, server.url]);

    // After a reconnect the offer carries the token again, beside the resume position in the URL.
    server.publish("a");
    await waitFor(() => inOffer.rec.seqs.length === 1, "a message");
    server.connections.find((c) => c.protocols.length > 0)!.close(1012, "restart");
    await server.waitFor(() => server.connections.length === 4 && server.connections[3]!.welcomed, "the reconnect");
    expect(server.connections[3]!.protocols).toEqual(["fanout.v1", "token.fixed.jwt-like_token"]);
    expect([...server.connections[3]!.url.searchParams.keys()].sort()).toEqual(["epoch", "since"]);
  });

  it("refuses a fixed token a subprotocol cannot carry when constructed, and treats such a token from a function as a token failure", async () => {
    const server = await fake();
    expect(() => new RoomClient({ WebSocket, url: server.url, token: "has space" })).toThrow(/tokenIn "query"/);

    let calls = 0;
    const { client, rec } = open(server, { token: () => (++calls === 1 ? "has space" : "fine") });
    await waitFor(() => client.state === "open", "the client to open with the second token");
    expect(rec.states.map((s) => [s.state, s.cause])).toEqual([
      ["reconnecting", "token_failed"],
      ["open", "welcome"],
    ]);
    expect(rec.errors).toEqual([expect.stringMatching(/^token: .*subprotocol/)]);
    expect(server.connections.map((c) => c.token)).toEqual(["fine"]); // the first token never left the client

    // In the query any token travels (URL-encoded).
    const query = open(server, { token: "has space", tokenIn: "query" });
    await waitFor(() => query.client.state === "open", "the query client to open");
    expect(server.connections.at(-1)!.url.searchParams.get("token")).toBe("has space");
  });
});

describe("the room's message limit", () => {
  /** Publish frames the server received on any connection. */
  const publishes = (server: FakeRoomServer) => server.connections.flatMap((c) => c.received.filter((r) => r.frame?.type === "publish"));
  const refusal = (promise: Promise<unknown>) => promise.then(() => null, (error: unknown) => (error instanceof PublishError ? error.code : String(error)));

  it("refuses a publish one byte or far over maxMessageBytes before sending it, sends one at the limit, and stays open", async () => {
    const server = await fake({ maxMessageBytes: 100 });
    const { client, rec } = open(server);
    // Measured in UTF-8 bytes of the JSON text: 2 quotes + 24 emoji of 4 bytes + "é" of 2 = 100 bytes, in 52 UTF-16 units.
    const atLimit = "😀".repeat(24) + "é";
    const oneOver = atLimit + "a";
    const farOver = { text: "x".repeat(100_000) };
    expect(Buffer.byteLength(JSON.stringify(atLimit))).toBe(100);
    expect(JSON.stringify(oneOver).length).toBeLessThan(100); // a count of characters would let it through

    // Published while connecting: each waits for the welcome, which brings the limit.
    const early = refusal(client.publish(farOver));
    await waitFor(() => client.state === "open", "the client to open");
    const [first, over, far, after] = await Promise.all([client.publish(atLimit), refusal(client.publish(oneOver)), refusal(client.publish(farOver)), client.publish("small")]);
    expect(await early).toBe("too_large");
    expect([over, far]).toEqual(["too_large", "too_large"]);
    expect([first, after]).toEqual([1, 2]);

    // Nothing over the limit left the client, and the connection it had stays.
    expect(publishes(server).map((r) => (r.frame as { data: unknown }).data)).toEqual([atLimit, "small"]);
    expect(server.connections).toHaveLength(1);
    expect(server.open).toHaveLength(1);
    expect(rec.states.map((s) => s.state)).toEqual(["open"]);
    expect(rec.errors).toEqual([]);
    await expect(client.publish(oneOver)).rejects.toMatchObject({ name: "PublishError", code: "too_large", message: "the data is 101 bytes as JSON, over the room's limit of 100" });
  });

  it("checks nothing locally against a server that announces no limit", async () => {
    const server = await fake();
    const { client } = open(server);
    await waitFor(() => client.state === "open", "the client to open");
    const big = "é".repeat(50_000);
    expect(await client.publish(big)).toBe(1);
    expect(publishes(server)).toHaveLength(1);
  });
});

describe("ordering and liveness", () => {
  it("drops a connection that skips a seq and resumes from the last delivered one", async () => {
    const server = await fake();
    const { client, rec } = open(server);
    await waitFor(() => client.state === "open", "the client to open");
    const [m1, m2, m3] = [1, 2, 3].map((n) => ({ type: "message" as const, seq: n, data: n, ts: Date.now(), tag: n }));
    server.history.push(m1!, m2!, m3!);
    server.connections[0]!.send([m1!, m3!]); // m2 is missing on this socket
    await server.waitFor(() => server.connections.length === 2 && server.connections[1]!.welcomed, "the resume");
    expect(server.connections[1]!.url.searchParams.get("since")).toBe("1");
    await waitFor(() => rec.seqs.length === 3, "the rest");
    expect(rec.seqs).toEqual([1, 2, 3]);
    expect(rec.errors).toContain("bad_frame: expected seq 2, got 3");
    expect(rec.states.map((s) => s.cause)).toEqual(["welcome", "out_of_order", "welcome"]);
  });

  it("gives up on a connection that is never welcomed, and on one whose pings go unanswered", async () => {
    const silent = await fake({ admit: (_url, i) => (i === 0 ? "silent" : "welcome") });
    const a = open(silent, { connectTimeoutMs: 300 });
    await waitFor(() => a.client.state === "open", "a to open on its second attempt", 5000);
    expect(silent.connections).toHaveLength(2);
    expect(a.rec.states.map((s) => [s.state, s.cause])).toEqual([
      ["reconnecting", "no_welcome"],
      ["open", "welcome"],
    ]);

    const deaf = await fake({ answerPings: false });
    const b = open(deaf, { pingIntervalMs: 150, pongTimeoutMs: 200 });
    await waitFor(() => b.client.state === "open", "b to open");
    const openedAt = Date.now();
    await deaf.waitFor(() => deaf.connections.length >= 2, "b to replace its connection", 5000);
    expect(Date.now() - openedAt).toBeLessThan(150 + 200 + 1000);
    expect(deaf.connections[0]!.received.some((r) => r.text === "ping")).toBe(true);
    expect(b.rec.states.find((s) => s.state === "reconnecting")?.cause).toBe("no_pong");
  });
});
