import { randomUUID } from "node:crypto";
import { mintToken } from "../../../common/tokens.js";
import { CLOSE_CODES, CloseCode, SUBPROTOCOL, type ErrorCode } from "../../../protocol/index.js";
import { expect, skip, type Check, type Context } from "../check.js";
import { RefusedUpgrade, type Peer } from "../peer.js";
import { isErrorBody, type Answer } from "../service.js";

/** Fails unless `answer` is the refusal `status` with a JSON body naming `code`. */
function refused(what: string, answer: Answer, status: number, code: ErrorCode): string {
  expect(answer.status === status && answer.isJson && isErrorBody(answer.json) && answer.json.error === code, `${what}: answered ${answer.status} ${answer.text.slice(0, 120)}, expected ${status} {"error":"${code}"}`);
  return `${status} ${code}`;
}

/** Opens `url` expecting the socket to be accepted and closed at once with `code`, before any event. */
async function closedAtOnce(ctx: Context, what: string, url: string, code: number, protocols?: string[]): Promise<string> {
  let peer: Peer;
  try {
    peer = await ctx.openRaw(url, { protocols });
  } catch (error) {
    throw new Error(`${what}: the upgrade was ${error instanceof RefusedUpgrade ? `answered ${error.status} ${error.body.slice(0, 80)}` : String(error)}, expected a socket closed with ${code}`);
  }
  const closed = await peer.waitForClose(10_000);
  expect(closed?.code === code, `${what}: closed with ${closed?.code ?? "nothing"}, expected ${code}`);
  expect(peer.events.length === 0, `${what}: the socket was sent ${peer.events[0]?.type} before its close`);
  return `${code} "${closed.reason.slice(0, 40)}"`;
}

/** G11: room names that are not names are refused on every route, as JSON. */
export const badRoom: Check = {
  id: "G11.bad-room",
  clause: "G11 refusals",
  title: "bad room names: 400 bad_room JSON on every room route",
  timeoutMs: 15_000,
  needsSockets: false,
  needsPublishKey: true,
  async run(ctx) {
    const s = ctx.service;
    const results = [
      refused("publish into bad%20room", await s.request("/rooms/bad%20room/publish", { method: "POST", body: "x" }), 400, "bad_room"),
      refused("history of a 65-character name", await s.request(`/rooms/${"a".repeat(65)}/messages`), 400, "bad_room"),
      refused("stats of a name starting with -", await s.request("/rooms/-dash"), 400, "bad_room"),
      refused("presence of a name with %", await s.request("/rooms/a%25b/presence"), 400, "bad_room"),
    ];
    if (ctx.facts.access === "open") results.push(refused("an upgrade into a name starting with -", await s.request("/rooms/-dash/ws"), 400, "bad_room"));
    return `publish, history, stats, presence${ctx.facts.access === "open" ? ", upgrade" : ""}: ${results.join(", ")}`;
  },
};

/** G11: bodies and headers a publish or a broadcast cannot take. */
export const badBodies: Check = {
  id: "G11.bad-bodies",
  clause: "G11 refusals",
  title: "bad JSON, empty body, bad Idempotency-Key, wrong method: JSON refusals",
  timeoutMs: 15_000,
  needsSockets: false,
  needsPublishKey: true,
  async run(ctx) {
    const s = ctx.service;
    const room = ctx.room("");
    const results = [
      `bad JSON ${refused("a JSON publish that does not parse", await s.publish(room, undefined, { body: "{" }), 400, "bad_json")}`,
      `empty ${refused("an empty publish", await s.publish(room, undefined, { body: "", contentType: "text/plain" }), 400, "bad_request")}`,
      `key with a space ${refused("an Idempotency-Key with a space", await s.publish(room, { a: 1 }, { key: "two words" }), 400, "bad_request")}`,
      `broadcast bad JSON ${refused("a broadcast that does not parse", await s.request("/broadcast", { method: "POST", headers: { "content-type": "application/json" }, body: "{" }), 400, "bad_json")}`,
      `GET publish ${refused("GET on the publish route", await s.request(`/rooms/${room}/publish`), 405, "method_not_allowed")}`,
    ];
    const stats = await s.stats(room);
    expect(stats.status === 404, `refused publishes created the room: GET /rooms/${room} answered ${stats.status}`);
    return `${results.join("; ")}; nothing stored`;
  },
};

