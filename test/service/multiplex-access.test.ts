import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CloseCode } from "../../protocol";
import { mintToken } from "../../common/tokens";
import { MuxSocket } from "../helpers/multiplex";
import { startServer, type LocalServer } from "../helpers/server";
import { publish } from "../helpers/socket";

/**
 * Access per room on a multiplexed connection: a token's grants (exact rooms
 * and prefixes, each with its own right to publish) are checked on every
 * subscribe and publish, and a fresh token (`auth`) widens or narrows them
 * without reconnecting.
 */
const TOKEN_SECRET = "multiplex-token-secret";
const PUBLISH_KEY = "multiplex-publish-key";
let server: LocalServer;
beforeAll(async () => {
  server = await startServer({ vars: { TOKEN_SECRET, PUBLISH_KEY, SUBSCRIBES_PER_SECOND: "2", SUBSCRIBE_BURST: "4" } });
});
afterAll(async () => {
  await server?.stop();
});

const keyed = { headers: { authorization: `Bearer ${PUBLISH_KEY}` } };
const connect = async (token: string) => MuxSocket.open(`${server.wsUrl}/ws`, { protocols: ["fanout.v1", `token.${token}`] });

describe("a multiplexed connection's token", () => {
  it("is required, and refused with 4001 when it is missing", async () => {
    const mux = await MuxSocket.open(`${server.wsUrl}/ws`);
    expect((await mux.closed).code).toBe(CloseCode.UNAUTHORIZED);
  });

  it("opens the rooms its grants name, refuses the others per room, and lets it publish only where a grant says so", async () => {
    const token = await mintToken(TOKEN_SECRET, { sub: "ann", grants: [{ room: "g-chat", pub: true }, { prefix: "g-feed:" }] });
    const mux = await connect(token);
    for (const room of ["g-chat", "g-feed:1", "g-secret"]) mux.subscribe(room);
    await mux.waitFor((s) => s.of("subscribed").length === 2 && s.of("error").length === 1, 10_000, "two granted, one refused");
    expect(mux.of("error")[0]).toMatchObject({ room: "g-secret", code: "forbidden" });
    mux.send({ type: "publish", room: "g-chat", data: "hi", id: "ok" });
    mux.send({ type: "publish", room: "g-feed:1", data: "no", id: "no" });
    await mux.waitFor((s) => s.of("published").length === 1 && s.of("error").length === 2);
    expect(mux.of("published")[0]).toMatchObject({ room: "g-chat", id: "ok" });
    expect(mux.of("error")[1]).toMatchObject({ room: "g-feed:1", code: "forbidden", id: "no" });
    mux.close();
  });

  it("takes a fresh token without reconnecting: rooms it no longer grants end with unsubscribed forbidden, new ones open", async () => {
    const first = await mintToken(TOKEN_SECRET, { sub: "bob", grants: [{ room: "g-a" }, { room: "g-b" }] });
    const mux = await connect(first);
    mux.subscribe("g-a");
    mux.subscribe("g-b");
    await mux.waitFor((s) => s.of("subscribed").length === 2);
    const second = await mintToken(TOKEN_SECRET, { sub: "bob", grants: [{ room: "g-b" }, { room: "g-c" }] });
    mux.send({ type: "auth", token: second });
    await mux.waitFor((s) => s.of("authorized").length === 1 && s.of("unsubscribed").length === 1, 10_000, "authorized, g-a ended");
    expect(mux.of("unsubscribed")[0]).toMatchObject({ room: "g-a", code: "forbidden" });
    mux.subscribe("g-c");
    await mux.waitFor((s) => s.of("subscribed").length === 3);
    await publish(server.url, "g-b", "kept", keyed);
    await mux.waitForMessages("g-b", 1);
    expect(mux.closeInfo).toBeNull();
    // A token for another member would change who the connection is: refused with 4003.
    mux.send({ type: "auth", token: await mintToken(TOKEN_SECRET, { sub: "mallory", room: "g-b" }) });
    expect((await mux.closed).code).toBe(CloseCode.FORBIDDEN);
  });

  it("refuses subscribes past its budget with rate_limited and keeps the connection", async () => {
    const token = await mintToken(TOKEN_SECRET, { prefix: "g-r" });
    const mux = await connect(token);
    for (let i = 0; i < 6; i++) mux.subscribe(`g-r${i}`);
    await mux.waitFor((s) => s.of("subscribed").length + s.of("error").length === 6, 10_000, "six answers");
    expect(mux.of("error").every((e) => e.code === "rate_limited")).toBe(true);
    expect(mux.of("error").length).toBeGreaterThanOrEqual(1);
    expect(mux.closeInfo).toBeNull();
    mux.close();
  });
});
