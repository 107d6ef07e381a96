/**
 * The command line of `npm run conformance`: which service to check, with which
 * credentials, and how to print the results. The suite talks to the given URL
 * only, and to a loopback address unless told otherwise (loopback.ts, checked
 * once the name is resolved), so that running it by mistake never sends
 * traffic to somebody else's deployment.
 */

export interface SuiteOptions {
  /** Base URL of the service (http or https), without a trailing slash. */
  url: string;
  /** The service's PUBLISH_KEY, when it has one. */
  publishKey?: string;
  /** The service's TOKEN_SECRET, when it has one: the suite mints its own subscribe tokens. */
  tokenSecret?: string;
  /** Allow a URL that is not a loopback address. */
  allowRemote: boolean;
  /** Print one JSON document instead of the table. */
  json: boolean;
  /** Run only the checks whose id starts with one of these. */
  only: string[];
  /** The Pusher app to check the front door with (all three of its options, or none). */
  pusher?: { appId: string; key: string; secret: string };
}

export type ParsedOptions = { ok: true; options: SuiteOptions } | { ok: false; message: string; help?: boolean };

export const USAGE = `Usage: npm run conformance -- --url <base> [options]

Checks a running edge-fanout service against its delivery contract (docs/guarantees.md),
black-box, over HTTP and WebSocket.

  --url <base>            the service, e.g. http://127.0.0.1:8787 (required)
  --publish-key <key>     the service's PUBLISH_KEY (also: CONFORMANCE_PUBLISH_KEY)
  --token-secret <secret> the service's TOKEN_SECRET, to mint subscribe tokens (also: CONFORMANCE_TOKEN_SECRET)
  --pusher-app-id <id>    the Pusher front door's app (PUSHER_APP_ID; also: CONFORMANCE_PUSHER_APP_ID),
  --pusher-key <key>        its key (PUSHER_APP_KEY; also: CONFORMANCE_PUSHER_KEY)
  --pusher-secret <secret>  and its secret (PUSHER_APP_SECRET; also: CONFORMANCE_PUSHER_SECRET): the G14 checks
  --allow-remote          allow a URL whose name does not resolve to a loopback address only
  --only <id>[,<id>]      run only checks whose id starts with one of these
  --json                  print the results as JSON
  --help                  this text

Exit code: 0 when no check failed, 1 when one did, 2 for a usage error or an unreachable service.`;

/** Parses argv (without node and the script) and the environment's fallbacks for secrets. */
export function parseOptions(argv: readonly string[], env: Record<string, string | undefined> = {}): ParsedOptions {
  let url: string | undefined;
  let publishKey = env.CONFORMANCE_PUBLISH_KEY || undefined;
  let tokenSecret = env.CONFORMANCE_TOKEN_SECRET || undefined;
  let pusherAppId = env.CONFORMANCE_PUSHER_APP_ID || undefined;
  let pusherKey = env.CONFORMANCE_PUSHER_KEY || undefined;
  let pusherSecret = env.CONFORMANCE_PUSHER_SECRET || undefined;
  let allowRemote = false;
  let json = false;
  const only: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const [name, inline] = arg.startsWith("--") && arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined];
    const value = (): string | undefined => inline ?? argv[++i];
    switch (name) {
      case "--url":
        url = value();
        break;
      case "--publish-key":
        publishKey = value();
        break;
      case "--token-secret":
        tokenSecret = value();
        break;
      case "--pusher-app-id":
        pusherAppId = value();
        break;
      case "--pusher-key":
        pusherKey = value();
        break;
      case "--pusher-secret":
        pusherSecret = value();
        break;
      case "--allow-remote":
        allowRemote = true;
        break;
      case "--json":
        json = true;
        break;
      case "--only":
        only.push(...(value() ?? "").split(",").filter(Boolean));
        break;
      case "--help":
      case "-h":
        return { ok: false, message: USAGE, help: true };
      default:
        return { ok: false, message: `unknown argument ${JSON.stringify(arg)}\n\n${USAGE}` };
    }
  }
  if (!url) return { ok: false, message: `--url is required\n\n${USAGE}` };
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, message: `--url ${JSON.stringify(url)} is not a URL` };
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return { ok: false, message: `--url must be http or https, not ${parsed.protocol}` };
  if (publishKey === "") publishKey = undefined;
  if (tokenSecret === "") tokenSecret = undefined;
  const base = `${parsed.origin}${parsed.pathname.replace(/\/+$/, "")}`;
  const pusherGiven = [pusherAppId, pusherKey, pusherSecret].filter((v) => v !== undefined && v !== "").length;
  if (pusherGiven > 0 && pusherGiven < 3) return { ok: false, message: "--pusher-app-id, --pusher-key and --pusher-secret go together" };
  const pusher = pusherGiven === 3 ? { appId: pusherAppId as string, key: pusherKey as string, secret: pusherSecret as string } : undefined;
  return { ok: true, options: { url: base, publishKey, tokenSecret, allowRemote, json, only, ...(pusher ? { pusher } : {}) } };
}
