import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, readlinkSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { SECRET_VARS, TEXT_VARS } from "../../common/settings";
import { fileURLToPath } from "node:url";

const serverScript = fileURLToPath(new URL("../../local-server/server.mjs", import.meta.url));
const wranglerToml = fileURLToPath(new URL("../../wrangler.toml", import.meta.url));

export interface ServerOptions {
  port?: number;
  /** Overrides for wrangler.toml vars, e.g. { WINDOW_BYTES: "4096" } (passed as --var). */
  vars?: Record<string, string>;
  /** Storage directory; a fresh temporary one by default. Reuse it to restart with the same rooms. */
  dataDir?: string;
  /** Runs the server under this descriptor limit (soft and hard), as `ulimit -n` would (raising it past the current hard limit needs privilege). */
  fdLimit?: number;
  /** `--gate`: the accept gate in front of workerd (default: the launcher decides). */
  gate?: "auto" | "on" | "off";
  /** Environment entries for the launcher, on top of a copy of this process's without any var the service reads. */
  env?: Record<string, string>;
  /** Further launcher arguments. Without a `--dev-vars`, the launcher reads no .dev.vars file. */
  args?: string[];
  /** Let the launcher bundle the worker (another worker's, with `--config` in `args`); by default it serves dist/worker.js as the run's setup built it. */
  build?: boolean;
}

export interface LocalServer {
  url: string;
  wsUrl: string;
  port: number;
  dataDir: string;
  /** The launcher's pid. */
  pid: number;
  /** workerd's pid, from the launcher's banner. */
  workerdPid: number;
  /** Everything the server printed so far. */
  output(): string;
  /** Stops the server with `signal` (SIGTERM: graceful, sockets closed with 1012) and waits for it to exit. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Stops gracefully and starts again on the same port and data directory. */
  restart(): Promise<void>;
}

/** A free TCP port on 127.0.0.1, as the kernel hands one out. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const port = typeof address === "object" && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Names the launcher would take from the environment (docs/security.md): a
 * developer's shell or .dev.vars must not leak into a test's server.
 */
function serviceVarNames(): string[] {
  const toml = readFileSync(wranglerToml, "utf8");
  const section = /^\[vars\]\s*$([\s\S]*?)(?=^\[|$(?![\s\S]))/m.exec(toml)?.[1] ?? "";
  const names = [...section.matchAll(/^\s*([A-Z][A-Z0-9_]*)\s*=/gm)].map((m) => m[1] as string);
  return [...names, ...TEXT_VARS, ...SECRET_VARS, "ACCEPT_GATE", "CONNECTION_CEILING"];
}

function launcherEnv(port: number, dataDir: string, extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of serviceVarNames()) delete env[name];
  return { ...env, PORT: String(port), DATA_DIR: dataDir, ...extra };
}

function launch(port: number, dataDir: string, options: ServerOptions): Promise<{ child: ChildProcess; log: string[] }> {
  const args = options.build ? [serverScript] : [serverScript, "--no-build"];
  for (const [key, value] of Object.entries(options.vars ?? {})) args.push("--var", `${key}=${value}`);
  if (options.gate) args.push("--gate", options.gate);
  const extra = options.args ?? [];
  if (!extra.includes("--dev-vars")) args.push("--no-dev-vars");
  args.push(...extra);
  // `exec` keeps the pid the launcher's, so signals reach it directly.
  const [command, argv] =
    options.fdLimit === undefined
      ? [process.execPath, args]
      : ["/bin/sh", ["-c", `ulimit -n ${options.fdLimit} && exec "$0" "$@"`, process.execPath, ...args]];
  const child = spawn(command, argv, { env: launcherEnv(port, dataDir, options.env ?? {}), stdio: ["ignore", "pipe", "pipe"] });
  const log: string[] = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`server did not start within 30 s:\n${log.join("")}`));
    }, 30_000);
    const onData = (chunk: Buffer) => {
      log.push(chunk.toString());
      if (/workerd pid \d+/.test(log.join(""))) {
        clearTimeout(timer);
        resolve({ child, log });
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", (chunk: Buffer) => log.push(chunk.toString()));
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${log.join("")}`));
    });
  });
}

/** Starts the local server (local-server/server.mjs) on its own port and data directory. */
export async function startServer(options: ServerOptions = {}): Promise<LocalServer> {
  const port = options.port ?? (await freePort());
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "fanout-test-"));
  let current = await launch(port, dataDir, options);
  const workerdPidOf = (log: string[]) => Number(/workerd pid (\d+)/.exec(log.join(""))?.[1] ?? 0);

  const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
    const { child, log } = current;
    if (signal === "SIGKILL") {
      // The launcher's watchdog would stop workerd within seconds; a test wants it gone now.
      const workerdPid = workerdPidOf(log);
      if (workerdPid) {
        try {
          process.kill(workerdPid, "SIGKILL");
        } catch {
          // Already gone.
        }
      }
    }
    if (child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      child.once("exit", () => {
        clearTimeout(timer);
        resolve();
      });
      child.kill(signal);
    });
  };

  const server: LocalServer = {
    url: `http://127.0.0.1:${port}`,
    wsUrl: `ws://127.0.0.1:${port}`,
    port,
    dataDir,
    get pid() {
      return current.child.pid ?? 0;
    },
    get workerdPid() {
      return workerdPidOf(current.log);
    },
    output: () => current.log.join(""),
    stop,
    restart: async () => {
      await stop("SIGTERM");
      current = await launch(port, dataDir, options);
    },
  };
  return server;
}

/** Whether process `pid` still exists (signal 0 delivers nothing; it only checks). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * The launcher's private directory (its Unix sockets'), found from the sockets
 * workerd `pid` holds and /proc/net/unix (Linux).
 */
export function privateDirOf(workerdPid: number): string | null {
  const owned = new Set<string>();
  for (const fd of readdirSync(`/proc/${workerdPid}/fd`)) {
    try {
      const inode = /socket:\[(\d+)\]/.exec(readlinkSync(`/proc/${workerdPid}/fd/${fd}`))?.[1];
      if (inode) owned.add(inode);
    } catch {
      // Closed meanwhile.
    }
  }
  const path = readFileSync("/proc/net/unix", "utf8")
    .split("\n")
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .find((cols) => cols.length >= 8 && owned.has(cols[6] as string))?.[7];
  return path === undefined ? null : dirname(path);
}
