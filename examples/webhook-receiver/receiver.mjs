#!/usr/bin/env node
// A webhook receiver for edge-fanout, in plain Node (no dependencies): it checks each request's
// signature and timestamp, skips events it has already seen (delivery is at least once, so a
// retried request can repeat events), and prints the rest, one JSON line each.
//
//   export WEBHOOK_SECRET=$(openssl rand -hex 32)   # in the environment, never in --var
//   PORT=8788 node examples/webhook-receiver/receiver.mjs &
//   npm start -- --var WEBHOOK_URL=http://127.0.0.1:8788/hooks
//
// docs/webhooks.md describes the events, the signature and the guarantees.

import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";

/** Requests signed more than this long ago (or ahead) are refused: a captured request cannot be replayed later. */
export const TOLERANCE_SECONDS = 300;

/**
 * Whether `signature` (the Webhook-Signature header, `t=<unix seconds>,v1=<hex>`) is the
 * HMAC-SHA256 of `<t>.<body>` under `secret`, with `t` within TOLERANCE_SECONDS of now.
 * `body` is the raw request body (a Buffer), exactly as received.
 */
export function verifyWebhook(secret, signature, body, nowSeconds = Math.floor(Date.now() / 1000)) {
  const fields = new Map(String(signature ?? "").split(",").map((part) => [part.slice(0, part.indexOf("=")), part.slice(part.indexOf("=") + 1)]));
  const t = Number(fields.get("t"));
  if (!Number.isSafeInteger(t) || Math.abs(nowSeconds - t) > TOLERANCE_SECONDS) return false;
  const expected = createHmac("sha256", secret).update(`${t}.`).update(body).digest();
  const given = Buffer.from(fields.get("v1") ?? "", "hex");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** Ids seen lately; a real receiver keeps them where it keeps what the events changed, in the same transaction. */
const seen = new Set();
const SEEN_MAX = 100_000;

/** A server that answers 204 to signed requests, 401 to the others; `onEvent` gets each event once. */
export function createReceiver(secret, onEvent) {
  return createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      if (req.method !== "POST" || !verifyWebhook(secret, req.headers["webhook-signature"], body)) {
        res.writeHead(401).end();
        return;
      }
      for (const event of JSON.parse(body.toString("utf8")).events) {
        if (seen.has(event.id)) continue;
        if (seen.size >= SEEN_MAX) seen.clear();
        seen.add(event.id);
        onEvent(event);
      }
      // Only a 2xx tells the room the events arrived; anything else, and they come again.
      res.writeHead(204).end();
    });
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const secret = process.env.WEBHOOK_SECRET;
  if (!secret) {
    console.error("set WEBHOOK_SECRET to the secret the service signs with");
    process.exit(2);
  }
  const port = Number(process.env.PORT ?? 8788);
  createReceiver(secret, (event) => console.log(JSON.stringify(event))).listen(port, "127.0.0.1", () =>
    console.error(`receiving webhooks on http://127.0.0.1:${port}/`),
  );
}