/** G11: upgrades that are not upgrades, or carry a resume point that is not one. */
export const badUpgrades: Check = {
  id: "G11.bad-upgrades",
  clause: "G11 refusals",
  title: "no Upgrade header 426; bad since 400; offer without fanout.v1 400",
  timeoutMs: 15_000,
  needsSockets: true,
  needsPublishKey: false,
  async run(ctx) {
    const room = ctx.room("");
    // With the socket's credentials, so that the refusal is for the missing upgrade and not for a missing token.
    const plain = refused("GET on the socket route without Upgrade", await ctx.service.request(`/rooms/${room}/ws${await ctx.socketQuery(room)}`), 426, "upgrade_required");
    let since = "";
    try {
      await ctx.openRoom(room, { query: { since: "abc" } });
      expect(false, "an upgrade with since=abc was accepted");
    } catch (error) {
      expect(error instanceof RefusedUpgrade && error.status === 400 && isErrorBody(safeJson(error.body)) && (safeJson(error.body) as { error: string }).error === "bad_request", `an upgrade with since=abc: ${error instanceof Error ? error.message : String(error)}, expected 400 bad_request`);
      since = "400 bad_request";
    }
    let offer = "";
    try {
      await ctx.openRaw(`${ctx.service.wsBase}/rooms/${room}/ws`, { protocols: ["chat.v9"] });
      expect(false, "an upgrade offering only chat.v9 was accepted");
    } catch (error) {
      expect(error instanceof RefusedUpgrade && error.status === 400, `an offer without ${SUBPROTOCOL}: ${error instanceof Error ? error.message : String(error)}, expected 400`);
      offer = "400";
    }
    return `no Upgrade: ${plain}; since=abc: ${since}; offer without ${SUBPROTOCOL}: ${offer}`;
  },
};

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** G11: with a publish key, every back-end route refuses a missing or wrong key with 401. */
export const publishKey: Check = {
  id: "G11.publish-key",
  clause: "G11 refusals",
  title: "missing or wrong publish key: 401 unauthorized on publish, history, broadcast",
  timeoutMs: 15_000,
  needsSockets: false,
  needsPublishKey: false,
  async run(ctx) {
    const s = ctx.service;
    if (!ctx.facts.publishKeyRequired) skip("the service has no publish key (open mode)");
    const room = ctx.room("");
    // Without the key the refusals can still be checked; only "nothing stored" needs it (stats).
    const wrong = { authorization: `Bearer ${s.publishKey ?? randomUUID()}-wrong` };
    const none = await s.request(`/rooms/${room}/publish`, { method: "POST", body: "{}", auth: false, headers: { "content-type": "application/json" } });
    refused("a publish without the key", none, 401, "unauthorized");
    expect(/bearer/i.test(none.headers.get("www-authenticate") ?? ""), `a publish without the key had WWW-Authenticate ${none.headers.get("www-authenticate")}`);
    refused("a publish with a wrong key", await s.request(`/rooms/${room}/publish`, { method: "POST", body: "{}", headers: { ...wrong, "content-type": "application/json" } }), 401, "unauthorized");
    refused("history with a wrong key", await s.request(`/rooms/${room}/messages`, { headers: wrong }), 401, "unauthorized");
    refused("a broadcast without the key", await s.request("/broadcast", { method: "POST", auth: false, body: JSON.stringify({ data: 1, rooms: [room] }) }), 401, "unauthorized");
    const refusals = "publish (none, wrong), history (wrong), broadcast (none): 401 unauthorized, WWW-Authenticate Bearer";
    if (!s.publishKey) return `${refusals}; whether anything was stored is not checked without --publish-key`;
    const stats = await s.stats(room);
    expect(stats.status === 404, `refused publishes created the room: GET /rooms/${room} answered ${stats.status}`);
    return `${refusals}; nothing stored`;
  },
};

/** G11: with subscribe tokens, a socket without a valid token is closed with 4001 before anything (or 401 on request). */
export const tokens: Check = {
  id: "G11.token",
  clause: "G11 refusals",
  title: "missing, forged or expired token: close 4001 at once, or 401 JSON with X-Refusal: http",
  timeoutMs: 20_000,
  needsSockets: true,
  needsPublishKey: false,
  async run(ctx) {
    if (ctx.facts.access !== "token") skip("the service takes sockets without tokens (no TOKEN_SECRET)");
    const room = ctx.room("");
    const base = `${ctx.service.wsBase}/rooms/${room}/ws`;
    const forged = await mintToken(`${ctx.tokenSecret}-not-it`, { room, ttlSeconds: 600 });
    const expired = await mintToken(ctx.tokenSecret as string, { room, exp: Math.floor(Date.now() / 1000) - 60 });
    const results = [
      `none: ${await closedAtOnce(ctx, "an upgrade without a token", base, CloseCode.UNAUTHORIZED)}`,
      `forged: ${await closedAtOnce(ctx, "a token signed with another secret", `${base}?token=${forged}`, CloseCode.UNAUTHORIZED)}`,
      `expired: ${await closedAtOnce(ctx, "an expired token", `${base}?token=${expired}`, CloseCode.UNAUTHORIZED)}`,
      `forged in the subprotocol: ${await closedAtOnce(ctx, "a forged token offered as a subprotocol", base, CloseCode.UNAUTHORIZED, [SUBPROTOCOL, `token.${forged}`])}`,
    ];
    try {
      await ctx.openRaw(base, { headers: { "x-refusal": "http" } });
      expect(false, "an upgrade without a token was accepted with X-Refusal: http");
    } catch (error) {
      expect(error instanceof RefusedUpgrade && error.status === 401 && (safeJson(error.body) as { error?: string } | undefined)?.error === "unauthorized", `without a token, with X-Refusal: http: ${error instanceof Error ? error.message : String(error)}, expected 401 unauthorized`);
    }
    expect(!CLOSE_CODES[CloseCode.UNAUTHORIZED].reconnect, "4001 must mean: do not reconnect with the same token");
    return `${results.join("; ")}; X-Refusal: http → 401 unauthorized JSON`;
  },
};

