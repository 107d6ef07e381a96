import type { Browser } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { RoomClient, type RoomClientOptions, type WebSocketConstructor } from "../../client-sdk/src/index";
import { mintToken } from "../../common/tokens";
import { startServer, type LocalServer } from "../helpers/server";
import { hasChromium, launchChromium } from "../helpers/browser-harness";
import { Recorder, publish, waitFor } from "../helpers/sdk-harness";
import { startProxy } from "../helpers/sdk-proxy";
import { sleep } from "../helpers/wait";

/**
 * Tokens and refusals against the local server with TOKEN_SECRET and
 * ALLOWED_ORIGINS: the token travels in Sec-WebSocket-Protocol (or the query
 * when asked), from Node and from Chromium; a token function renews an
 * expired token and the client resumes; refusals at the upgrade arrive as
 * close codes (what a browser can see), or as HTTP statuses for clients that
 * ask with `X-Refusal: http`.
 */

const TOKEN_SECRET = "sdk-access-secret-5e1f";
const ALLOWED_ORIGINS = "https://app.example";

let server: LocalServer;
beforeAll(async () => {
  server = await startServer({ vars: { TOKEN_SECRET, ALLOWED_ORIGINS } });
});
afterAll(async () => {
  await server?.stop();
});

let roomCounter = 0;
const uniqueRoom = (label: string) => `access-${label}-${process.pid}-${Date.now().toString(36)}-${++roomCounter}`;
/** A token that expires within 1-2 s (`exp` has one-second resolution). */
const shortToken = (room: string) => mintToken(TOKEN_SECRET, { room, exp: Math.floor(Date.now() / 1000) + 2 });
const untilExpired = (token: string) => {
  const { exp } = JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()) as { exp: number };
  return sleep(Math.max(0, exp * 1000 - Date.now() + 100));
};

/** What each connection attempt asked `ws` for, and the subprotocol the server selected. */
interface Offer {
  url: string;
  protocols: string | string[] | undefined;
  socket: WebSocket;
}
/** The `ws` class, noting every attempt's URL and offer: the real socket, only watched. */
function recordingWebSocket(offers: Offer[]): WebSocketConstructor {
  return class RecordingWebSocket extends WebSocket {
    constructor(url: string, protocols?: string | string[]) {
      super(url, protocols);
      offers.push({ url, protocols, socket: this });
    }
  };
}

const clients: RoomClient[] = [];
function open(options: RoomClientOptions): { client: RoomClient; rec: Recorder } {
  const client = new RoomClient({ WebSocket, backoff: { initialDelayMs: 50, maxDelayMs: 200 }, ...options });
  clients.push(client);
  return { client, rec: new Recorder(client) };
}
afterEach(() => {
  for (const client of clients.splice(0)) client.close();
});

