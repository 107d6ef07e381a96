import { describe, expect, it } from "vitest";
import type { PusherApp } from "../../common/settings";
import { checkBodyMd5, checkSignedQuery, md5Hex } from "../../worker/pusher/signed-query";

/**
 * The HTTP API's signed requests (worker/pusher/signed-query.ts), in workerd:
 * MD5 against RFC 1321's test suite, Pusher's own worked example, and the
 * ways a request is refused.
 */

const utf8 = new TextEncoder();

/** Pusher's documented worked example (HTTP API reference, "Worked authentication example"). */
const WORKED = {
  app: { id: "3", key: "278d425bdf160c739803", secret: "7ad3773142a6692b25b8", clientEvents: false, webhookUrl: null, webhookEvents: new Set() } as PusherApp,
  body: '{"name":"foo","channels":["project-3"],"data":"{\\"some\\":\\"data\\"}"}',
  query:
    "auth_key=278d425bdf160c739803&auth_timestamp=1353088179&auth_version=1.0&body_md5=ec365a775a4cd0599faeb73354201b6f" +
    "&auth_signature=da454824c97ba181a32ccc17a72625ba02771f50b50e1e7430e47a1f3f457e6c",
  nowMs: 1353088179 * 1000,
};

/** The worked example's request checked as the API checks it: its query, then its body against body_md5. */
async function worked(overrides: { query?: string; body?: string; nowMs?: number; method?: string; path?: string } = {}) {
  const query = await checkSignedQuery(WORKED.app, { method: overrides.method ?? "POST", path: overrides.path ?? "/apps/3/events", query: overrides.query ?? WORKED.query }, overrides.nowMs ?? WORKED.nowMs);
  if (!query.ok) return query;
  return (await checkBodyMd5(query.params, utf8.encode(overrides.body ?? WORKED.body))) ?? query;
}

/** HMAC-SHA256 hex, written here with WebCrypto directly rather than through the code under test. */
async function sign(secret: string, text: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", utf8.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return [...new Uint8Array(await crypto.subtle.sign("HMAC", key, utf8.encode(text)))].map((b) => b.toString(16).padStart(2, "0")).join("");
}

describe("md5Hex", () => {
  it("matches RFC 1321's test suite", async () => {
    const suite: [string, string][] = [
      ["", "d41d8cd98f00b204e9800998ecf8427e"],
      ["a", "0cc175b9c0f1b6a831c399e269772661"],
      ["abc", "900150983cd24fb0d6963f7d28e17f72"],
      ["message digest", "f96b697d7cb7938d525a2f31aaf161d0"],
      ["abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"],
      ["ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"],
      ["1234567890".repeat(8), "57edf4a22be3c955ac49da2e2107b67a"],
    ];
    for (const [input, digest] of suite) expect(await md5Hex(utf8.encode(input))).toBe(digest);
  });
});

describe("checkSignedRequest", () => {
  it("accepts Pusher's worked example, up to 600 s either side of its timestamp", async () => {
    expect(await worked()).toMatchObject({ ok: true });
    expect(await worked({ nowMs: WORKED.nowMs + 600_000 })).toMatchObject({ ok: true });
    expect(await worked({ nowMs: WORKED.nowMs - 600_000 })).toMatchObject({ ok: true });
  });

  it("refuses it 601 s off, with another body, another key, another method or path, or its signature changed", async () => {
    expect(await worked({ nowMs: WORKED.nowMs + 601_000 })).toMatchObject({ ok: false, status: 401, message: expect.stringContaining("601 s") });
    expect(await worked({ body: WORKED.body.replace("foo", "bar") })).toEqual({ ok: false, status: 401, error: "unauthorized", message: "body_md5 is not the MD5 of the body" });
    expect(await worked({ query: WORKED.query.replace("auth_key=278d", "auth_key=999d") })).toMatchObject({ status: 401, message: "auth_key is not the key of this app" });
    expect(await worked({ query: WORKED.query.replace(/7e6c$/, "7e6d") })).toMatchObject({ status: 401, message: expect.stringContaining("auth_signature is not valid") });
    expect(await worked({ method: "PUT" })).toMatchObject({ ok: false, status: 401 });
    expect(await worked({ path: "/apps/3/batch_events" })).toMatchObject({ ok: false, status: 401 });
  });

  it("requires body_md5 with a body, auth_version 1.0, and every auth parameter", async () => {
    expect(await checkBodyMd5(new Map(), utf8.encode("{}"))).toMatchObject({ status: 401, message: "a request with a body must sign it: body_md5 is missing" });
    expect(await checkBodyMd5(new Map(), new Uint8Array())).toBeNull();
    // Without body_md5 the worked example's signature is over another query: refused before any body is read.
    const withoutMd5 = WORKED.query.replace("&body_md5=ec365a775a4cd0599faeb73354201b6f", "");
    expect(await worked({ query: withoutMd5 })).toMatchObject({ status: 401, message: expect.stringContaining("auth_signature is not valid") });
    expect(await worked({ query: WORKED.query.replace("auth_version=1.0", "auth_version=2.0") })).toMatchObject({ status: 401, message: "auth_version must be 1.0" });
    expect(await worked({ query: "" })).toMatchObject({ status: 401, message: expect.stringContaining("not signed") });
    expect(await worked({ query: WORKED.query.replace(/&auth_signature=.*/, "") })).toMatchObject({ status: 401, message: "auth_signature is missing" });
  });

  it("signs values as sent (the Node SDK leaves them unencoded) or as decoded (SDKs that encode the URL), keys lower-cased", async () => {
    const app = WORKED.app;
    const now = WORKED.nowMs;
    const base = "auth_key=278d425bdf160c739803&auth_timestamp=1353088179&auth_version=1.0";
    const canonical = `GET\n/apps/3/channels\n${base}&filter_by_prefix=presence-&info=user_count,subscription_count`;
    const signature = await sign(app.secret, canonical);
    const get = (query: string) => checkSignedQuery(app, { method: "GET", path: "/apps/3/channels", query }, now);

    const raw = await get(`${base}&info=user_count,subscription_count&filter_by_prefix=presence-&auth_signature=${signature}`);
    expect(raw).toMatchObject({ ok: true });
    expect(raw.ok && raw.params.get("info")).toBe("user_count,subscription_count");
    expect(await get(`${base}&info=user_count%2Csubscription_count&filter_by_prefix=presence-&auth_signature=${signature}`)).toMatchObject({ ok: true });
    expect(await get(`${base}&INFO=user_count,subscription_count&Filter_By_Prefix=presence-&auth_signature=${signature.toUpperCase()}`)).toMatchObject({ ok: true });
    // What the signature does not cover is refused: another value, another parameter.
    expect(await get(`${base}&info=user_count&filter_by_prefix=presence-&auth_signature=${signature}`)).toMatchObject({ ok: false, status: 401 });
    expect(await get(`${base}&info=user_count,subscription_count&filter_by_prefix=presence-&extra=1&auth_signature=${signature}`)).toMatchObject({ ok: false, status: 401 });
  });

  it("answers 400 to a query that cannot be read: a parameter twice, a broken escape", async () => {
    expect(await worked({ query: `${WORKED.query}&info=a&Info=b` })).toEqual({ ok: false, status: 400, error: "bad_request", message: 'the query names "info" twice' });
    expect(await worked({ query: `${WORKED.query}&info=%E0%A4%A` })).toMatchObject({ ok: false, status: 400, error: "bad_request" });
  });
});
