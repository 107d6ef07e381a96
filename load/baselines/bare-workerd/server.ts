/**
 * Starts the bare workerd baseline (worker.ts, room.ts): workerd run directly,
 * as the local server runs it, with a config of one worker and one Durable
 * Object class, listening on 127.0.0.1 only (the launch, shared with the
 * PartyServer baseline: ../workerd-launch.ts).
 *
 * Run: node load/dist/bare-server.js --port 18220 [--durable] [--data DIR] [--v8-flag --perf-basic-prof]
 * (build first: node load/build.mjs)
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { DIST_DIR } from "../../src/kit/paths";
import { readLaunchArgs, runWorkerd } from "../workerd-launch";
import { bareWorkerdConfig } from "./config";

const { port, dataDir, v8Flags, durable } = readLaunchArgs(process.argv.slice(2), 18220, "bare-workerd");

await runWorkerd(
  bareWorkerdConfig({ bundle: readFileSync(join(DIST_DIR, "bare-workerd-worker.js"), "utf8"), address: `127.0.0.1:${port}`, durable, dataDir, v8Flags }),
  `bare workerd baseline${durable ? " (durable)" : ""} on http://127.0.0.1:${port}`,
);
