#!/usr/bin/env node
// The local server: runs the worker and its Durable Objects on workerd directly.
//
// Why workerd directly: `wrangler dev` puts a proxy in front of workerd that
// holds several descriptors per WebSocket, and Miniflare's API adds an entry
// worker (~29 KB per socket). workerd alone holds one descriptor and ~74 KB per
// idle socket (docs/benchmarks.md), so the same descriptor limit holds the
// most clients.
//
// What this launcher adds around workerd:
// - configuration as `wrangler dev` reads it: wrangler.toml [vars], .dev.vars,
//   the environment and --var (local-vars.mjs), handed to workerd over a pipe so
//   that secrets never touch the disk (workerd-config.mjs);
// - the public listening socket, bound here so a taken port is reported
//   (listen.mjs), and a private directory for the admin socket;
// - descriptor safety: workerd aborts the whole process when accept() hits
//   EMFILE, so the launcher samples its descriptors and the worker refuses
//   upgrades with 503 before the limit (worker/local-admission.ts), and it
//   either raises workerd's limit to make room for connection storms or puts an
//   accept gate in front (limits.mjs, gate.mjs);
// - a watchdog, so that workerd never outlives the launcher (workerd-process.mjs);
// - graceful shutdown: SIGTERM/SIGINT/SIGHUP refuse new upgrades and close every
//   socket with 1012 so clients reconnect and resume, then workerd exits. A
//   SIGINT that follows the first within a second is the same Ctrl-C twice
//   (the terminal's and npm's forward), not a request to stop waiting.
//
// Usage: node local-server/server.mjs --help

import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { removeEmptyRoomDatabases } from "./empty-rooms.mjs";
import { createHash } from "node:crypto";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { adminClient } from "./admin.mjs";
import { buildWorker, bundlePath, root } from "../tools/build-worker.mjs";
import { readDevVars } from "../tools/dev-vars.mjs";
import { startGate } from "./gate.mjs";
import { DIRECT_MIN_LIMIT, countDescriptors, descriptorLimits, planDescriptors } from "./limits.mjs";
import { assertPortFree, listenPublic, PortError } from "./listen.mjs";
import { describeAccess, describePusher, resolveVars, SECRET_KEYS } from "./local-vars.mjs";
import { parseOptions, USAGE } from "./options.mjs";
import { createPrivateDir } from "./private-dir.mjs";
import { encodeWorkerdConfig, workerdConfig } from "./workerd-config.mjs";
import { startWorkerd } from "./workerd-process.mjs";

const SAMPLE_INTERVAL_MS = 100;
const SHUTDOWN_TIMEOUT_MS = 5000;
const STOP_GRACE_MS = 3000;
/** A SIGINT this long after the first is a deliberate second Ctrl-C; one sooner is the same Ctrl-C delivered twice. */
const REPEATED_SIGNAL_MS = 1000;
/** Gate mode: how long a request head may take to arrive (from the connection's start for the first). */
const HEAD_MS = 5000;
/** Gate mode: the largest request head relayed (431 past it), and what unfinished heads may hold in all (503 past it). */
const MAX_HEAD_BYTES = 32 * 1024;
const HEAD_BYTES_BUDGET = 16 * 1024 * 1024;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** `n` things, in the singular for one. */
const count = (n, thing) => `${n} ${thing}${n === 1 ? "" : "s"}`;

/**
 * What the first shutdown pass closed, as /__local/shutdown answers it: the sockets, and the
 * rooms and hubs that held them (those that had sockets earlier and none left are not counted).
 * @param {{ sockets: number; rooms: number; hubs: number }} closed
 */
function closedLine(closed) {
  if (closed.sockets === 0) return "no socket was open";
  const where = [closed.rooms > 0 ? count(closed.rooms, "room") : null, closed.hubs > 0 ? count(closed.hubs, "hub") + " of multiplexed connections" : null];
  return `closed ${count(closed.sockets, "socket")} in ${where.filter(Boolean).join(" and ")}`;
}

/**
 * The rooms' frame limit as common/settings.ts reads it (frameBytesFor): MAX_FRAME_BYTES, but never
 * below three times MAX_MESSAGE_BYTES plus 1 KiB, so a message merely over its limit reaches the room
 * and is refused there with `too_large` while the socket stays.
 */
