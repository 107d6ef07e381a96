/**
 * `npm run load -- <scenario> [options]`: runs one load scenario against the
 * service (and, with --baseline, --baseline-bare, --baseline-bare-durable, --baseline-partyserver, against the bundled baselines in the
 * same invocation), prints a table, and writes JSON and HTML reports.
 */
import { LOAD_PUSHER_APP, loadPusherRoom } from "./client/pusher-client";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { PING_INTERVAL_SECONDS } from "../../protocol";
import { ClientPool } from "./client/pool";
import { storedHistoryRows } from "./kit/stored-rows";
import { USAGE, UsageRequested, baselineOf, baselinePort, estimatedSeconds, parseLoadOptions, spawnedCeiling, targetLabels, totalSockets, type LoadOptions, type ScenarioName, type TargetLabel } from "./options";
import { HttpClient } from "./publisher";
import { renderHtml } from "./report/html";
import { ProgressLine } from "./report/progress";
import { compareRuns, renderText } from "./report/table";
import { machineInfo, type LoadReport, type TargetRun } from "./result";
import { broadcastScenario } from "./scenarios/broadcast";
import type { Scenario, ScenarioContext } from "./scenarios/common";
import { connectScenario } from "./scenarios/connect";
import { fanoutScenario } from "./scenarios/fanout";
import { slowScenario } from "./scenarios/slow";
import { stormScenario } from "./scenarios/storm";
import { RESULTS_DIR } from "./kit/paths";
import { descriptorLimit, findListeningPid, processName, sampleProcess } from "./kit/proc";
import { Server } from "./kit/server";
import { sleep } from "./kit/time";
import { loopbackSources, parseTargetUrl, type TargetAddress } from "./target/address";
import { Sampler } from "./target/sampler";

const SCENARIO_RUNNERS: Record<ScenarioName, Scenario> = {
  connect: connectScenario,
  fanout: fanoutScenario,
  slow: slowScenario,
  storm: stormScenario,
  broadcast: broadcastScenario,
};

interface TargetSpec {
  label: TargetLabel;
}

/** Things to tear down if the hard time limit or a signal ends the run early. */
const live = { pools: new Set<ClientPool>(), servers: new Set<Server>() };

function log(text: string): void {
  process.stderr.write(`${text}\n`);
}

async function resolveTarget(options: LoadOptions, spec: TargetSpec): Promise<{ address: TargetAddress; spawned?: Server }> {
  if (spec.label !== "ours" || options.spawn) {
    const baseline = spec.label === "ours" ? undefined : baselineOf(options, spec.label);
    const port = baseline ? baselinePort(options, baseline) : options.port;
    if (!baseline) log(`starting the local server on port ${port} (builds first; can take a while)`);
    const spawned = await Server.start(
      baseline
        ? { kind: baseline.name, port }
        : {
            kind: "ours",
            port,
            vars: options.serverVars,
            gate: options.serverGate,
            build: true,
            ...(options.serverDir ? { checkout: options.serverDir } : {}),
            env: launcherEnv(options),
          },
    );
    live.servers.add(spawned);
    return { address: parseTargetUrl(spawned.url, false), spawned };
  }
  return { address: parseTargetUrl(options.url, options.allowRemote) };
}

/** The spawned local server's environment: the Pusher app of a --pusher run, the connection ceiling of a run without the accept gate. */
function launcherEnv(options: LoadOptions): Record<string, string> {
  const ceiling = spawnedCeiling(options);
  return {
    ...(options.pusher ? { PUSHER_APP_ID: LOAD_PUSHER_APP.id, PUSHER_APP_KEY: LOAD_PUSHER_APP.key, PUSHER_APP_SECRET: LOAD_PUSHER_APP.secret } : {}),
    ...(ceiling === undefined ? {} : { CONNECTION_CEILING: String(ceiling) }),
  };
}

/** What a reader must know about a baseline to read its figures. */
function targetNotes(options: LoadOptions, label: TargetLabel): string[] {
  const ceiling = label === "ours" && options.spawn ? spawnedCeiling(options) : undefined;
  if (ceiling !== undefined) return [`local server without its accept gate: connection ceiling set to ${ceiling} descriptors for the run's sockets (the launcher's own is a quarter of its descriptor limit)`];
  const note = label === "ours" ? "" : baselineOf(options, label).note;
  return note ? [note] : [];
}

