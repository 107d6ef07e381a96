/**
 * What the baselines run on workerd share (bare-workerd/server.ts,
 * partyserver/server.ts): their command line (--port, --data, --v8-flag),
 * workerd started directly, as the local server runs it, with the config
 * given, its banner printed with workerd's pid (the load tool samples that
 * process), and stopped when the launcher is (SIGTERM, SIGINT); workerd
 * cannot outlive the launcher (the local server's watchdog,
 * local-server/workerd-process.mjs).
 */
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeWorkerdConfig } from "../../local-server/workerd-config.mjs";
import { startWorkerd } from "../../local-server/workerd-process.mjs";
import { parseValues, readNumber } from "../src/kit/args";
import { REPO_ROOT } from "../src/kit/paths";

export interface LaunchArgs {
  port: number;
  /** Where its objects' storage lives (a fresh temporary folder unless --data). */
  dataDir: string;
  /** E.g. --perf-basic-prof, so that a profiler can name JavaScript frames. */
  v8Flags: string[];
  /** --durable (the bare baseline's storing variant). */
  durable: boolean;
}

/** A workerd baseline's command line: --port (else $PORT, else `defaultPort`), --data, --v8-flag (repeatable), --durable. */
export function readLaunchArgs(argv: readonly string[], defaultPort: number, name: string): LaunchArgs {
  const { values } = parseValues(argv, { port: {}, durable: { flag: true }, data: {}, "v8-flag": { multiple: true } });
  const port = readNumber(values.port ?? process.env.PORT, "port", defaultPort, { min: 1, max: 65535, integer: true });
  const dataDir = values.data ?? mkdtempSync(join(tmpdir(), `${name}-`));
  mkdirSync(dataDir, { recursive: true });
  return { port, dataDir, v8Flags: values["v8-flag"] ?? [], durable: values.durable ?? false };
}

export async function runWorkerd(config: unknown, banner: string): Promise<void> {
  const workerd = startWorkerd({ bin: join(REPO_ROOT, "node_modules/workerd/bin/workerd"), config: await encodeWorkerdConfig(config), listenFd: null, privateDir: "", env: process.env });
  const child = workerd.child;
  process.stdout.write(`${banner}; workerd pid ${child.pid}\n`);

  let stopping = false;
  child.on("exit", (code, signal) => {
    void workerd.release().then(() => {
      if (!stopping) process.stderr.write(`workerd exited unexpectedly (code ${code}, signal ${signal})\n`);
      process.exit(stopping ? 0 : 1);
    });
  });
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.on(signal, () => {
      stopping = true;
      child.kill("SIGTERM");
      setTimeout(() => child.kill("SIGKILL"), 3000).unref();
    });
  }
}