function frameLimit(vars) {
  const message = Number(vars.MAX_MESSAGE_BYTES) || 65_536;
  return Math.max(Number(vars.MAX_FRAME_BYTES) || 0, 3 * message + 1024);
}

function fail(message, code = 1) {
  console.error(`edge-fanout: ${message}`);
  process.exit(code);
}

function readWranglerConfig(configPath) {
  const script = fileURLToPath(new URL("./read-config.mjs", import.meta.url));
  return JSON.parse(execFileSync(process.execPath, [script, configPath], { encoding: "utf8" }));
}

/**
 * What to bundle for a config, and where: this repository's worker goes to
 * dist/worker.js; another worker (--config) to a bundle of its own.
 */
function bundleTarget(configPath, config) {
  if (resolve(configPath) === resolve(`${root}wrangler.toml`)) return { entry: undefined, outfile: bundlePath };
  if (!config.main) fail(`${configPath} names no main module`);
  const id = createHash("sha256").update(resolve(configPath)).digest("hex").slice(0, 12);
  return { entry: resolve(dirname(configPath), config.main), outfile: `${root}dist/worker-${id}.js` };
}

/** Earlier versions of this launcher wrote their config, secrets included, to dist/workerd-<port>.capnp. */
function removeStaleConfigs() {
  let names = [];
  try {
    names = readdirSync(`${root}dist`);
  } catch {
    return;
  }
  for (const name of names) if (/^workerd-\d+\.capnp$/.test(name)) rmSync(`${root}dist/${name}`, { force: true });
}

/** The vars to bind, reporting problems with .dev.vars by line number and key only (never values). */
function loadVars(options, tomlVars) {
  let devVars = {};
  if (options.devVarsPath !== null) {
    const file = readDevVars(options.devVarsPath);
    for (const line of file.malformed) console.error(`edge-fanout: ${options.devVarsPath} line ${line} is not KEY=VALUE; ignored`);
    devVars = file.vars;
  }
  const resolved = resolveVars({ tomlVars, devVars, env: process.env, overrides: options.overrides });
  for (const key of resolved.ignored) console.error(`edge-fanout: ${options.devVarsPath} sets ${key}, which the service does not use; ignored`);
  return resolved;
}

/** workerd's environment: the launcher's, without the secrets (they reach the worker as bindings). */
function workerdEnv() {
  const env = { ...process.env };
  for (const key of SECRET_KEYS) delete env[key];
  return env;
}

async function waitForHealth(admin, startId, child, deadlineMs) {
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) return false;
    try {
      const res = await admin.call("GET", "/health", undefined, 1000);
      if (res.status === 200 && res.json?.startId === startId) return true;
    } catch {
      // Not listening yet.
    }
    await sleep(50);
  }
  return false;
}

/** The room the banner's demo link opens. */
const DEMO_ROOM = "lobby";

/**
 * Whether the app serves its demo page (createFanoutApp({ demo: false }) does not): asked of the
 * running worker, so that the banner only links a page that is there.
 * @param {string} appUrl where the app is mounted
 */
async function servesDemo(appUrl) {
  try {
    const res = await fetch(`${appUrl}/demo?room=${DEMO_ROOM}`, { signal: AbortSignal.timeout(5000) });
    await res.arrayBuffer();
    return res.ok && (res.headers.get("content-type") ?? "").startsWith("text/html");
  } catch {
    return false;
  }
}

