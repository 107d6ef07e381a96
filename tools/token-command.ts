import { DEFAULT_TOKEN_TTL_SECONDS, mintToken, type RoomGrant, type TokenRequest } from "../common/tokens";

/** `room:NAME` or `prefix:P`, optionally ending in `+pub`. */
function parseGrant(spec: string): RoomGrant | null {
  const pub = spec.endsWith("+pub");
  const body = pub ? spec.slice(0, -"+pub".length) : spec;
  const colon = body.indexOf(":");
  if (colon < 0) return null;
  const kind = body.slice(0, colon);
  const name = body.slice(colon + 1);
  if (name === "" || (kind !== "room" && kind !== "prefix")) return null;
  return { [kind]: name, ...(pub ? { pub: true } : {}) };
}

export const TOKEN_CLI_USAGE = `Mints a subscribe token signed with TOKEN_SECRET (from the environment, else .dev.vars).

Usage: npm run -s token -- --room NAME [--prefix P] [--grant SPEC]... [--ttl SECONDS] [--sub ID] [--info JSON] [--publish]

  --room NAME     exact room the token opens
  --prefix P      every room whose name starts with P (with or instead of --room)
  --grant SPEC    one more grant, for a multiplexed connection (GET /ws) that follows several rooms:
                  room:NAME or prefix:P, with +pub at the end to let the holder publish there
                  (repeatable; with or instead of --room and --prefix)
  --ttl SECONDS   lifetime, default ${DEFAULT_TOKEN_TTL_SECONDS}
  --sub ID        subject: the holder's member id in presence, logged with refusals
  --info JSON     member data shown in presence, a JSON object of at most 1 KiB
  --publish       the holder may publish over the socket
  --dev-vars PATH read TOKEN_SECRET from PATH instead of .dev.vars (--no-dev-vars: from none)

Prints the token on stdout. Connect with ws://HOST/rooms/NAME/ws?token=TOKEN
or offer the subprotocols ["fanout.v1", "token.TOKEN"].`;

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

function fail(message: string): CliResult {
  return { code: 2, stdout: "", stderr: `${message}\n\n${TOKEN_CLI_USAGE}\n` };
}

/** Parses the arguments into a token request, or says what is wrong with them. */
export function parseTokenArgs(argv: readonly string[]): { ok: true; request: TokenRequest } | { ok: false; error: string } {
  const request: TokenRequest = {};
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[i + 1];
    const needValue = (): string | null => (value === undefined || value.startsWith("--") ? null : value);
    switch (flag) {
      case "--room":
      case "--prefix":
      case "--sub": {
        const v = needValue();
        if (v === null) return { ok: false, error: `${flag} needs a value` };
        if (flag === "--room") request.room = v;
        else if (flag === "--prefix") request.prefix = v;
        else request.sub = v;
        i += 1;
        break;
      }
      case "--ttl": {
        const v = needValue();
        const ttl = Number(v);
        if (v === null || !Number.isSafeInteger(ttl) || ttl <= 0) return { ok: false, error: "--ttl needs a positive whole number of seconds" };
        request.ttlSeconds = ttl;
        i += 1;
        break;
      }
      case "--info": {
        const v = needValue();
        if (v === null) return { ok: false, error: "--info needs a JSON object" };
        try {
          request.info = JSON.parse(v) as Record<string, unknown>;
        } catch {
          return { ok: false, error: "--info is not JSON" };
        }
        i += 1;
        break;
      }
      case "--grant": {
        const grant = needValue() === null ? null : parseGrant(value as string);
        if (grant === null) return { ok: false, error: "--grant needs room:NAME or prefix:P (optionally ending in +pub)" };
        (request.grants ??= []).push(grant);
        i += 1;
        break;
      }
      case "--publish":
        request.pub = true;
        break;
      default:
        return { ok: false, error: `unknown argument ${JSON.stringify(flag)}` };
    }
  }
  if (request.room === undefined && request.prefix === undefined && request.grants === undefined) return { ok: false, error: "give --room, --prefix or --grant" };
  return { ok: true, request };
}

/** The token command, free of process globals so it runs (and is tested) anywhere. */
export async function runTokenCli(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): Promise<CliResult> {
  if (argv.includes("--help") || argv.includes("-h")) return { code: 0, stdout: `${TOKEN_CLI_USAGE}\n`, stderr: "" };
  const secret = env.TOKEN_SECRET;
  if (!secret) return fail("TOKEN_SECRET is not set (in the environment or .dev.vars)");
  const parsed = parseTokenArgs(argv);
  if (!parsed.ok) return fail(parsed.error);
  try {
    return { code: 0, stdout: `${await mintToken(secret, parsed.request)}\n`, stderr: "" };
  } catch (error) {
    return fail(error instanceof Error ? error.message : String(error));
  }
}
