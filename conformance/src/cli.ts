/**
 * `npm run conformance -- --url <base>`: checks a running service against
 * docs/guarantees.md, black-box, and prints a table (or JSON) of clause,
 * check, result and evidence. Exit code 1 when a check failed.
 */
import { mintToken } from "../../common/tokens.js";
import type { AccessMode, Check, ServiceFacts } from "./check.js";
import { CHECKS } from "./checks/index.js";
import { loopbackProblem } from "./loopback.js";
import { parseOptions, type SuiteOptions } from "./options.js";
import { Peer, RefusedUpgrade } from "./peer.js";
import { formatTable, summarize } from "./report.js";
import { missingCredentials, newRunId, ROOM_PREFIX, runChecks } from "./runner.js";
import { Service } from "./service.js";

class Unusable extends Error {}

/** What a welcome says, or how the upgrade was refused. */
async function probeSocket(url: string): Promise<{ welcome: { window: number; maxMessageBytes: number } } | { closed: number } | { status: number }> {
  let peer: Peer;
  try {
    peer = await Peer.open(url, { autoAck: true });
  } catch (error) {
    if (error instanceof RefusedUpgrade) return { status: error.status };
    throw new Unusable(`cannot open a socket at ${url}: ${error instanceof Error ? error.message : String(error)}`);
  }
  try {
    await peer.waitFor((p) => p.events.length > 0 || p.closeInfo !== null, 10_000, "a welcome");
    const welcome = peer.ofType("welcome")[0];
    if (welcome && "seq" in welcome) return { welcome: { window: welcome.window, maxMessageBytes: welcome.maxMessageBytes ?? 65_536 } };
    return { closed: peer.closeInfo?.code ?? 0 };
  } catch {
    return { closed: peer.closeInfo?.code ?? 0 };
  } finally {
    peer.dispose();
  }
}

/** Learns what the suite needs about the service (is it one, its keys, its access mode, its limits) without changing anything. */
async function discover(service: Service, options: SuiteOptions): Promise<ServiceFacts> {
  const health = await service.request<{ ok?: boolean }>("/healthz", { auth: false }).catch((error: unknown) => {
    throw new Unusable(`${options.url} does not answer: ${error instanceof Error ? error.message : String(error)}`);
  });
  if (health.status !== 200 || health.json?.ok !== true) throw new Unusable(`${options.url}/healthz answered ${health.status}, not {"ok":true}: is this an edge-fanout service?`);
  // A room nobody used: looking at it creates nothing (404), or needs the key (401).
  const probeRoom = `${ROOM_PREFIX}${newRunId()}-probe`;
  const bare = await service.request(`/rooms/${probeRoom}`, { auth: false });
  const publishKeyRequired = bare.status === 401;
  if (publishKeyRequired && options.publishKey) {
    const keyed = await service.request(`/rooms/${probeRoom}`);
    if (keyed.status === 401) throw new Unusable("the service refused --publish-key (401)");
  }
  const roomUrl = `${service.wsBase}/rooms/${probeRoom}/ws`;
  const open = await probeSocket(roomUrl);
  let access: AccessMode;
  let welcome: { window: number; maxMessageBytes: number };
  if ("welcome" in open) {
    access = "open";
    welcome = open.welcome;
  } else if ("closed" in open && open.closed === 4001) {
    if (!options.tokenSecret) return { access: "closed", publishKeyRequired, window: null, maxMessageBytes: null };
    const token = await mintToken(options.tokenSecret, { room: probeRoom, ttlSeconds: 60 });
    const withToken = await probeSocket(`${roomUrl}?token=${token}`);
    if (!("welcome" in withToken)) throw new Unusable(`a token minted with --token-secret was refused (${JSON.stringify(withToken)}): is it the service's TOKEN_SECRET?`);
    access = "token";
    welcome = withToken.welcome;
  } else {
    throw new Unusable(`a socket into ${probeRoom} was refused: ${JSON.stringify(open)}`);
  }
  return { access, publishKeyRequired, ...welcome };
}

