/**
 * HMAC-SHA256 as hex, with the platform's WebCrypto: what webhook signatures
 * and every Pusher signature (channel authorizations, sign-ins, signed HTTP
 * requests, webhooks) are made of.
 */

const encoder = new TextEncoder();
const keys = new Map<string, Promise<CryptoKey>>();

function keyFor(secret: string): Promise<CryptoKey> {
  let key = keys.get(secret);
  if (!key) {
    key = crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    // A deployment has a secret or two (and a rotated one): the map stays that small.
    if (keys.size > 8) keys.clear();
    keys.set(secret, key);
  }
  return key;
}

function hex(bytes: ArrayBuffer): string {
  return [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** HMAC-SHA256 of `text` (UTF-8) with `secret`, as lower-case hex. */
export async function hmacHex(secret: string, text: string): Promise<string> {
  return hex(await crypto.subtle.sign("HMAC", await keyFor(secret), encoder.encode(text)));
}

/** Whether two strings are equal, in time that does not depend on where they differ. */
export function sameText(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}
