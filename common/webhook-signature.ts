/**
 * The signature of a webhook request (docs/webhooks.md#signatures):
 * `Webhook-Signature: t=<unix seconds>,v1=<hex>`, where the hex is
 * HMAC-SHA256 with WEBHOOK_SECRET over `<t>.<body>`. The timestamp is inside
 * what is signed, so a receiver that refuses old timestamps refuses replays
 * of captured requests; the body is signed as sent, byte for byte.
 */

const encoder = new TextEncoder();
const keys = new Map<string, Promise<CryptoKey>>();

function keyFor(secret: string): Promise<CryptoKey> {
  let key = keys.get(secret);
  if (!key) {
    key = crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    // One secret per deployment; the map only ever holds it (and a rotated one).
    if (keys.size > 4) keys.clear();
    keys.set(secret, key);
  }
  return key;
}

function hex(bytes: ArrayBuffer): string {
  return [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** The `Webhook-Signature` value for `body` sent at `unixSeconds`. */
export async function webhookSignature(secret: string, unixSeconds: number, body: string): Promise<string> {
  const mac = await crypto.subtle.sign("HMAC", await keyFor(secret), encoder.encode(`${unixSeconds}.${body}`));
  return `t=${unixSeconds},v1=${hex(mac)}`;
}