async function runTarget(options: LoadOptions, spec: TargetSpec, hardStopAt: number, runId: string): Promise<TargetRun> {
  const startedAt = new Date();
  const run: TargetRun = {
    label: spec.label,
    url: "",
    ok: false,
    startedAt: startedAt.toISOString(),
    durationMs: 0,
    summary: {},
    details: {},
    timeline: [],
    marks: [],
    notes: targetNotes(options, spec.label),
  };
  let spawned: Server | undefined;
  let pool: ClientPool | undefined;
  let sampler: Sampler | undefined;
  let http: HttpClient | undefined;
  let progress: ProgressLine | undefined;
  let gateReport: (() => void) | undefined;
  try {
    const resolved = await resolveTarget(options, spec);
    spawned = resolved.spawned;
    const address = resolved.address;
    run.url = address.httpOrigin;
    http = new HttpClient(address.httpOrigin, Math.min(256, options.rooms * options.publishers + 8), options.publishHeaders);
    const health = await http.send("GET", "/healthz", undefined, 5000).catch((error: unknown) => {
      throw new Error(`target ${address.httpOrigin} is not answering /healthz (${String(error)})`);
    });
    if (health.status !== 200) throw new Error(`target ${address.httpOrigin}/healthz answered HTTP ${health.status}`);

    const pid = spec.label === "ours" && options.serverPid ? options.serverPid : address.loopback ? (spawned?.pid ?? findListeningPid(address.port)) : undefined;
    if (pid) {
      const limit = descriptorLimit(pid);
      const name = processName(pid);
      run.server = { pid, ...(name ? { name } : {}), ...(limit ? { descriptorLimit: limit } : {}) };
      if (limit && totalSockets(options) > limit - 100) {
        run.notes.push(`the server's descriptor limit is ${limit}: ${totalSockets(options)} sockets will run into it`);
      }
    } else if (address.loopback) {
      run.notes.push("could not find the server process (pass --server-pid): no server CPU or memory figures");
    } else {
      run.notes.push("remote target: the server process cannot be sampled; figures are client-side only");
    }

    sampler = new Sampler(pid, options.sampleMs);
    // With the local server's accept gate on, the launcher relays every connection: its CPU is server cost too.
    const gatePid = spawned?.gatePid();
    const gateStart = gatePid === undefined ? undefined : sampleProcess(gatePid);
    const gateStartedAt = Date.now();
    gateReport = () => {
      const end = gatePid === undefined ? undefined : sampleProcess(gatePid);
      if (!gateStart || !end) return;
      const percent = ((end.cpuUs - gateStart.cpuUs) / ((Date.now() - gateStartedAt) * 1000)) * 100;
      run.notes.push(`accept gate on: the launcher (pid ${gatePid}) relayed every connection to workerd and used ${percent.toFixed(0)}% of a core over the run, not counted in the server figures (which are workerd's); --server-gate off measures workerd alone`);
    };
    progress = new ProgressLine(spec.label, !options.quiet);
    const line = progress;
    sampler.onSample((sample) => line.update(sample));
    sampler.start();

    const roomPrefix = options.pusher ? loadPusherRoom(`lt-${runId}-${options.scenario}`) : `lt-${runId}-${options.scenario}`;
    const roomCount = options.rooms;
    const rooms = Array.from({ length: roomCount }, (_, i) => `${roomPrefix}-${i}`);
    pool = await ClientPool.start(options.procs, {
      wsOrigin: address.wsOrigin,
      wsParams: options.wsParams,
      rooms,
      sourceAddresses: address.loopback && options.sources > 0 ? loopbackSources(options.sources) : [],
      handshakeTimeoutMs: options.handshakeTimeoutMs,
      deadlineMs: options.deadlineMs,
      histogramCeilingMs: options.deadlineMs,
      expectedMessages: Math.ceil(options.rate * options.durationSeconds * 1.3) + 64,
      pingIntervalMs: PING_INTERVAL_SECONDS * 1000,
      ackBytes: options.ackBytes,
      inFlight: Math.max(1, Math.ceil(options.inFlight / options.procs)),
      ...(options.scenario === "storm" ? { reconnect: { baseMs: options.backoffBaseMs, maxMs: options.backoffMaxMs } } : {}),
      slowFraction: options.scenario === "slow" ? options.slowFraction : 0,
      slowCount: options.scenario === "slow" ? options.slowCount : -1,
      totalSockets: totalSockets(options),
      mux: options.mux,
      // connect opens the connections first and then times one subscribe storm of them all.
      subscribeOnOpen: options.scenario !== "connect",
      pusher: options.pusher,
    });
    live.pools.add(pool);
    sampler.attachPool(pool);

    const ctx: ScenarioContext = {
      options,
      label: spec.label,
      address,
      spawned,
      pool,
      sampler,
      http,
      progress,
      rooms,
      roomPrefix,
      hardStopAt,
      summary: run.summary,
      details: run.details,
      notes: run.notes,
      waves: [],
    };
    await SCENARIO_RUNNERS[options.scenario](ctx);
    // What the rooms wrote per message, counted in their storage (a spawned local server's SQLite files).
    const storedRows = options.scenario === "fanout" && spawned?.spec.kind === "ours" ? storedHistoryRows(spawned.dataDir) : undefined;
    if (storedRows !== undefined && (run.summary.published ?? 0) > 0) run.summary.historyRowsStoredPerMessage = storedRows / (run.summary.published as number);
    if (ctx.waves.length) run.waves = ctx.waves;
    if (ctx.latencyCdf) run.latencyCdf = ctx.latencyCdf;
    run.ok = true;
  } catch (error) {
    run.error = error instanceof Error ? error.message : String(error);
  } finally {
    gateReport?.();
    progress?.finish();
    if (pool) {
      await pool.stop().catch(() => pool?.kill());
      live.pools.delete(pool);
    }
    if (sampler) {
      sampler.stop();
      run.timeline = sampler.samples;
      run.marks = sampler.marks;
      const withServer = sampler.samples.filter((s) => s.server);
      const first = withServer[0]?.server;
      const peak = sampler.peakServerRss();
      if (peak !== undefined) run.summary.serverRssPeakBytes = peak;
      if (first && peak !== undefined) run.summary.serverRssGrowthBytes = peak - first.rssBytes;
    }
    http?.close();
    if (spawned) {
      await spawned.stop();
      live.servers.delete(spawned);
    }
    run.durationMs = Date.now() - startedAt.getTime();
  }
  return run;
}

