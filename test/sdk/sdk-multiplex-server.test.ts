import { createHmac } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { FanoutClient, type FanoutClientOptions, type RoomSubscription, type SubscriptionCause, type SubscriptionState } from "../../client-sdk/src/index";
import { startServer, type LocalServer } from "../helpers/server";
import { publish, waitFor } from "../helpers/sdk-harness";
import { startProxy, type TcpProxy } from "../helpers/sdk-proxy";
import { sleep } from "../helpers/wait";

/**
 * FanoutClient against the local server's multiplexed connection (`GET /ws`,
 * protocol/multiplex.ts): what must hold for the client and the service
 * together. Every subscription resumes after a restart, each from its own
 * position; a token that does not grant a room gets that room refused while
 * the connection and its other rooms go on (at subscribe, and after a token
 * refresh narrows the grants); a refresh before expiry keeps the connection;
 * a connection past its room limit gets too_many_rooms for that room only;
 * and a reader that stalls with several rooms loses nothing across the
 * window, the slow-consumer close and the resume. The same behaviours
 * against the in-process multiplexed server, to the frame: sdk-multiplex.test.ts.
 *
 * A server without the multiplexed connection answers `GET /ws` with 404;
 * every test here then skips, saying so.
 */

const NO_MULTIPLEX = "the local server answers GET /ws with 404: it has no multiplexed connection yet, so these checks wait for it";

/** Whether `server` has the multiplexed connection: a plain GET of /ws is then anything but 404 (426: upgrade required). */
async function hasMultiplex(server: LocalServer): Promise<boolean> {
  const response = await fetch(`${server.url}/ws`);
  await response.body?.cancel();
  return response.status !== 404;
}

let roomCounter = 0;
const uniqueRoom = (label: string) => `mux-${label}-${process.pid}-${Date.now().toString(36)}-${++roomCounter}`;

/**
 * An HS256 subscribe token signed here, as a token issuer of the
 * application's would sign it: the test depends on the token's wire format
 * only (claims of docs/security.md), not on where the service keeps its code.
 */
function signToken(secret: string, claims: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const body = `${part({ alg: "HS256", typ: "JWT" })}.${part({ iat: Math.floor(Date.now() / 1000), ...claims })}`;
  return `${body}.${createHmac("sha256", secret).update(body).digest("base64url")}`;
}
const inAnHour = () => Math.floor(Date.now() / 1000) + 3600;

/** Everything one subscription delivered, in order. */
class SubscriptionLog {
  readonly seqs: number[] = [];
  readonly lost: unknown[] = [];
  readonly states: Array<{ state: SubscriptionState; cause: SubscriptionCause; code?: string }> = [];
  constructor(readonly subscription: RoomSubscription) {
    subscription.addEventListener("message", (e) => this.seqs.push(e.seq));
    subscription.addEventListener("lost", (e) => this.lost.push({ reason: e.reason, from: e.from, to: e.to }));
    subscription.addEventListener("state", (e) => this.states.push({ state: e.state, cause: e.cause, ...(e.code === undefined ? {} : { code: e.code }) }));
  }
}
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

const clients: FanoutClient[] = [];
function connect(options: FanoutClientOptions): { client: FanoutClient; states: string[] } {
  const client = new FanoutClient({ WebSocket, backoff: { initialDelayMs: 100, maxDelayMs: 1000 }, ...options });
  clients.push(client);
  const states: string[] = [];
  client.addEventListener("state", (e) => states.push(`${e.state}:${e.cause}`));
  return { client, states };
}
afterEach(() => {
  for (const client of clients.splice(0)) client.close();
});

