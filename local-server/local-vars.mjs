// The vars and secrets the local server binds, and where each came from.
//
// Precedence, highest first (as `wrangler dev`, plus the process environment):
//   1. --var KEY=VALUE on the command line (any key)
//   2. the environment (known keys only; an empty value counts as unset, so a
//      stray `export TOKEN_SECRET=` cannot switch a check off)
//   3. .dev.vars (known keys only; others are reported and ignored)
//   4. wrangler.toml [vars]
// Known keys are those of wrangler.toml [vars] plus the access and webhook settings.

/** Access settings (docs/security.md); the first two are secrets. */
export const ACCESS_KEYS = ["PUBLISH_KEY", "TOKEN_SECRET", "ALLOWED_ORIGINS"];
/** Webhook settings that are text, not limits (docs/webhooks.md); WEBHOOK_SECRET is a secret. */
export const WEBHOOK_KEYS = ["WEBHOOK_URL", "WEBHOOK_EVENTS", "WEBHOOK_MESSAGE_PREFIX", "WEBHOOK_SECRET"];
/** The Pusher front door's settings (docs/pusher.md); PUSHER_APP_SECRET is a secret. */
export const PUSHER_KEYS = ["PUSHER_APP_ID", "PUSHER_APP_KEY", "PUSHER_APP_SECRET", "PUSHER_CLIENT_EVENTS", "PUSHER_WEBHOOK_URL", "PUSHER_WEBHOOK_EVENTS"];
export const SECRET_KEYS = ["PUBLISH_KEY", "TOKEN_SECRET", "WEBHOOK_SECRET", "PUSHER_APP_SECRET"];

/**
 * @param {{
 *   tomlVars: Record<string, unknown>;
 *   devVars: Record<string, string>;
 *   env: Record<string, string | undefined>;
 *   overrides: Record<string, string>;
 * }} sources
 * @returns {{ vars: Record<string, unknown>; origin: Record<string, string>; ignored: string[] }}
 *   origin: where each bound key came from; ignored: .dev.vars keys that are not known
 */
export function resolveVars({ tomlVars, devVars, env, overrides }) {
  const known = new Set([...Object.keys(tomlVars), ...ACCESS_KEYS, ...WEBHOOK_KEYS, ...PUSHER_KEYS]);
  /** @type {Record<string, unknown>} */
  const vars = { ...tomlVars };
  /** @type {Record<string, string>} */
  const origin = Object.fromEntries(Object.keys(tomlVars).map((k) => [k, "wrangler.toml"]));
  const ignored = [];
  for (const [key, value] of Object.entries(devVars)) {
    if (!known.has(key)) {
      ignored.push(key);
      continue;
    }
    vars[key] = value;
    origin[key] = ".dev.vars";
  }
  for (const key of known) {
    const value = env[key];
    if (value === undefined || value === "") continue;
    vars[key] = value;
    origin[key] = "environment";
  }
  for (const [key, value] of Object.entries(overrides)) {
    vars[key] = value;
    origin[key] = "--var";
  }
  return { vars, origin, ignored };
}

/**
 * One line for the banner saying whether the Pusher front door is on (with
 * its app id and key, which are public, and where they came from) or why it
 * is off; never the secret.
 * @param {Record<string, unknown>} vars
 * @param {Record<string, string>} origin
 * @param {string} socketUrl the ws:// base the front door listens on
 */
export function describePusher(vars, origin, socketUrl) {
  const set = (key) => typeof vars[key] === "string" && vars[key].trim() !== "";
  const missing = ["PUSHER_APP_ID", "PUSHER_APP_KEY", "PUSHER_APP_SECRET"].filter((key) => !set(key));
  if (missing.length === 3) return "off (set PUSHER_APP_ID, PUSHER_APP_KEY and PUSHER_APP_SECRET to turn it on: docs/pusher.md)";
  if (missing.length > 0) return `off (${missing.join(" and ")} not set)`;
  const events = set("PUSHER_CLIENT_EVENTS") ? `, client events ${["1", "true", "on", "yes"].includes(String(vars.PUSHER_CLIENT_EVENTS).trim().toLowerCase()) ? "on" : "off"}` : ", client events off";
  const webhooks = set("PUSHER_WEBHOOK_URL") ? ", Pusher webhooks on" : "";
  return `${socketUrl}/app/${vars.PUSHER_APP_KEY} for app ${vars.PUSHER_APP_ID} (${origin.PUSHER_APP_KEY})${events}${webhooks}`;
}

/**
 * One line for the banner saying which access settings are on and where they
 * came from; never their values.
 * @param {Record<string, unknown>} vars
 * @param {Record<string, string>} origin
 */
export function describeAccess(vars, origin) {
  return ACCESS_KEYS.map((key) => {
    const value = vars[key];
    const set = typeof value === "string" && value.trim() !== "";
    return set ? `${key} set (${origin[key]})` : `${key} not set`;
  }).join(", ");
}