function writeReports(report: LoadReport, dir: string): { json: string; html: string } {
  mkdirSync(dir, { recursive: true });
  const stamp = report.startedAt.replace(/[:.]/g, "-");
  const base = join(dir, `${report.scenario}-${stamp}`);
  writeFileSync(`${base}.json`, JSON.stringify(report, null, 2));
  writeFileSync(`${base}.html`, renderHtml(report));
  return { json: `${base}.json`, html: `${base}.html` };
}

async function emergencyStop(reason: string): Promise<never> {
  log(`\nstopping: ${reason}`);
  for (const pool of live.pools) pool.kill();
  await Promise.all([...live.servers].map((s) => s.stop().catch(() => undefined)));
  process.exit(3);
}

async function main(): Promise<number> {
  let options: LoadOptions;
  try {
    options = parseLoadOptions(process.argv.slice(2));
  } catch (error) {
    if (error instanceof UsageRequested) {
      process.stdout.write(USAGE);
      return 0;
    }
    log(`${error instanceof Error ? error.message : String(error)}\n\n${USAGE}`);
    return 2;
  }
  if (!options.baselineOnly && !options.spawn) {
    try {
      parseTargetUrl(options.url, options.allowRemote);
    } catch (error) {
      log(error instanceof Error ? error.message : String(error));
      return 2;
    }
  }
  const specs: TargetSpec[] = targetLabels(options).map((label) => ({ label }));
  const limitSeconds = options.maxSeconds || estimatedSeconds(options);
  const hardStopAt = Date.now() + limitSeconds * 1000;
  const watchdog = setTimeout(() => void emergencyStop(`hard time limit of ${limitSeconds} s reached`), limitSeconds * 1000 + 15_000);
  watchdog.unref();
  process.once("SIGINT", () => void emergencyStop("interrupted"));
  process.once("SIGTERM", () => void emergencyStop("terminated"));

  const runId = randomBytes(3).toString("hex");
  const report: LoadReport = {
    tool: "edge-fanout-load",
    schema: 1,
    bench: "load",
    scenario: options.scenario,
    startedAt: new Date().toISOString(),
    command: `npm run load -- ${process.argv.slice(2).join(" ")}`,
    options,
    machine: machineInfo(),
    runs: [],
  };
  for (const [i, spec] of specs.entries()) {
    if (i > 0) await sleep(3000); // let the previous target's sockets drain
    // Each target gets an equal share of what is left of the time budget.
    const share = (hardStopAt - Date.now()) / (specs.length - i);
    log(`running ${options.scenario} against ${spec.label}`);
    report.runs.push(await runTarget(options, spec, Date.now() + share, `${runId}${i}`));
  }
  clearTimeout(watchdog);
  const ours = report.runs.find((r) => r.label === "ours");
  const base = report.runs.find((r) => r.label === "baseline");
  if (ours && base) report.comparison = compareRuns(ours, base);

  const text = renderText(report);
  if (options.json) {
    log(text);
    process.stdout.write(`${JSON.stringify(report)}\n`);
  } else {
    process.stdout.write(`\n${text}\n`);
  }
  if (options.report) {
    const files = writeReports(report, options.out ?? RESULTS_DIR);
    log(`report: ${files.html}\njson:   ${files.json}`);
  }
  return report.runs.every((r) => r.ok) ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    log(error instanceof Error ? (error.stack ?? error.message) : String(error));
    process.exit(1);
  },
);
