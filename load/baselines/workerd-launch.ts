/**
 * What the baselines run on workerd share (bare-workerd/server.ts,
 * partyserver/server.ts): workerd started directly, as the local server runs
 * it, with the config given, its banner printed with workerd's pid (the load
 * tool samples that process), and stopped when the launcher is (SIGTERM,
 * SIGINT); workerd cannot outlive the launcher (the local server's watchdog,
 * local-server/workerd-process.mjs).
 */
import { join } from "node:path";
import { encodeWorkerdConfig } from "../../local-server/workerd-config.mjs";
import { startWorkerd } from "../../local-server/workerd-process.mjs";
import { REPO_ROOT } from "../src/target/target";

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
