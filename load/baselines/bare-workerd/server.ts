/**
 * Starts the bare workerd baseline (worker.ts, room.ts): workerd run directly,
 * as the local server runs it, with a config of one worker and one Durable
 * Object class, listening on 127.0.0.1 only. It stops workerd when it is
 * stopped (SIGTERM, SIGINT) and workerd cannot outlive it (the local server's
 * watchdog, local-server/workerd-process.mjs).
 *
 * Run: node load/dist/bare-server.js --port 18220 [--durable] [--data DIR] [--v8-flag --perf-basic-prof]
 * (build first: node load/build.mjs)
 */
import { mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeWorkerdConfig } from "../../../local-server/workerd-config.mjs";
import { startWorkerd } from "../../../local-server/workerd-process.mjs";
import { parseValues } from "../../src/kit/args";
import { DIST_DIR, REPO_ROOT } from "../../src/kit/paths";
import { bareWorkerdConfig } from "./config";

const { values } = parseValues(process.argv.slice(2), { port: {}, durable: { flag: true }, data: {}, "v8-flag": { multiple: true } });
const port = Number(values.port ?? process.env.PORT ?? 18220);
if (!Number.isInteger(port) || port <= 0 || port > 65535) throw new Error(`bad port ${values.port}`);
const durable = values.durable ?? false;
const dataDir = values.data ?? mkdtempSync(join(tmpdir(), "bare-workerd-"));
mkdirSync(dataDir, { recursive: true });

const config = await encodeWorkerdConfig(
  bareWorkerdConfig({
    bundle: readFileSync(join(DIST_DIR, "bare-workerd-worker.js"), "utf8"),
    address: `127.0.0.1:${port}`,
    durable,
    dataDir,
    // E.g. --perf-basic-prof, so that a profiler can name JavaScript frames.
    v8Flags: values["v8-flag"] ?? [],
  }),
);
const workerd = startWorkerd({ bin: join(REPO_ROOT, "node_modules/workerd/bin/workerd"), config, listenFd: null, privateDir: "", env: process.env });
const child = workerd.child;
process.stdout.write(`bare workerd baseline${durable ? " (durable)" : ""} on http://127.0.0.1:${port}; workerd pid ${child.pid}\n`);

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
