import { sign } from "hono/jwt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { CloseCode, parseServerFrame, type ErrorBody, type ServerEvent } from "../../protocol";
import { mintToken } from "../../common/tokens";
import { runTokenCli } from "../../tools/token-command";
import { startServer, type LocalServer } from "../helpers/server";
import { sleep, until, Waiters } from "../helpers/wait";

const PUBLISH_KEY = "pk-3f9c1e7a-access-test";
const TOKEN_SECRET = "ts-8b2d4a61-access-test";
const ALLOWED_ORIGINS = "https://app.example, https://admin.example:8443/";

let secured: LocalServer;
let open: LocalServer;

beforeAll(async () => {
  [secured, open] = await Promise.all([
    startServer({ vars: { PUBLISH_KEY, TOKEN_SECRET, ALLOWED_ORIGINS } }),
    startServer(),
  ]);
});

afterAll(async () => {
  await Promise.all([secured?.stop(), open?.stop()]);
});

// ---------------------------------------------------------------------------
// Small clients that can offer subprotocols and headers (a browser's Origin).
// ---------------------------------------------------------------------------

interface Opened {
  kind: "open";
  ws: WebSocket;
  protocol: string;
  events: ServerEvent[];
  closed: Promise<{ code: number; reason: string }>;
  waitFor(predicate: (events: ServerEvent[]) => boolean, what: string, timeoutMs?: number): Promise<void>;
}

interface Refused {
  kind: "refused";
  status: number;
  body: ErrorBody;
  headers: Record<string, string | string[] | undefined>;
}

/**
 * Opens a socket asking for refusals as HTTP statuses (`X-Refusal: http`): these tests read the
 * status and JSON body. Without the header a refused upgrade is a socket closed with 4001/4003
 * (test/sdk/sdk-access.test.ts).
 */
function connect(url: string, protocols?: string[], headers?: Record<string, string>): Promise<Opened | Refused> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, { headers: { "X-Refusal": "http", ...headers } });
    const events: ServerEvent[] = [];
    const waiters = new Waiters();
    const closed = new Promise<{ code: number; reason: string }>((settle) => {
      ws.on("close", (code, reason) => settle({ code, reason: reason.toString() }));
      // The close frame is the answer; workerd may hold the TCP connection open for a while after it.
      ws.once("open", () => {
        const receiver = (ws as unknown as { _receiver?: NodeJS.EventEmitter })._receiver;
        receiver?.on("conclude", (code: number, reason: Buffer) => settle({ code, reason: reason.toString() }));
      });
    });
    ws.on("message", (data) => {
      const parsed = parseServerFrame(data.toString());
      if (parsed.ok) events.push(...parsed.value);
      waiters.notify();
    });
    const waitFor = (predicate: (e: ServerEvent[]) => boolean, what: string, timeoutMs = 10_000) =>
      waiters.waitFor(() => predicate(events), { timeoutMs, what, detail: () => `events: ${JSON.stringify(events)}` });
    ws.once("open", () => resolve({ kind: "open", ws, protocol: ws.protocol, events, closed, waitFor }));
    ws.once("unexpected-response", (_req, res) => {
      let text = "";
      res.on("data", (chunk: Buffer) => (text += chunk.toString()));
      res.on("end", () => {
        try {
          resolve({ kind: "refused", status: res.statusCode ?? 0, body: JSON.parse(text) as ErrorBody, headers: res.headers });
        } catch {
          reject(new Error(`refusal ${res.statusCode} without a JSON body: ${text}`));
        }
      });
    });
    ws.once("error", (error) => reject(error));
  });
}

async function expectOpen(result: Promise<Opened | Refused>): Promise<Opened> {
  const r = await result;
  if (r.kind === "refused") throw new Error(`expected the upgrade to succeed, got ${r.status} ${JSON.stringify(r.body)}`);
  await r.waitFor((e) => e.some((x) => x.type === "welcome"), "welcome");
  return r;
}

async function expectRefused(result: Promise<Opened | Refused>, status: number, error: string): Promise<Refused> {
  const r = await result;
  if (r.kind === "open") {
    r.ws.close();
    throw new Error(`expected a ${status} refusal, but the socket opened`);
  }
  expect(r.status).toBe(status);
  expect(r.body.error).toBe(error);
  expect(typeof r.body.message).toBe("string");
  return r;
}

