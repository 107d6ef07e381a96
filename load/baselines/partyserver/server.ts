/**
 * Starts the PartyServer baseline (worker.ts) on workerd run directly, as the
 * local server and the bare baseline run it: the same compatibility date and
 * flags as the service, one Durable Object class with SQLite storage (as
 * PartyServer's README configures it), listening on 127.0.0.1 only. It stops
 * workerd when it is stopped (SIGTERM, SIGINT), and workerd cannot outlive it
 * (the local server's watchdog, local-server/workerd-process.mjs).
 *
 * Run: node load/dist/partyserver-server.js --port 18230 [--data DIR] [--v8-flag --perf-basic-prof]
 * (build first: node load/build.mjs)
 */
import { mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { DIST_DIR } from "../../src/target/target";
import { COMPATIBILITY_DATE, COMPATIBILITY_FLAGS } from "../bare-workerd/config";
import { runWorkerd } from "../workerd-launch";

const { values } = parseArgs({ options: { port: { type: "string" }, data: { type: "string" }, "v8-flag": { type: "string", multiple: true } } });
const port = Number(values.port ?? process.env.PORT ?? 18230);
if (!Number.isInteger(port) || port <= 0 || port > 65535) throw new Error(`bad port ${values.port}`);
const dataDir = values.data ?? mkdtempSync(join(tmpdir(), "partyserver-"));
mkdirSync(dataDir, { recursive: true });
const v8Flags = values["v8-flag"] ?? [];

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
