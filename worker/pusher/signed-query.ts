import type { ErrorCode } from "../../protocol";
import { PUSHER_AUTH_VERSION, PUSHER_LIMITS } from "../../protocol/pusher";
import { hmacHex, sameText } from "../../common/hmac";
import type { PusherApp } from "../../common/settings";

/** A request of the HTTP API as it arrived, before anything in it is trusted; its body is read only once the query holds. */
export interface SignedRequest {
  method: string;
  /** The path from `/apps/` on, as sent (its percent-encoding kept). */
  path: string;
  /** The query string as sent, without its `?`. */
  query: string;
}

export type Refusal = { ok: false; status: 400 | 401; error: ErrorCode; message: string };

export type SignatureCheck = { ok: true; params: ReadonlyMap<string, string> } | Refusal;

interface Param {
  key: string;
  raw: string;
  decoded: string;
}

const unauthorized = (message: string): Refusal => ({ ok: false, status: 401, error: "unauthorized", message });
const malformed = (message: string): Refusal => ({ ok: false, status: 400, error: "bad_request", message });

/** Percent-decoding as a form decodes a query (`+` is a space), or null for a broken escape. */
function decodeQueryPart(text: string): string | null {
  try {
    return decodeURIComponent(text.replace(/\+/g, " "));
  } catch {
    return null;
  }
}

/** Hex MD5 of the body: workerd's WebCrypto has MD5 (a non-standard digest it keeps for uses like this one). */
export async function md5Hex(body: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("MD5", body);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** `METHOD\npath\nk=v&...`: every parameter but the signature, keys lower-cased and sorted. */
function signedText(method: string, path: string, params: readonly Param[], value: (p: Param) => string): string {
  const pairs = params
    .filter((p) => p.key !== "auth_signature")
    .map((p) => [p.key, value(p)] as const)
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`);
  return `${method.toUpperCase()}\n${path}\n${pairs.join("&")}`;
}

/**
 * Checks the query of a request signed as Pusher's server SDKs sign them
 * (docs/pusher.md#the-http-api): `auth_key` is the app's key,
 * `auth_timestamp` is within PUSHER_LIMITS.maxClockSkewSeconds of the
 * server's clock, `auth_version` is 1.0, and `auth_signature` is the hex
 * HMAC-SHA256, keyed with the app's secret, of the method, the path and the
 * sorted parameters. `body_md5` is one of those parameters, so the signature
 * holds or fails before the body is read: an unsigned upload is refused
 * without reading it. The body is held to `body_md5` next (checkBodyMd5).
 *
 * The values are signed as the SDK wrote them: the Node SDK puts them in the
 * URL without encoding them (`info=user_count,subscription_count`) and signs
 * that text; SDKs that percent-encode the URL sign the values before
 * encoding. The text as sent is tried first, its decoding second: both are
 * signatures by the holder of the secret over the same request.
 *
 * Answers the parameters (keys lower-cased, values decoded) when it holds;
 * 400 for a query that cannot be read, 401 for anything about the signature.
 */
export async function checkSignedQuery(app: PusherApp, request: SignedRequest, nowMs: number): Promise<SignatureCheck> {
  const params: Param[] = [];
  const seen = new Set<string>();
  for (const part of request.query.split("&")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    const rawKey = eq < 0 ? part : part.slice(0, eq);
    const raw = eq < 0 ? "" : part.slice(eq + 1);
    const key = decodeQueryPart(rawKey)?.toLowerCase();
    const decoded = decodeQueryPart(raw);
    if (key === undefined || decoded === null) return malformed(`the query parameter ${JSON.stringify(rawKey.slice(0, 64))} is not valid percent-encoding`);
    if (seen.has(key)) return malformed(`the query names ${JSON.stringify(key.slice(0, 64))} twice`);
    seen.add(key);
    params.push({ key, raw, decoded });
  }
  const get = (key: string): string | undefined => params.find((p) => p.key === key)?.decoded;

  const authKey = get("auth_key");
  if (authKey === undefined) return unauthorized("the request is not signed: auth_key, auth_timestamp, auth_version and auth_signature are required");
  if (authKey !== app.key) return unauthorized("auth_key is not the key of this app");
  const timestamp = get("auth_timestamp");
  if (timestamp === undefined || !/^\d{1,12}$/.test(timestamp)) return unauthorized("auth_timestamp must be the time of the request in unix seconds");
  const skew = Math.abs(nowMs / 1000 - Number(timestamp));
  if (skew > PUSHER_LIMITS.maxClockSkewSeconds) {
    return unauthorized(`auth_timestamp is ${Math.round(skew)} s from the server's clock; at most ${PUSHER_LIMITS.maxClockSkewSeconds} s is accepted`);
  }
  if (get("auth_version") !== PUSHER_AUTH_VERSION) return unauthorized(`auth_version must be ${PUSHER_AUTH_VERSION}`);
  const signature = get("auth_signature");
  if (signature === undefined) return unauthorized("auth_signature is missing");

  const given = signature.toLowerCase();
  const asSent = signedText(request.method, request.path, params, (p) => p.raw);
  let valid = sameText(given, await hmacHex(app.secret, asSent));
  if (!valid) {
    const decodedPath = decodeQueryPart(request.path.replace(/\+/g, "%2B"));
    const asMeant = signedText(request.method, decodedPath ?? request.path, params, (p) => p.decoded);
    if (asMeant !== asSent) valid = sameText(given, await hmacHex(app.secret, asMeant));
  }
  if (!valid) return unauthorized("auth_signature is not valid: sign METHOD\\npath\\nsorted query with the app's secret");
  return { ok: true, params: new Map(params.map((p) => [p.key, p.decoded])) };
}

/** Whether the body is the one the signed query names: `body_md5` is its hex MD5, and a body is never unsigned. */
export async function checkBodyMd5(params: ReadonlyMap<string, string>, body: Uint8Array): Promise<Refusal | null> {
  const bodyMd5 = params.get("body_md5");
  if (bodyMd5 === undefined) return body.byteLength > 0 ? unauthorized("a request with a body must sign it: body_md5 is missing") : null;
  return sameText(bodyMd5.toLowerCase(), await md5Hex(body)) ? null : unauthorized("body_md5 is not the MD5 of the body");
}