async function post(server: LocalServer, path: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${server.url}${path}`, { method: "POST", body, headers: { "content-type": "application/json", ...headers } });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: JSON.parse(text) as Record<string, unknown> };
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const wsUrl = (server: LocalServer, room: string, query = "") => `${server.wsUrl}/rooms/${room}/ws${query}`;
const tokenFor = (room: string, extra: Partial<Parameters<typeof mintToken>[1]> = {}) => mintToken(TOKEN_SECRET, { room, ...extra });

/** Waits until the server's output contains `text` (logs arrive asynchronously). */
async function outputContains(server: LocalServer, text: string, timeoutMs = 5000): Promise<boolean> {
  return until(() => server.output().includes(text), { timeoutMs, everyMs: 50 }).then(
    () => true,
    () => false,
  );
}

// ---------------------------------------------------------------------------

describe("publish key", () => {
  it("refuses HTTP publishes without the key or with a wrong one, and accepts the right one", async () => {
    const room = "key-publish";
    const missing = await post(secured, `/rooms/${room}/publish`, '{"n":1}');
    expect(missing.status).toBe(401);
    expect(missing.json).toMatchObject({ error: "unauthorized" });
    expect(missing.headers.get("www-authenticate")).toMatch(/^Bearer /);

    for (const wrong of [
      bearer("nope"),
      bearer(`${PUBLISH_KEY}x`),
      bearer(PUBLISH_KEY.slice(0, -1)),
      { authorization: `Basic ${PUBLISH_KEY}` },
      { authorization: PUBLISH_KEY },
    ]) {
      const res = await post(secured, `/rooms/${room}/publish`, '{"n":1}', wrong);
      expect(res.status, JSON.stringify(wrong)).toBe(401);
      expect(res.json.error).toBe("unauthorized");
    }

    // Nothing refused reached the room: it holds nothing, so it is not even found.
    const stats = await (await fetch(`${secured.url}/rooms/${room}`, { headers: bearer(PUBLISH_KEY) })).json();
    expect(stats).toMatchObject({ error: "not_found" });

    const ok = await post(secured, `/rooms/${room}/publish`, '{"n":1}', bearer(PUBLISH_KEY));
    expect(ok.status).toBe(200);
    expect(ok.json).toMatchObject({ seq: 1 });
    // The scheme name is case-insensitive (RFC 7235).
    const lower = await post(secured, `/rooms/${room}/publish`, '{"n":2}', { authorization: `bearer ${PUBLISH_KEY}` });
    expect(lower.json).toMatchObject({ seq: 2 });
  });

  it("guards /broadcast and /metrics with the same key", async () => {
    const broadcast = await post(secured, "/broadcast", JSON.stringify({ rooms: ["a"], data: 1 }));
    expect(broadcast.status).toBe(401);
    expect(broadcast.json.error).toBe("unauthorized");
    const metrics = await fetch(`${secured.url}/metrics`);
    expect(metrics.status).toBe(401);
    expect(((await metrics.json()) as ErrorBody).error).toBe("unauthorized");

    // With the key, the request gets past access control to the route itself (whatever it answers).
    const keyed = await fetch(`${secured.url}/metrics`, { headers: bearer(PUBLISH_KEY) });
    expect(keyed.status).not.toBe(401);
    await keyed.arrayBuffer();
  });
});

describe("subscribe tokens", () => {
  it("refuses upgrades without a token, with a forged, malformed or expired one, or one lacking exp", async () => {
    const room = "tok-refusals";
    const missing = await expectRefused(connect(wsUrl(secured, room)), 401, "unauthorized");
    expect(missing.body.message).toMatch(/token/);

    const forged = await mintToken("some-other-secret", { room });
    await expectRefused(connect(wsUrl(secured, room, `?token=${forged}`)), 401, "unauthorized");
    await expectRefused(connect(wsUrl(secured, room, "?token=not.a.jwt")), 401, "unauthorized");
    await expectRefused(connect(wsUrl(secured, room, "?token=")), 401, "unauthorized");

    const expired = await tokenFor(room, { exp: Math.floor(Date.now() / 1000) - 60 });
    const refusedExpired = await expectRefused(connect(wsUrl(secured, room, `?token=${expired}`)), 401, "unauthorized");
    expect(refusedExpired.body.message).toMatch(/expired/);

    const noExpiry = await sign({ room }, TOKEN_SECRET, "HS256");
    const refusedNoExpiry = await expectRefused(connect(wsUrl(secured, room, `?token=${noExpiry}`)), 401, "unauthorized");
    expect(refusedNoExpiry.body.message).toMatch(/exp/);

    // A token signed with another algorithm is refused even with the right secret.
    const hs512 = await sign({ room, exp: Math.floor(Date.now() / 1000) + 60 }, TOKEN_SECRET, "HS512");
    await expectRefused(connect(wsUrl(secured, room, `?token=${hs512}`)), 401, "unauthorized");
  });

  it("opens only the room or prefix the token names", async () => {
    const exact = await tokenFor("tok-exact");
    await expectRefused(connect(wsUrl(secured, "tok-exact-2", `?token=${exact}`)), 403, "forbidden");
    (await expectOpen(connect(wsUrl(secured, "tok-exact", `?token=${exact}`)))).ws.close();

    const prefixed = await mintToken(TOKEN_SECRET, { prefix: "org-7:" });
    const a = await expectOpen(connect(wsUrl(secured, "org-7:chat", `?token=${prefixed}`)));
    const b = await expectOpen(connect(wsUrl(secured, "org-7:feed", `?token=${prefixed}`)));
    await expectRefused(connect(wsUrl(secured, "org-70:chat", `?token=${prefixed}`)), 403, "forbidden");
    await expectRefused(connect(wsUrl(secured, "org-7", `?token=${prefixed}`)), 403, "forbidden");
    a.ws.close();
    b.ws.close();
  });

  it("takes the token from the Sec-WebSocket-Protocol header and selects fanout.v1", async () => {
    const room = "tok-subprotocol";
    const token = await tokenFor(room);
    const s = await expectOpen(connect(wsUrl(secured, room), ["fanout.v1", `token.${token}`]));
    expect(s.protocol).toBe("fanout.v1");
    expect(s.events[0]).toMatchObject({ type: "welcome", room });

    // Delivery works on a socket admitted this way.
    await post(secured, `/rooms/${room}/publish`, '{"hello":1}', bearer(PUBLISH_KEY));
    await s.waitFor((e) => e.some((x) => x.type === "message"), "the published message");
    s.ws.close();

    // Token and fanout.v1 in either order; the token entry is never the one selected.
    const reversed = await expectOpen(connect(wsUrl(secured, room), [`token.${token}`, "fanout.v1"]));
    expect(reversed.protocol).toBe("fanout.v1");
    reversed.ws.close();

    // An offer without fanout.v1 could never be answered in a way a browser accepts.
    await expectRefused(connect(wsUrl(secured, room), [`token.${token}`]), 400, "bad_request");
    await expectRefused(connect(wsUrl(secured, room), ["chat", `token.${token}`]), 400, "bad_request");
    // A bad token in the header is refused like one in the query.
    await expectRefused(connect(wsUrl(secured, room), ["fanout.v1", "token.x.y.z"]), 401, "unauthorized");
    await expectRefused(connect(wsUrl(secured, room), ["fanout.v1"]), 401, "unauthorized");
  });

  it("lets a socket publish only when its token has pub: true", async () => {
    const room = "tok-socket-publish";
    const listenOnly = await expectOpen(connect(wsUrl(secured, room, `?token=${await tokenFor(room)}`)));
    listenOnly.ws.send(JSON.stringify({ type: "publish", data: "nope", id: "p1" }));
    await listenOnly.waitFor((e) => e.some((x) => x.type === "error"), "an error event");
    expect(listenOnly.events.find((e) => e.type === "error")).toMatchObject({ type: "error", code: "forbidden", id: "p1" });

    // A client cannot grant itself the right with the header the edge uses to pass it on.
    const spoofer = await expectOpen(
      connect(wsUrl(secured, room, `?token=${await tokenFor(room)}`), undefined, { "x-can-publish": "true", "x-token-expires": "0" }),
    );
    spoofer.ws.send(JSON.stringify({ type: "publish", data: "nope", id: "p2" }));
    await spoofer.waitFor((e) => e.some((x) => x.type === "error"), "an error event");
    expect(spoofer.events.find((e) => e.type === "error")).toMatchObject({ code: "forbidden", id: "p2" });

    const stats = await (await fetch(`${secured.url}/rooms/${room}`, { headers: bearer(PUBLISH_KEY) })).json();
    expect(stats).toMatchObject({ seq: 0 });

    const publisher = await expectOpen(connect(wsUrl(secured, room, `?token=${await tokenFor(room, { pub: true, sub: "svc-1" })}`)));
    publisher.ws.send(JSON.stringify({ type: "publish", data: { from: "socket" }, id: "p3" }));
    await publisher.waitFor((e) => e.some((x) => x.type === "published"), "published");
    expect(publisher.events.find((e) => e.type === "published")).toMatchObject({ id: "p3", seq: 1 });
    await listenOnly.waitFor((e) => e.some((x) => x.type === "message"), "the socket-published message");
    expect(listenOnly.events.find((e) => e.type === "message")).toMatchObject({ seq: 1, data: { from: "socket" } });
    for (const s of [listenOnly, spoofer, publisher]) s.ws.close();
  });

  it("tells the room when the token expires, and the room closes the socket with 4001 after it", async () => {
    const room = "tok-expiry";
    // exp has one-second resolution: this token is valid now and expires within 2-3 s.
    const exp = Math.floor(Date.now() / 1000) + 3;
    const s = await expectOpen(connect(wsUrl(secured, room, `?token=${await tokenFor(room, { exp })}`)));
    const wait = exp * 1000 - Date.now() + 250;
    await sleep(Math.max(0, wait));
    // The room checks expiry on the socket's next frame (and on its periodic sweep).
    s.ws.send(JSON.stringify({ type: "ack", seq: 0 }));
    const closed = await Promise.race([s.closed, new Promise<null>((r) => setTimeout(() => r(null), 10_000))]);
    expect(closed?.code).toBe(CloseCode.UNAUTHORIZED);
  });
});

describe("origin allow-list", () => {
  it("refuses upgrades from origins not on ALLOWED_ORIGINS, before looking at the token", async () => {
    const room = "origin";
    const token = await tokenFor(room);
    const evil = await expectRefused(connect(wsUrl(secured, room, `?token=${token}`), undefined, { Origin: "https://evil.example" }), 403, "forbidden");
    expect(evil.body.message).toMatch(/origin/);
    await expectRefused(connect(wsUrl(secured, room), undefined, { Origin: "https://evil.example" }), 403, "forbidden");
    // A listed host on another scheme or port is another origin.
    await expectRefused(connect(wsUrl(secured, room, `?token=${token}`), undefined, { Origin: "http://app.example" }), 403, "forbidden");
    await expectRefused(connect(wsUrl(secured, room, `?token=${token}`), undefined, { Origin: "https://admin.example" }), 403, "forbidden");
    await expectRefused(connect(wsUrl(secured, room, `?token=${token}`), undefined, { Origin: "null" }), 403, "forbidden");

    for (const origin of ["https://app.example", "https://APP.example", "https://admin.example:8443"]) {
      const s = await expectOpen(connect(wsUrl(secured, room, `?token=${token}`), undefined, { Origin: origin }));
      s.ws.close();
    }
    // Non-browser clients send no Origin; the token is what restricts them.
    (await expectOpen(connect(wsUrl(secured, room, `?token=${token}`)))).ws.close();
  });
});

describe("refusal logs", () => {
  it("writes one structured refusal line per refusal, with room and reason", async () => {
    await expectRefused(connect(wsUrl(secured, "log-room-x")), 401, "unauthorized");
    await post(secured, "/rooms/log-room-y/publish", "1", bearer("wrong"));
    expect(await outputContains(secured, '{"event":"refusal","room":"log-room-x","reason":"missing_token"')).toBe(true);
    expect(await outputContains(secured, '{"event":"refusal","room":"log-room-y","reason":"bad_key"')).toBe(true);
    // Secrets never reach the log.
    expect(secured.output()).not.toContain(PUBLISH_KEY);
    expect(secured.output()).not.toContain(TOKEN_SECRET);
    expect(secured.output()).not.toContain("ACCESS CONTROL IS OFF");
  });
});

describe("open mode (no secrets configured)", () => {
  it("says so loudly when it starts, once: one log line with the warning and what is open", async () => {
    expect(await outputContains(open, "ACCESS CONTROL IS OFF")).toBe(true);
    const lines = open.output().split("\n").filter((line) => line.includes("is not set: anyone can"));
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toEqual({
      event: "open_mode",
      warning: expect.stringContaining("!!! ACCESS CONTROL IS OFF !!!"),
      gaps: [expect.stringMatching(/^PUBLISH_KEY is not set: /), expect.stringMatching(/^TOKEN_SECRET is not set: /)],
    });
  });

  it("publishes without a key, opens sockets without a token, and lets them publish", async () => {
    const room = "open-room";
    const s = await expectOpen(connect(wsUrl(open, room)));
    const res = await post(open, `/rooms/${room}/publish`, '"hi"');
    expect(res.status).toBe(200);
    s.ws.send(JSON.stringify({ type: "publish", data: 2, id: "o1" }));
    await s.waitFor((e) => e.some((x) => x.type === "published"), "published");
    expect(s.events.find((e) => e.type === "published")).toMatchObject({ seq: 2 });

    // A browser offering the subprotocol still gets it selected.
    const browser = await expectOpen(connect(wsUrl(open, room), ["fanout.v1"], { Origin: "https://anywhere.example" }));
    expect(browser.protocol).toBe("fanout.v1");
    // A token sent anyway is ignored, not checked.
    (await expectOpen(connect(wsUrl(open, room, "?token=garbage")))).ws.close();
    s.ws.close();
    browser.ws.close();
  });
});

describe("token command", () => {
  it("mints a token the server accepts, with the requested claims", async () => {
    const result = await runTokenCli(["--room", "cli-room", "--ttl", "120", "--sub", "user-9", "--publish"], { TOKEN_SECRET });
    expect(result.code).toBe(0);
    const token = result.stdout.trim();
    const [, payload] = token.split(".");
    const claims = JSON.parse(Buffer.from(payload ?? "", "base64url").toString()) as Record<string, unknown>;
    expect(claims).toMatchObject({ room: "cli-room", sub: "user-9", pub: true });
    expect((claims.exp as number) - (claims.iat as number)).toBe(120);

    const s = await expectOpen(connect(wsUrl(secured, "cli-room", `?token=${token}`)));
    s.ws.send(JSON.stringify({ type: "publish", data: 1, id: "c" }));
    await s.waitFor((e) => e.some((x) => x.type === "published"), "published");
    s.ws.close();
  });

  it("mints grants for a multiplexed connection: rooms and prefixes, each with its own right to publish", async () => {
    const result = await runTokenCli(["--grant", "room:cli-chat+pub", "--grant", "prefix:cli-feed:", "--sub", "user-10"], { TOKEN_SECRET });
    expect(result.code).toBe(0);
    const [, payload] = result.stdout.trim().split(".");
    const claims = JSON.parse(Buffer.from(payload ?? "", "base64url").toString()) as Record<string, unknown>;
    expect(claims.grants).toEqual([{ room: "cli-chat", pub: true }, { prefix: "cli-feed:" }]);
    expect(claims.room).toBeUndefined();
    for (const bad of ["cli-chat", "topic:cli-chat", "room:", "prefix:+pub"]) {
      expect((await runTokenCli(["--grant", bad], { TOKEN_SECRET })).stderr).toMatch(/--grant needs/);
    }
    expect((await runTokenCli(["--grant", "room:bad room"], { TOKEN_SECRET })).code).toBe(2);
  });

  it("explains what is missing instead of minting a useless token", async () => {
    expect((await runTokenCli(["--room", "x"], {})).stderr).toMatch(/TOKEN_SECRET/);
    expect((await runTokenCli([], { TOKEN_SECRET })).code).toBe(2);
    expect((await runTokenCli(["--room", "bad room"], { TOKEN_SECRET })).stderr).toMatch(/room/);
    expect((await runTokenCli(["--room", "x", "--ttl", "-5"], { TOKEN_SECRET })).code).toBe(2);
    expect((await runTokenCli(["--room", "x", "--bogus"], { TOKEN_SECRET })).code).toBe(2);
  });
});
