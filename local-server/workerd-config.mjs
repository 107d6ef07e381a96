// The workerd configuration of the local server, from the same facts
// wrangler.toml gives `wrangler deploy`, encoded as a binary Cap'n Proto
// message for `workerd serve --binary -`: it reaches workerd over a pipe and
// is never written to disk, because it holds the secrets and the admin token.
//
// Sockets:
// - "http", the service's: the public listening socket (direct mode, passed as
//   a descriptor) or a Unix socket the accept gate relays to. Requests on it
//   lose any admin header a client sent.
// - "admin", a Unix socket in the launcher's private directory: requests on it
//   carry the admin header (worker/local-routes.ts), set by workerd itself.
//
// Outbound: the worker's fetch() reaches public addresses only (workerd's
// default), and loopback as well when WEBHOOK_URL or PUSHER_WEBHOOK_URL names a
// loopback address, so that webhooks can go to a receiver on this machine
// (docs/webhooks.md, docs/pusher.md#webhooks).

import { createRequire } from "node:module";

/** The header that opens the worker's admin routes; the same name as LOCAL_ADMIN_HEADER in worker/local-routes.ts. */
const LOCAL_ADMIN_HEADER = "x-local-admin-token";

/**
 * @param {{
 *   bundle: string; compatibilityDate: string; compatibilityFlags: string[];
 *   vars: Record<string, unknown>; durableObjects: { binding: string; className: string }[];
 *   dataDir: string; httpAddress: string | null; adminAddress: string; adminToken: string;
 * }} options httpAddress: null when the socket is passed as a descriptor
 */
export function workerdConfig(options) {
  const loopback = webhookIsLoopback(options.vars.WEBHOOK_URL) || webhookIsLoopback(options.vars.PUSHER_WEBHOOK_URL);
  const text = (value) => (typeof value === "string" ? value : JSON.stringify(value));
  return {
    services: [
      {
        name: "main",
        worker: {
          modules: [{ name: "worker.js", esModule: options.bundle }],
          compatibilityDate: options.compatibilityDate,
          compatibilityFlags: options.compatibilityFlags,
          bindings: [
            ...Object.entries(options.vars).map(([name, value]) => ({ name, text: text(value) })),
            ...options.durableObjects.map((d) => ({ name: d.binding, durableObjectNamespace: { className: d.className } })),
          ],
          durableObjectNamespaces: options.durableObjects.map((d) => ({
            className: d.className,
            uniqueKey: `edge-fanout-${d.className}`,
            enableSql: true,
          })),
          durableObjectStorage: { localDisk: "storage" },
        },
      },
      { name: "storage", disk: { path: options.dataDir, writable: true } },
      {
        name: "internet",
        network: { allow: ["public", ...(loopback ? ["127.0.0.0/8", "::1/128"] : [])], tlsOptions: { trustBrowserCas: true } },
      },
    ],
    sockets: [
      {
        name: "http",
        ...(options.httpAddress === null ? {} : { address: options.httpAddress }),
        // A header without a value is removed from every request.
        http: { injectRequestHeaders: [{ name: LOCAL_ADMIN_HEADER }] },
        service: { name: "main" },
      },
      {
        name: "admin",
        address: options.adminAddress,
        http: { injectRequestHeaders: [{ name: LOCAL_ADMIN_HEADER, value: options.adminToken }] },
        service: { name: "main" },
      },
    ],
  };
}

/**
 * Whether a webhook URL names this machine (127.0.0.0/8, ::1 or localhost).
 * @param {unknown} value
 */
export function webhookIsLoopback(value) {
  if (typeof value !== "string") return false;
  let host;
  try {
    host = new URL(value.trim()).hostname;
  } catch {
    return false;
  }
  return host === "localhost" || host === "[::1]" || /^127(\.\d{1,3}){3}$/.test(host);
}

/** Encodes a config with miniflare's serializer, which follows workerd's own schema. */
export async function encodeWorkerdConfig(config) {
  const require = createRequire(import.meta.url);
  const { serializeConfig } = await import(require.resolve("miniflare"));
  return serializeConfig(config);
}