function banner({ url, host, port, mount, vars, origin, plan, dataDir, pid, demo }) {
  const keyed = typeof vars.PUBLISH_KEY === "string" && vars.PUBLISH_KEY.trim() !== "";
  const tokened = typeof vars.TOKEN_SECRET === "string" && vars.TOKEN_SECRET.trim() !== "";
  const token = `npm run -s token -- --room ${DEMO_ROOM}`;
  const lines = [
    `edge-fanout listening on ${url}`,
    `  WebSocket:  ws://${host}:${port}${mount}/rooms/{room}/ws${tokened ? "?token=$(npm run -s token -- --room {room})" : ""}`,
    `  Publish:    curl -X POST ${url}/rooms/{room}/publish${keyed ? ' -H "Authorization: Bearer $PUBLISH_KEY"' : ""} -d 'hello'`,
    ...(demo ? [`  Demo:       ${url}/demo?room=${DEMO_ROOM}${tokened ? `&token=TOKEN  (TOKEN_SECRET is set: TOKEN from \`${token}\`)` : ""}`] : []),
    `  Access:     ${describeAccess(vars, origin)}`,
    `  Pusher:     ${describePusher(vars, origin, `ws://${host}:${port}${mount}`)}`,
    `  descriptor limit ${plan.limit}; connection ceiling ${plan.ceiling} descriptors (upgrades past it get 503)`,
  ];
  if (plan.mode === "gate") {
    lines.push(
      `  accept gate on (${plan.forced ? "--gate on" : `descriptor limit under ${DIRECT_MIN_LIMIT}`}): ` +
        `at most ${plan.gateConnections} connections (${plan.gateConnections - plan.reservedForHttp} of them sockets), ` +
        `connections without a request head after ${HEAD_MS / 1000} s closed`,
    );
  } else {
    const roomy = plan.spare >= 3 * plan.ceiling;
    lines.push(
      `  no accept gate (${plan.forced ? "--gate off" : `descriptor limit ${DIRECT_MIN_LIMIT} or more`}): ` +
        `${plan.spare} descriptors spare for connections that are not sockets yet` +
        (roomy ? "" : "; fewer than three times the ceiling: a storm of idle connections can abort workerd"),
    );
  }
  lines.push(`  data in ${dataDir}; workerd pid ${pid}`);
  return lines.join("\n");
}

async function main() {
  const parsed = parseOptions(process.argv.slice(2), process.env, root);
  if (!parsed.ok) fail(`${parsed.error}\n\n${USAGE}`, 2);
  const options = parsed.options;
  if (options.help) {
    console.log(USAGE);
    return;
  }
  const { host, port } = options;
  const dataDir = resolve(options.dataDir);

  // A taken port fails the start before the slow part.
  await assertPortFree(host, port);
  const config = readWranglerConfig(options.configPath);
  const target = bundleTarget(options.configPath, config);
  if (options.build) await buildWorker(target);
  removeStaleConfigs();
  const { vars, origin } = loadVars(options, config.vars);
  const plan = planDescriptors(descriptorLimits(), options.gate, options.ceiling);
  mkdirSync(dataDir, { recursive: true });
  const emptied = removeEmptyRoomDatabases(dataDir);
  if (emptied > 0) console.log(`removed ${emptied} empty room database files left by rooms that gave their storage back`);

  const privateDir = createPrivateDir();
  let child = null;
  process.on("exit", () => {
    // Crash paths included: workerd goes with the launcher (the watchdog would see to it within 2 s anyway).
    if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    privateDir.remove();
  });
  const adminPath = join(privateDir.path, "admin.sock");
  const relayPath = join(privateDir.path, "http.sock");
  const adminToken = randomUUID();
  const startId = randomUUID();
  const encoded = await encodeWorkerdConfig(
    workerdConfig({
      bundle: readFileSync(target.outfile, "utf8"),
      compatibilityDate: config.compatibility_date,
      compatibilityFlags: config.compatibility_flags ?? [],
      vars: { ...vars, LOCAL_ADMIN_TOKEN: adminToken, LOCAL_START_ID: startId },
      durableObjects: config.durable_objects.bindings.map((b) => ({ binding: b.name, className: b.class_name })),
      dataDir,
      httpAddress: plan.mode === "gate" ? `unix:${relayPath}` : null,
      adminAddress: `unix:${adminPath}`,
      adminToken,
    }),
  );

  // Bound again here, just before workerd starts: in direct mode workerd
  // inherits this socket and the launcher closes its own copy in the same turn
  // of the event loop, before it could accept anything.
  const publicServer = await listenPublic(host, port);
  const boundPort = /** @type {import("node:net").AddressInfo} */ (publicServer.address()).port;
  const url = `http://${host}:${boundPort}`;
  const workerd = startWorkerd({
    bin: resolve(root, "node_modules/workerd/bin/workerd"),
    config: encoded,
    // No public API gives a listening socket's descriptor; the handle's is stable on every Unix.
    listenFd: plan.mode === "direct" ? publicServer._handle.fd : null,
    privateDir: privateDir.path,
    env: workerdEnv(),
  });
  child = workerd.child;
  const gate =
    plan.mode === "gate"
      ? startGate(publicServer, {
          upstreamPath: relayPath,
          descriptors: plan.gateDescriptors,
          maxConnections: plan.gateConnections,
          reservedForHttp: plan.reservedForHttp,
          headMs: HEAD_MS,
          maxHeadBytes: MAX_HEAD_BYTES,
          headBytesBudget: HEAD_BYTES_BUDGET,
          // The room's own limit: a message over it would be refused with 1009 anyway, after workerd buffered it.
          maxMessageBytes: frameLimit(vars),
          report: (counts) => console.log(JSON.stringify({ event: "gate", ...counts })),
        })
      : null;
  if (plan.mode === "direct") publicServer.close();

  let stopping = false;
  const admin = adminClient(adminPath, options.mount);
  child.on("exit", async (code, signal) => {
    // The directory goes first: once released, the watchdog would no longer remove it if this process died now.
    privateDir.remove();
    await workerd.release();
    gate?.close();
    admin.close();
    if (!stopping) {
      console.error(`workerd exited unexpectedly (code ${code}, signal ${signal})`);
      process.exit(1);
    }
    process.exit(0);
  });

  // The exit handler above stops workerd on these failures.
  if (!(await waitForHealth(admin, startId, child, 20_000))) fail("workerd did not become healthy within 20 s");
  try {
    const res = await fetch(`${url}${options.mount}/healthz`, { signal: AbortSignal.timeout(5000) });
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
  } catch (error) {
    fail(`${url} does not answer: ${error}`);
  }

  // Sample descriptors and report them. Each sample is paired with the
  // admission count the worker answered just before it was taken; the worker
  // adds admissions since then, so sockets accepted between samples are never
  // missed (and are counted twice only in the moment between answer and count).
  let sampling = true;
  const sampleLoop = async () => {
    let basis = 0;
    let fds = countDescriptors(child.pid);
    while (sampling) {
      try {
        const res = await admin.call("POST", "/pressure", { fds, basis, ceiling: plan.ceiling }, 2000);
        if (res.status === 200) {
          basis = res.json.admitted;
          fds = countDescriptors(child.pid);
        }
      } catch {
        // A busy moment; the next sample catches up.
      }
      await sleep(SAMPLE_INTERVAL_MS);
    }
  };
  void sampleLoop();

  // One write, so whoever waits for "listening on" also has the rest.
  const demo = await servesDemo(`${url}${options.mount}`);
  console.log(banner({ url: `${url}${options.mount}`, host, port: boundPort, mount: options.mount, vars, origin, plan, dataDir, pid: child.pid, demo }));

  const stopWorkerd = () => {
    child.kill("SIGTERM");
    setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS).unref();
  };
  let stoppingSince = 0;
  const shutdown = async (signal) => {
    if (stopping) {
      // One Ctrl-C often arrives twice: from the terminal and as npm's forward
      // of it (or from `kill -INT -<pgid>` and npm). Only a Ctrl-C pressed
      // again later stops waiting.
      if (signal === "SIGINT" && Date.now() - stoppingSince >= REPEATED_SIGNAL_MS) {
        console.error("SIGINT again: stopping workerd without waiting for the sockets to close");
        child.kill("SIGKILL");
      }
      return;
    }
    stopping = true;
    stoppingSince = Date.now();
    sampling = false;
    console.log(`${signal}: closing every socket with 1012 (service restart)`);
    try {
      // From the first call on, new upgrades are refused with 503 and Retry-After.
      const closed = (await admin.call("POST", "/shutdown", undefined, SHUTDOWN_TIMEOUT_MS)).json;
      console.log(closedLine(closed));
      // Sockets whose upgrade was already past admission when the first pass ran.
      await sleep(250);
      await admin.call("POST", "/shutdown", undefined, SHUTDOWN_TIMEOUT_MS);
      // Let the close frames leave before the process goes.
      await sleep(250);
    } catch (error) {
      console.error(`graceful close failed: ${error}`);
    }
    stopWorkerd();
  };
  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(signal, () => void shutdown(signal));
}

main().catch((error) => {
  if (error instanceof PortError) fail(error.message);
  console.error(error);
  process.exit(1);
});