describe("token functions against the local server", () => {
  it("renews a token that expired while open and resumes with since and epoch, losing nothing", async () => {
    const room = uniqueRoom("renew");
    const issued: string[] = [];
    const offers: Offer[] = [];
    const { client, rec } = open({
      WebSocket: recordingWebSocket(offers),
      host: server.url,
      room,
      ackDelayMs: 50,
      token: async () => {
        issued.push(await shortToken(room));
        return issued.at(-1)!;
      },
    });
    await waitFor(() => client.state === "open", "the client to open");
    const first = await publish(server.url, room, "before expiry");
    await waitFor(() => rec.seqs.includes(first), "the first message");
    const epoch = client.epoch;

    await untilExpired(issued[0]!);
    // The room notices the expiry on the socket's next frame: the ack for this message.
    const second = await publish(server.url, room, "after expiry");
    await waitFor(() => rec.states.some((s) => s.code === 4001), "the room to close the expired socket", 15_000);
    await waitFor(() => client.state === "open" && issued.length >= 2, "the client to come back with a new token", 10_000);
    const third = await publish(server.url, room, "with the new token");
    await waitFor(() => rec.seqs.includes(third), "the message published after the renewal");

    expect(rec.seqs).toEqual([first, second, third]);
    expect(rec.data).toEqual(["before expiry", "after expiry", "with the new token"]);
    expect(rec.lost).toEqual([]);
    expect(client.epoch).toBe(epoch);
    expect(rec.states.find((s) => s.code === 4001)).toMatchObject({ state: "reconnecting", cause: "auth_refused", reason: "token expired" });
    // Each attempt offered the token just asked for, and no URL held one.
    expect(offers.map((o) => o.protocols)).toEqual(issued.map((token) => ["fanout.v1", `token.${token}`]));
    expect(offers.filter((o) => new URL(o.url).searchParams.has("token"))).toEqual([]);
  });

  it("stops when a fixed token expires", async () => {
    const room = uniqueRoom("fixed");
    const token = await shortToken(room);
    const { client, rec } = open({ host: server.url, room, token, ackDelayMs: 50 });
    await waitFor(() => client.state === "open", "the client to open");
    await untilExpired(token);
    await publish(server.url, room, "after expiry");
    await waitFor(() => client.state === "closed", "the client to stop", 15_000);
    expect(rec.states.at(-1)).toMatchObject({ state: "closed", code: 4001 });
  });
});

describe("the token's way to the server", () => {
  it("opens with the token in Sec-WebSocket-Protocol and none in the URL, the server selecting fanout.v1; tokenIn query opens too", async () => {
    const room = uniqueRoom("offer");
    const token = await mintToken(TOKEN_SECRET, { room });
    const offers: Offer[] = [];
    const inOffer = open({ WebSocket: recordingWebSocket(offers), host: server.url, room, token });
    const inQuery = open({ WebSocket: recordingWebSocket(offers), host: server.url, room, token, tokenIn: "query" });
    await waitFor(() => inOffer.client.state === "open" && inQuery.client.state === "open", "both clients to open");
    const seq = await publish(server.url, room, "to both");
    await waitFor(() => inOffer.rec.seqs.includes(seq) && inQuery.rec.seqs.includes(seq), "the message at both");

    const [offered, queried] = [offers.find((o) => o.protocols !== undefined)!, offers.find((o) => o.protocols === undefined)!];
    expect(offered.protocols).toEqual(["fanout.v1", `token.${token}`]);
    expect(new URL(offered.url).searchParams.has("token")).toBe(false);
    expect(offered.socket.protocol).toBe("fanout.v1");
    expect(new URL(queried.url).searchParams.get("token")).toBe(token);
    expect(queried.socket.protocol).toBe("");
    expect(offers).toHaveLength(2);
  });

  it("is refused in the offer like in the query: 4001 with the reason, and the client stops", async () => {
    const room = uniqueRoom("offer-refused");
    const expired = await mintToken(TOKEN_SECRET, { room, exp: Math.floor(Date.now() / 1000) - 10 });
    const offers: Offer[] = [];
    const { client, rec } = open({ WebSocket: recordingWebSocket(offers), host: server.url, room, token: expired });
    await waitFor(() => client.state === "closed", "the client to stop");
    expect(offers.map((o) => o.protocols)).toEqual([["fanout.v1", `token.${expired}`]]);
    expect(rec.states).toEqual([expect.objectContaining({ state: "closed", cause: "auth_refused", code: 4001, reason: "the token has expired" })]);
  });
});

