// Command line and environment of the local server launcher.

import { dirname, join, resolve } from "node:path";

export const USAGE = `Usage: npm start -- [options]      (or: node local-server/server.mjs [options])

Options:
  --config PATH        the wrangler.toml of the worker to run (default: this repository's); its
                       \`main\` is bundled with esbuild, its bindings and [vars] are bound
  --mount PATH         where that worker mounts the fan-out app (createFanoutApp), e.g. /realtime
                       (default /): the launcher's health and shutdown calls go there
  --var KEY=VALUE      set a var or secret; wins over the environment, .dev.vars and wrangler.toml
  --dev-vars PATH      read vars and secrets from PATH (default: .dev.vars next to the wrangler.toml)
  --no-dev-vars        read no .dev.vars file
  --gate auto|on|off   accept gate in front of workerd (default auto: on below a descriptor limit
                       of 262144; env ACCEPT_GATE). Without it the connection ceiling is a quarter
                       of the limit, to leave room for connection storms
  --ceiling N          upgrades past N descriptors get 503 (env CONNECTION_CEILING); above a
                       quarter of the limit without the gate, a storm of idle connections can
                       abort workerd: for measuring capacity, not for exposure
  --no-build           serve the worker as last built (dist/worker.js for this repository's)
  --help               print this

Environment:
  PORT (8787), HOST (127.0.0.1), DATA_DIR (.data), and the vars and secrets the service knows:
  PUBLISH_KEY, TOKEN_SECRET, ALLOWED_ORIGINS and every [vars] key of wrangler.toml.
Precedence: --var > environment > .dev.vars > wrangler.toml. Secrets on the command line show
in \`ps\` and in npm's banner; prefer .dev.vars or the environment for them.

Stopping:
  SIGTERM, SIGINT (Ctrl-C) or SIGHUP refuses new sockets, closes every socket with 1012 (clients
  reconnect and resume) and exits. A SIGINT within 1 s of the first is the same Ctrl-C delivered
  twice (by the terminal and by npm) and changes nothing; a Ctrl-C pressed again later stops at
  once, without waiting for the sockets to close.`;

/**
 * @param {readonly string[]} argv
 * @param {Record<string, string | undefined>} env
 * @param {string} root repository root (with a trailing slash)
 * @returns {{ ok: true; options: {
 *   build: boolean; configPath: string; mount: string; overrides: Record<string, string>; devVarsPath: string | null;
 *   gate: "auto" | "on" | "off"; ceiling: number | null; port: number; host: string; dataDir: string; help: boolean;
 * } } | { ok: false; error: string }}
 */
export function parseOptions(argv, env, root) {
  /** @type {Record<string, string>} */
  const overrides = {};
  let build = true;
  let configPath = `${root}wrangler.toml`;
  let mount = "";
  /** @type {string | null | undefined} undefined: next to the config */
  let devVarsPath;
  let gate = env.ACCEPT_GATE ?? "auto";
  let ceiling = env.CONNECTION_CEILING ?? null;
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = argv[i + 1];
    switch (arg) {
      case "--no-build":
        build = false;
        break;
      case "--var": {
        const eq = value?.indexOf("=") ?? -1;
        if (value === undefined || eq < 1) return { ok: false, error: "--var needs KEY=VALUE" };
        overrides[value.slice(0, eq)] = value.slice(eq + 1);
        i += 1;
        break;
      }
      case "--config":
        if (value === undefined || value.startsWith("--")) return { ok: false, error: "--config needs the path of a wrangler.toml" };
        configPath = resolve(value);
        i += 1;
        break;
      case "--mount":
        if (value === undefined || !/^\/[A-Za-z0-9._~\/-]*$/.test(value)) return { ok: false, error: "--mount needs a path such as /realtime" };
        mount = value.replace(/\/+$/, "");
        i += 1;
        break;
      case "--dev-vars":
        if (value === undefined || value.startsWith("--")) return { ok: false, error: "--dev-vars needs a path" };
        devVarsPath = value;
        i += 1;
        break;
      case "--no-dev-vars":
        devVarsPath = null;
        break;
      case "--gate":
        if (value === undefined) return { ok: false, error: "--gate needs auto, on or off" };
        gate = value;
        i += 1;
        break;
      case "--ceiling":
        if (value === undefined) return { ok: false, error: "--ceiling needs a number of descriptors" };
        ceiling = value;
        i += 1;
        break;
      case "--help":
      case "-h":
        help = true;
        break;
      default:
        // Never echo the argument: it may be a secret passed in the wrong place.
        return { ok: false, error: `unknown argument #${i + 1}` };
    }
  }
  if (gate !== "auto" && gate !== "on" && gate !== "off") return { ok: false, error: "--gate (or ACCEPT_GATE) must be auto, on or off" };
  if (ceiling !== null && !/^\d{1,9}$/.test(ceiling)) return { ok: false, error: "--ceiling (or CONNECTION_CEILING) must be a whole number" };
  const port = Number(env.PORT ?? 8787);
  if (!Number.isInteger(port) || port < 0 || port > 65535) return { ok: false, error: "PORT must be a TCP port number" };
  const dataDir = env.DATA_DIR ?? `${root}.data`;
  if (devVarsPath === undefined) devVarsPath = join(dirname(configPath), ".dev.vars");
  return {
    ok: true,
    options: { build, configPath, mount, overrides, devVarsPath, gate, ceiling: ceiling === null ? null : Number(ceiling), port, host: env.HOST ?? "127.0.0.1", dataDir, help },
  };
}
