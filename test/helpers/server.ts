import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const serverScript = fileURLToPath(new URL("../../worker/local/server.mjs", import.meta.url));

export interface ServerOptions {
  port?: number;
  /** Overrides for wrangler.toml vars, e.g. { WINDOW_BYTES: "4096" }. */
  vars?: Record<string, string>;
  /** Storage directory; a fresh temporary one by default. Reuse it to restart with the same rooms. */
  dataDir?: string;
  /** Runs the server under this descriptor limit (soft and hard), as `ulimit -n` would. */
  fdLimit?: number;
}

export interface LocalServer {
  url: string;
  wsUrl: string;
  port: number;
  dataDir: string;
  pid: number;
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

function launch(port: number, dataDir: string, vars: Record<string, string>, fdLimit?: number): Promise<{ child: ChildProcess; log: string[] }> {
  const args = [serverScript, "--no-build"];
  for (const [key, value] of Object.entries(vars)) args.push("--var", `${key}=${value}`);
  // `exec` keeps the pid the launcher's, so signals reach it directly.
  const [command, argv] =
    fdLimit === undefined
      ? [process.execPath, args]
      : ["/bin/sh", ["-c", `ulimit -n ${fdLimit} && exec "$0" "$@"`, process.execPath, ...args]];
  const child = spawn(command, argv, {
    env: { ...process.env, PORT: String(port), DATA_DIR: dataDir },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const log: string[] = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`server did not start within 30 s:\n${log.join("")}`));
    }, 30_000);
    const onData = (chunk: Buffer) => {
      log.push(chunk.toString());
      if (log.join("").includes("listening on")) {
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

/** Starts the local server (worker/local/server.mjs) on its own port and data directory. */
export async function startServer(options: ServerOptions = {}): Promise<LocalServer> {
  const port = options.port ?? (await freePort());
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "fanout-test-"));
  const vars = options.vars ?? {};
  let current = await launch(port, dataDir, vars, options.fdLimit);

  const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
    const { child, log } = current;
    if (signal === "SIGKILL") {
      // A killed launcher cannot stop its workerd (a separate process group); do it here.
      const workerdPid = Number(/workerd pid (\d+)/.exec(log.join(""))?.[1]);
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
    output: () => current.log.join(""),
    stop,
    restart: async () => {
      await stop("SIGTERM");
      current = await launch(port, dataDir, vars, options.fdLimit);
    },
  };
  return server;
}
