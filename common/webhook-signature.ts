/**
 * The signature of a webhook request (docs/webhooks.md#signatures):
 * `Webhook-Signature: t=<unix seconds>,v1=<hex>`, where the hex is
 * HMAC-SHA256 with WEBHOOK_SECRET over `<t>.<body>`. The timestamp is inside
 * what is signed, so a receiver that refuses old timestamps refuses replays
 * of captured requests; the body is signed as sent, byte for byte.
 */
import { hmacHex } from "./hmac";

/** The `Webhook-Signature` value for `body` sent at `unixSeconds`. */
export async function webhookSignature(secret: string, unixSeconds: number, body: string): Promise<string> {
  return `t=${unixSeconds},v1=${await hmacHex(secret, `${unixSeconds}.${body}`)}`;
}