describe("the token in Sec-WebSocket-Protocol from Chromium", () => {
  // A server of its own: a page's Origin is its own, which ALLOWED_ORIGINS above would refuse.
  let page: LocalServer | undefined;
  let browser: Browser | undefined;
  beforeAll(async () => {
    if (!hasChromium) return;
    [page, browser] = await Promise.all([startServer({ vars: { TOKEN_SECRET } }), launchChromium()]);
  });
  afterAll(async () => {
    await Promise.all([browser?.close(), page?.stop()]);
  });

  it("opens with a fixed token and with a token function, and reads a refusal's code and reason", async (ctx) => {
    ctx.skip(!hasChromium, "no Chromium; install the Debian chromium package");
    const room = uniqueRoom("chromium");
    const [valid, expired] = await Promise.all([
      mintToken(TOKEN_SECRET, { room }),
      mintToken(TOKEN_SECRET, { room, exp: Math.floor(Date.now() / 1000) - 10 }),
    ]);
    const tab = await browser!.newPage();
    const pageErrors: string[] = [];
    tab.on("pageerror", (error) => pageErrors.push(error.message));
    await tab.goto(`${page!.url}/healthz`); // a page of the server's origin, to import its /sdk.js
    // A module script of the page's own: the bundle the worker serves, with the page's WebSocket, only watched.
    await tab.addScriptTag({
      type: "module",
      content: `
        import { RoomClient } from "/sdk.js";
        const offers = [];
        class Recording extends WebSocket {
          constructor(url, protocols) {
            super(url, protocols);
            offers.push({ url, protocols, socket: this });
          }
        }
        const watch = (client) => {
          const seen = { states: [], seqs: [] };
          client.addEventListener("state", (e) => seen.states.push([e.state, e.cause, e.code ?? null, e.reason ?? null]));
          client.addEventListener("message", (e) => seen.seqs.push(e.seq));
          return seen;
        };
        const room = ${JSON.stringify(room)};
        const clients = {
          fixed: new RoomClient({ room, token: ${JSON.stringify(valid)}, WebSocket: Recording }),
          asked: new RoomClient({ room, token: async () => ${JSON.stringify(valid)}, WebSocket: Recording }),
          refused: new RoomClient({ room, token: ${JSON.stringify(expired)}, WebSocket: Recording }),
        };
        const seen = { fixed: watch(clients.fixed), asked: watch(clients.asked), refused: watch(clients.refused) };
        Object.assign(window, { offers, clients, seen });
      `,
    });
    type Window = { clients?: Record<string, { state: string }>; seen: Record<string, { seqs: number[] }> };
    await tab.waitForFunction(() => {
      const { clients } = window as unknown as Window;
      return clients !== undefined && clients.fixed!.state === "open" && clients.asked!.state === "open" && clients.refused!.state === "closed";
    }, null, { timeout: 15_000 });
    const seq = await publish(page!.url, room, "to the page");
    await tab.waitForFunction((seq) => {
      const { seen } = window as unknown as Window;
      return seen.fixed!.seqs.includes(seq) && seen.asked!.seqs.includes(seq);
    }, seq, { timeout: 15_000 });

    const result = await tab.evaluate(() => {
      const w = window as unknown as { offers: Array<{ url: string; protocols: unknown; socket: WebSocket }>; seen: unknown };
      return { offers: w.offers.map((o) => ({ url: o.url, protocols: o.protocols, selected: o.socket.protocol })), seen: w.seen };
    });
    expect(result.offers.map((o) => o.protocols).sort()).toEqual([
      ["fanout.v1", `token.${expired}`],
      ["fanout.v1", `token.${valid}`],
      ["fanout.v1", `token.${valid}`],
    ].sort());
    expect(result.offers.filter((o) => new URL(o.url).searchParams.has("token"))).toEqual([]);
    // The page's WebSocket took the answer: the server selected fanout.v1, as a browser requires.
    expect(result.offers.map((o) => o.selected)).toEqual(["fanout.v1", "fanout.v1", "fanout.v1"]);
    expect(result.seen).toMatchObject({
      fixed: { states: [["open", "welcome", null, null]] },
      asked: { states: [["open", "welcome", null, null]] },
      refused: { states: [["closed", "auth_refused", 4001, "the token has expired"]] },
    });
    expect(pageErrors).toEqual([]);
    await tab.evaluate(() => Object.values((window as unknown as { clients: Record<string, { close(): void }> }).clients).forEach((c) => c.close()));
    await tab.close();
  });
});