describe("the multiplexed connection of the local server, open mode", () => {
  let server: LocalServer;
  let available = false;
  beforeAll(async () => {
    server = await startServer({ vars: { MAX_ROOMS_PER_CONNECTION: "3" } });
    available = await hasMultiplex(server);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("resumes every subscription after a restart, each from its own position: every message once, in order", async (ctx) => {
    ctx.skip(!available, NO_MULTIPLEX);
    const rooms = [uniqueRoom("restart-a"), uniqueRoom("restart-b"), uniqueRoom("restart-c")];
    const { client } = connect({ host: server.url });
    const logs = rooms.map((room) => new SubscriptionLog(client.room(room)));
    await waitFor(() => logs.every((l) => l.subscription.state === "subscribed"), "every room subscribed");
    // Different positions per room, so a resume that mixed them up would show.
    for (const [i, room] of rooms.entries()) for (let n = 0; n <= i * 3; n++) await publish(server.url, room, { n });
    await waitFor(() => logs.every((l, i) => l.seqs.length === i * 3 + 1), "the first messages");

    await server.restart();
    for (const room of rooms) for (let n = 0; n < 5; n++) await publish(server.url, room, { after: n });
    await waitFor(() => logs.every((l, i) => l.seqs.length === i * 3 + 6), "every message after the restart", 40_000);
    for (const [i, log] of logs.entries()) {
      expect(log.seqs).toEqual(range(1, i * 3 + 6));
      expect(log.lost).toEqual([]);
      expect(log.states.map((s) => s.cause)).toEqual(["subscribed", "connection_lost", "subscribed"]);
    }
    expect(client.state).toBe("open");
  });

  it("refuses the room past the connection's room limit with too_many_rooms, and keeps the others", async (ctx) => {
    ctx.skip(!available, NO_MULTIPLEX);
    const { client, states } = connect({ host: server.url });
    await waitFor(() => client.state === "open", "the connection");
    const maxRooms = client.limits!.maxRooms;
    ctx.skip(maxRooms > 200, `the server announces maxRooms ${maxRooms}: MAX_ROOMS_PER_CONNECTION was not taken, and ${maxRooms + 1} subscribes are too many for this test`);
    const logs = range(0, maxRooms).map((i) => new SubscriptionLog(client.room(uniqueRoom(`limit-${i}`))));
    // The server may take the subscribes in any order: one room of them, whichever, is the one too many.
    const settled = () => logs.every((l) => l.subscription.state !== "subscribing");
    await waitFor(settled, "every subscribe answered", 30_000);
    const refused = logs.filter((l) => l.subscription.state === "unsubscribed");
    expect(refused.map((l) => l.states)).toEqual([[{ state: "unsubscribed", cause: "too_many_rooms", code: "too_many_rooms" }]]);
    const first = logs.find((l) => l.subscription.state === "subscribed")!;
    await publish(server.url, first.subscription.room, "still here");
    await waitFor(() => first.seqs.length === 1, "a message in a room within the limit");
    expect(states).toEqual(["open:welcome"]);
  });
});

describe("the multiplexed connection of the local server, with tokens", () => {
  const TOKEN_SECRET = "multiplex-test-secret-4c1d";
  let server: LocalServer;
  let available = false;
  beforeAll(async () => {
    server = await startServer({ vars: { TOKEN_SECRET } });
    available = await hasMultiplex(server);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("refuses a room the token does not grant, for that room alone: the connection and the other rooms stay", async (ctx) => {
    ctx.skip(!available, NO_MULTIPLEX);
    const prefix = `${uniqueRoom("grants")}-ok-`;
    const token = signToken(TOKEN_SECRET, { prefix, exp: inAnHour() });
    const { client, states } = connect({ host: server.url, token });
    const granted = [new SubscriptionLog(client.room(`${prefix}1`)), new SubscriptionLog(client.room(`${prefix}2`))];
    const other = new SubscriptionLog(client.room(uniqueRoom("not-granted")));
    await waitFor(() => other.subscription.state === "unsubscribed" && granted.every((l) => l.subscription.state === "subscribed"), "the refusal and the granted rooms");
    expect(other.states).toEqual([{ state: "unsubscribed", cause: "forbidden", code: "forbidden" }]);
    for (const log of granted) await publish(server.url, log.subscription.room, "granted");
    await waitFor(() => granted.every((l) => l.seqs.length === 1), "messages in the granted rooms");
    expect(states).toEqual(["open:welcome"]);
    expect(client.state).toBe("open");
  });

  it("narrows the grants with a token refresh on the open connection: the room no longer granted ends as forbidden, the other goes on", async (ctx) => {
    ctx.skip(!available, NO_MULTIPLEX);
    const prefix = `${uniqueRoom("refresh")}-`;
    const [keep, drop] = [`${prefix}keep`, `${prefix}drop`];
    const { client, states } = connect({ host: server.url, token: signToken(TOKEN_SECRET, { prefix, exp: inAnHour() }) });
    const [kept, dropped] = [new SubscriptionLog(client.room(keep)), new SubscriptionLog(client.room(drop))];
    await waitFor(() => kept.subscription.state === "subscribed" && dropped.subscription.state === "subscribed", "both rooms");

    const exp = inAnHour();
    expect(await client.refreshToken(signToken(TOKEN_SECRET, { room: keep, exp }))).toBe(exp);
    await waitFor(() => dropped.subscription.state === "unsubscribed", "the room the new token does not grant");
    expect(dropped.states.at(-1)).toMatchObject({ state: "unsubscribed", cause: "forbidden" });
    await publish(server.url, keep, "kept");
    await waitFor(() => kept.seqs.length === 1, "a message in the room still granted");
    expect(states).toEqual(["open:welcome"]);
  });

  it("refreshes a token function's token before it expires, so the connection outlives the first token", async (ctx) => {
    ctx.skip(!available, NO_MULTIPLEX);
    const prefix = `${uniqueRoom("expiry")}-`;
    const firstExpiry = Math.floor(Date.now() / 1000) + 4;
    let calls = 0;
    const { client, states } = connect({
      host: server.url,
      refreshBeforeExpiryMs: 2500,
      token: () => signToken(TOKEN_SECRET, { prefix, exp: ++calls === 1 ? firstExpiry : inAnHour() }),
    });
    const authorized: number[] = [];
    client.addEventListener("authorized", (e) => authorized.push(e.exp));
    const log = new SubscriptionLog(client.room(`${prefix}room`));
    await waitFor(() => log.subscription.state === "subscribed", "the room");
    await waitFor(() => authorized.length === 1, "the refresh", 10_000);
    // Past the first token's expiry (and the server's check of it): still the first connection.
    await sleep(Math.max(0, firstExpiry * 1000 - Date.now()) + 3000);
    await publish(server.url, `${prefix}room`, "after the first token expired");
    await waitFor(() => log.seqs.length === 1, "a message");
    expect(states).toEqual(["open:welcome"]);
    expect(calls).toBe(2);
  });
});

describe("a stalled reader with several rooms on the local server", () => {
  let server: LocalServer;
  let proxy: TcpProxy;
  let available = false;
  beforeAll(async () => {
    // A small window and a short grace, so a stalled connection is closed as a slow consumer within the test.
    server = await startServer({ vars: { WINDOW_BYTES: "16384", SLOW_GRACE_MS: "1500" } });
    proxy = await startProxy(server.port);
    available = await hasMultiplex(server);
  });
  afterAll(async () => {
    await proxy?.close();
    await server?.stop();
  });

  it("loses nothing when it stops reading past the window: every room resumes from its own position on a new connection", async (ctx) => {
    ctx.skip(!available, NO_MULTIPLEX);
    const rooms = [uniqueRoom("stall-a"), uniqueRoom("stall-b"), uniqueRoom("stall-c")];
    const { client, states } = connect({ host: proxy.url, pingIntervalMs: 1000, pongTimeoutMs: 1000 });
    const logs = rooms.map((room) => new SubscriptionLog(client.room(room)));
    await waitFor(() => logs.every((l) => l.subscription.state === "subscribed"), "every room subscribed");
    expect(client.limits!.window).toBe(16_384);

    // The reader stops: nothing flows either way on its connection, and nothing closes it.
    proxy.freeze();
    const text = "x".repeat(1000);
    for (let n = 1; n <= 40; n++) for (const room of rooms) await publish(server.url, room, { n, text });
    // The client notices the dead connection (no pong) and comes back through the proxy on a new one.
    await waitFor(() => logs.every((l) => l.seqs.length === 40), "every message of every room", 60_000);
    for (const room of rooms) await publish(server.url, room, { n: 41, text: "live" });
    await waitFor(() => logs.every((l) => l.seqs.length === 41), "a live message in every room");
    for (const log of logs) {
      expect(log.seqs).toEqual(range(1, 41));
      expect(log.lost).toEqual([]);
    }
    expect(states).toContain("reconnecting:no_pong");
    expect(client.state).toBe("open");
  });
});
