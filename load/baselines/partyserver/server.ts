/**
 * Starts the PartyServer baseline (worker.ts) on workerd run directly, as the
 * local server and the bare baseline run it (../workerd-launch.ts): the same
 * compatibility date and flags as the service, one Durable Object class with
 * SQLite storage (as PartyServer's README configures it), listening on
 * 127.0.0.1 only.
 *
 * Run: node load/dist/partyserver-server.js --port 18230 [--data DIR] [--v8-flag --perf-basic-prof]
 * (build first: node load/build.mjs)
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { DIST_DIR } from "../../src/kit/paths";
import { COMPATIBILITY_DATE, COMPATIBILITY_FLAGS } from "../bare-workerd/config";
import { readLaunchArgs, runWorkerd } from "../workerd-launch";

const { port, dataDir, v8Flags } = readLaunchArgs(process.argv.slice(2), 18230, "partyserver");

await runWorkerd(
  {
    ...(v8Flags.length ? { v8Flags } : {}),
    services: [
      {
        name: "main",
        worker: {
          modules: [{ name: "worker.js", esModule: readFileSync(join(DIST_DIR, "partyserver-worker.js"), "utf8") }],
          compatibilityDate: COMPATIBILITY_DATE,
          compatibilityFlags: COMPATIBILITY_FLAGS,
          bindings: [{ name: "RoomServer", durableObjectNamespace: { className: "RoomServer" } }],
          durableObjectNamespaces: [{ className: "RoomServer", uniqueKey: "partyserver-RoomServer", enableSql: true }],
          durableObjectStorage: { localDisk: "storage" },
        },
      },
      { name: "storage", disk: { path: dataDir, writable: true } },
    ],
    sockets: [{ name: "http", address: `127.0.0.1:${port}`, http: {}, service: { name: "main" } }],
  },
  `PartyServer baseline on http://127.0.0.1:${port}`,
);
