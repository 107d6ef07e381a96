/**
 * Access-control settings read from the worker's environment. Secrets are set
 * with `wrangler secret put`; locally they arrive as text vars. An absent or
 * empty value switches that check off (open mode).
 */
export interface AccessSettings {
  /** Bearer key for HTTP publishing, /broadcast and /metrics; null = open. */
  publishKey: string | null;
  /** HS256 secret for subscribe tokens; null = sockets open to anyone. */
  tokenSecret: string | null;
  /** Browser origins allowed to open sockets; null = any origin. */
  allowedOrigins: ReadonlySet<string> | null;
}

function text(env: Record<string, unknown>, name: string): string | null {
  const value = env[name];
  return typeof value === "string" && value.trim() !== "" ? value : null;
}

/** Origins compare as `scheme://host[:port]`, lower-case, without a trailing slash. */
export function normalizeOrigin(origin: string): string {
  return origin.trim().replace(/\/+$/, "").toLowerCase();
}

function parseOrigins(list: string | null): ReadonlySet<string> | null {
  if (list === null) return null;
  const origins = list
    .split(",")
    .map(normalizeOrigin)
    .filter((o) => o !== "");
  return origins.length > 0 ? new Set(origins) : null;
}

const cache = new WeakMap<object, AccessSettings>();

/** The access settings of `env`, parsed once per environment object. */
export function accessSettings(env: Record<string, unknown>): AccessSettings {
  let settings = cache.get(env);
  if (!settings) {
    settings = {
      publishKey: text(env, "PUBLISH_KEY"),
      tokenSecret: text(env, "TOKEN_SECRET"),
      allowedOrigins: parseOrigins(text(env, "ALLOWED_ORIGINS")),
    };
    cache.set(env, settings);
  }
  return settings;
}