/** G11: a valid token opens only its rooms (4003 elsewhere), and a listen-only one cannot publish. */
export const forbidden: Check = {
  id: "G11.forbidden-room",
  clause: "G11 refusals",
  title: "a token for another room: close 4003 (403 with X-Refusal: http); listen-only publish: error forbidden",
  timeoutMs: 20_000,
  needsSockets: true,
  needsPublishKey: true,
  async run(ctx) {
    if (ctx.facts.access !== "token") skip("the service takes sockets without tokens (no TOKEN_SECRET)");
    const room = ctx.room("");
    const other = await mintToken(ctx.tokenSecret as string, { room: ctx.room("other"), ttlSeconds: 600 });
    const base = `${ctx.service.wsBase}/rooms/${room}/ws`;
    const closed = await closedAtOnce(ctx, "a token for another room", `${base}?token=${other}`, CloseCode.FORBIDDEN);
    try {
      await ctx.openRaw(`${base}?token=${other}`, { headers: { "x-refusal": "http" } });
      expect(false, "a token for another room was accepted with X-Refusal: http");
    } catch (error) {
      expect(error instanceof RefusedUpgrade && error.status === 403 && (safeJson(error.body) as { error?: string } | undefined)?.error === "forbidden", `a token for another room with X-Refusal: http: ${error instanceof Error ? error.message : String(error)}, expected 403 forbidden`);
    }
    const listenOnly = await mintToken(ctx.tokenSecret as string, { room, ttlSeconds: 600, pub: false });
    const listener = await ctx.openRaw(`${base}?token=${listenOnly}`);
    await listener.waitForWelcome();
    const id = `p-${randomUUID().slice(0, 8)}`;
    listener.send({ type: "publish", data: { n: 1 }, id });
    await listener.waitFor((p) => p.ofType("error").some((e) => e.id === id), 10_000, "the publish's error");
    const error = listener.ofType("error").find((e) => e.id === id)!;
    expect(error.code === "forbidden", `a listen-only publish was answered ${JSON.stringify(error)}`);
    listener.send("ping");
    await listener.waitFor((p) => p.pongs > 0 || p.closeInfo !== null, 10_000, "a pong");
    expect(listener.closeInfo === null, `the listen-only socket was closed (${listener.closeInfo?.code}) after its refused publish`);
    const stats = await ctx.service.stats(room);
    expect(stats.json?.seq === undefined || stats.json.seq === 0, `the refused publish was stored: seq ${stats.json?.seq}`);
    return `token for another room: ${closed}; with X-Refusal: http 403 forbidden; listen-only publish: error forbidden, socket open, nothing stored`;
  },
};

/** G11: a frame that is not protocol closes the socket with 4000 (do not reconnect). */
export const badFrames: Check = {
  id: "G11.bad-frame",
  clause: "G11 refusals",
  title: "a frame that is not protocol (not JSON, unknown type, binary) closes with 4000",
  timeoutMs: 20_000,
  needsSockets: true,
  needsPublishKey: true,
  async run(ctx) {
    const room = ctx.room("");
    await ctx.service.publishOk(room, { before: true });
    const cases: [string, string | Buffer][] = [
      ["text that is not JSON", "{nope"],
      ["an unknown type", JSON.stringify({ type: "replay", from: 1 })],
      ["a binary frame", Buffer.from([1, 2, 3])],
    ];
    const out: string[] = [];
    for (const [what, frame] of cases) {
      const peer = await ctx.openRoom(room);
      await peer.waitForWelcome();
      peer.ws.send(frame);
      const closed = await peer.waitForClose(10_000);
      expect(closed?.code === CloseCode.BAD_FRAME, `${what}: closed with ${closed?.code ?? "nothing"}, expected 4000`);
      out.push(`${what}: 4000`);
    }
    expect(!CLOSE_CODES[CloseCode.BAD_FRAME].reconnect, "4000 must mean: do not reconnect");
    const stats = await ctx.service.stats(room);
    expect(stats.json?.seq === 1, `the room's seq is ${stats.json?.seq} after the bad frames, expected 1`);
    return `${out.join("; ")}; the room kept its message`;
  },
};