describe("refusals at the upgrade", () => {
  it("reach the client as 4001 and 4003, at once and with one attempt each, without touching a room", async () => {
    const proxy = await startProxy(server.port);
    try {
      const room = uniqueRoom("refused");
      const started = Date.now();
      const bad = open({ host: proxy.url, room, token: "not-a-token" });
      const other = open({ host: proxy.url, room, token: await mintToken(TOKEN_SECRET, { room: "elsewhere" }) });
      const none = open({ host: proxy.url, room });
      await waitFor(() => [bad, other, none].every((c) => c.client.state === "closed"), "every client to stop", 10_000);
      expect(Date.now() - started).toBeLessThan(5000);
      expect(bad.rec.states.at(-1)).toMatchObject({ state: "closed", code: 4001, reason: "the token is not a valid signed token" });
      expect(other.rec.states.at(-1)).toMatchObject({ state: "closed", code: 4003, reason: "the token does not open this room" });
      expect(none.rec.states.at(-1)).toMatchObject({ state: "closed", code: 4001 });
      await sleep(300);
      expect(proxy.accepted).toBe(3);
      // A refused socket never reached the room: it holds nothing, so it is not even found.
      const stats = await fetch(`${server.url}/rooms/${room}`);
      expect(stats.status).toBe(404);
      expect(await stats.json()).toMatchObject({ error: "not_found" });
    } finally {
      await proxy.close();
    }
  });

  it("close a raw socket with the code and reason, selecting fanout.v1 when offered, or answer HTTP on request", async () => {
    const room = uniqueRoom("raw");
    const url = `${server.wsUrl}/rooms/${room}/ws`;
    const closeOf = (ws: WebSocket) =>
      new Promise<{ code: number; reason: string; frames: string[]; protocol: string }>((resolve, reject) => {
        const frames: string[] = [];
        ws.on("message", (data) => frames.push(data.toString()));
        ws.on("close", (code, reason) => resolve({ code, reason: reason.toString(), frames, protocol: ws.protocol }));
        ws.on("unexpected-response", (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
        ws.on("error", reject);
      });

    const expired = await mintToken(TOKEN_SECRET, { room, exp: Math.floor(Date.now() / 1000) - 10 });
    expect(await closeOf(new WebSocket(`${url}?token=${expired}`))).toEqual({ code: 4001, reason: "the token has expired", frames: [], protocol: "" });
    expect(await closeOf(new WebSocket(url, ["fanout.v1", "token.x.y.z"]))).toMatchObject({ code: 4001, frames: [], protocol: "fanout.v1" });
    const valid = await mintToken(TOKEN_SECRET, { room });
    expect(await closeOf(new WebSocket(`${url}?token=${valid}`, { headers: { Origin: "https://evil.example" } }))).toMatchObject({
      code: 4003,
      reason: "this origin may not open sockets",
      frames: [],
    });

    // Asked for, the refusal is the HTTP status with its JSON body, as before a socket exists.
    const http = await new Promise<{ status: number; body: string; auth: string | undefined }>((resolve, reject) => {
      const ws = new WebSocket(`${url}?token=${expired}`, { headers: { "X-Refusal": "http" } });
      ws.on("open", () => reject(new Error("upgraded")));
      ws.on("unexpected-response", (_req, res) => {
        let body = "";
        res.on("data", (chunk: Buffer) => (body += chunk.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, auth: res.headers["www-authenticate"] as string | undefined }));
      });
      ws.on("error", reject);
    });
    expect(http.status).toBe(401);
    expect(JSON.parse(http.body)).toEqual({ error: "unauthorized", message: "the token has expired" });
    expect(http.auth).toMatch(/^Bearer /);

    // Not an upgrade: HTTP as always.
    const plain = await fetch(`${server.url}/rooms/${room}/ws`);
    expect(plain.status).toBe(401);
  });
});
