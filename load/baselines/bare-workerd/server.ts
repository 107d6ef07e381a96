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
import { parseArgs } from "node:util";
import { DIST_DIR } from "../../src/target/target";
import { runWorkerd } from "../workerd-launch";
import { bareWorkerdConfig } from "./config";

const { values } = parseArgs({
  options: { port: { type: "string" }, durable: { type: "boolean" }, data: { type: "string" }, "v8-flag": { type: "string", multiple: true } },
});
const port = Number(values.port ?? process.env.PORT ?? 18220);
if (!Number.isInteger(port) || port <= 0 || port > 65535) throw new Error(`bad port ${values.port}`);
const durable = values.durable ?? false;
const dataDir = values.data ?? mkdtempSync(join(tmpdir(), "bare-workerd-"));
mkdirSync(dataDir, { recursive: true });

await runWorkerd(
  bareWorkerdConfig({
    bundle: readFileSync(join(DIST_DIR, "bare-workerd-worker.js"), "utf8"),
    address: `127.0.0.1:${port}`,
    durable,
    dataDir,
    // E.g. --perf-basic-prof, so that a profiler can name JavaScript frames.
    v8Flags: values["v8-flag"] ?? [],
  }),
  `bare workerd baseline${durable ? " (durable)" : ""} on http://127.0.0.1:${port}`,
);