/** The first lines a run prints: what it checks, what it learnt, and which checks it skips for want of a key. */
function header(checks: readonly Check[], options: SuiteOptions, facts: ServiceFacts, service: Service): string {
  const count = checks.length;
  const sockets = { open: "open (no tokens)", token: "tokens (minted with --token-secret)", closed: "tokens required, no --token-secret" }[facts.access];
  const key = facts.publishKeyRequired ? (options.publishKey ? "required, given" : "required, no --publish-key") : "none";
  const limits = facts.window === null || facts.maxMessageBytes === null ? "window and message limit unknown (no socket opened)" : `window ${facts.window} B, messages up to ${facts.maxMessageBytes} B`;
  const lines = [`conformance: ${count} checks against ${options.url} (sockets: ${sockets}; publish key: ${key}; ${limits})`];
  const skipped = checks.filter((check) => missingCredentials(check, { facts, service }).filter((m) => m !== "--pusher-key").length > 0).length;
  const pusherSkipped = options.pusher ? 0 : checks.filter((check) => check.needsPusher).length;
  if (pusherSkipped > 0) lines.push(`conformance: ${pusherSkipped} checks of the Pusher front door need --pusher-app-id, --pusher-key and --pusher-secret and are skipped`);
  if (skipped > 0) {
    const pass = [facts.access === "closed" ? "--token-secret" : null, facts.publishKeyRequired && !options.publishKey ? "--publish-key" : null].filter(Boolean).join(" or ");
    lines.push(`conformance: the service has access control: ${skipped} of the ${count} checks need ${pass} and are skipped (a skip is not a failure; pass ${pass.includes(" or ") ? "both" : "it"} to run them)`);
  }
  return lines.join("\n");
}

async function main(): Promise<number> {
  const parsed = parseOptions(process.argv.slice(2), process.env);
  if (!parsed.ok) {
    (parsed.help ? process.stdout : process.stderr).write(`${parsed.message}\n`);
    return parsed.help ? 0 : 2;
  }
  const { options } = parsed;
  if (!options.allowRemote) {
    const problem = await loopbackProblem(new URL(options.url).hostname);
    if (problem !== null) {
      process.stderr.write(`conformance: --url ${options.url}: ${problem}. The suite publishes into and opens sockets on the service it checks; pass --allow-remote to check a deployment of yours\n`);
      return 2;
    }
  }
  const service = new Service(options.url, options.publishKey);
  const started = Date.now();
  let facts: ServiceFacts;
  try {
    facts = await discover(service, options);
  } catch (error) {
    process.stderr.write(`conformance: ${error instanceof Error ? error.message : String(error)}\n`);
    return 2;
  }
  const checks = options.only.length ? CHECKS.filter((c) => options.only.some((prefix) => c.id.startsWith(prefix))) : CHECKS;
  if (!options.json) process.stderr.write(`${header(checks, options, facts, service)}\n`);
  const { runId, results } = await runChecks(checks, {
    service,
    facts,
    tokenSecret: options.tokenSecret,
    ...(options.pusher ? { pusher: options.pusher } : {}),
    concurrency: 4,
    onResult: options.json ? undefined : (r) => process.stderr.write(`  ${r.result.padEnd(4)} ${r.id} (${(r.ms / 1000).toFixed(1)} s)\n`),
  });
  const report = summarize(options.url, runId, Date.now() - started, results);
  process.stdout.write(options.json ? `${JSON.stringify({ ...report, facts }, null, 2)}\n` : `${formatTable(report)}\n`);
  return report.failed > 0 ? 1 : 0;
}

// Sockets the checks closed may keep Node's loop busy for a moment; the verdict is in.
main().then(
  (code) => {
    process.exitCode = code;
    setTimeout(() => process.exit(code), 1000).unref();
  },
  (error: unknown) => {
    process.stderr.write(`conformance: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(2);
  },
);
