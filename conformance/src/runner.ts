import { randomBytes } from "node:crypto";
import { mintToken, type TokenRequest } from "../../common/tokens.js";
import { MULTIPLEX_PATH } from "../../protocol/index.js";
import { CheckFailed, CheckSkipped, type Check, type CheckResult, type Context, type ServiceFacts, type SocketOptions } from "./check.js";
import { Peer } from "./peer.js";
import type { Service } from "./service.js";
import type Pusher from "pusher-js";
import { pusherBackEnd, pusherClient, type PusherCredentials } from "./pusher-clients.js";

/** Rooms of the suite start with this; a deployment can recognise (and bound) them by it. */
export const ROOM_PREFIX = "conformance-";
/** Rooms whose history bound the lost-range check needs small start with this (a HISTORY_RULES prefix). */
export const BOUNDED_ROOM_PREFIX = "conformance-bounded-";

export interface RunSettings {
  service: Service;
  /** The Pusher app to check the front door with, when given. */
  pusher?: PusherCredentials;
  facts: ServiceFacts;
  tokenSecret: string | undefined;
  /** Checks running at once: the slow ones (timeouts of the service) overlap, the rest stay light. */
  concurrency: number;
  /** Called as each check ends, for progress on stderr. */
  onResult?: (result: CheckResult) => void;
}

/** A short id, unique per run, in every room name: runs never share rooms. */
export function newRunId(): string {
  return `${Date.now().toString(36)}${randomBytes(2).toString("hex")}`;
}

/** The context of one check: names, credentials, and every socket it opened (closed when it ends). */
function contextFor(check: Check, runId: string, settings: RunSettings, peers: Peer[], clients: Pusher[]): Context {
  const { service, facts, tokenSecret } = settings;
  const short = check.id.replace(/^G\d+\./, "").replace(/[^A-Za-z0-9._:~-]/g, "-").slice(0, 20);
  const track = (peer: Peer) => (peers.push(peer), peer);
  const token = (request: TokenRequest) => mintToken(tokenSecret as string, { ttlSeconds: 600, pub: true, ...request });
  const queryString = (query: Record<string, string | number>) => {
    const params = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)]));
    return params.size ? `?${params}` : "";
  };
  const credentials = async (request: TokenRequest, options: SocketOptions): Promise<Record<string, string | number>> => {
    const query: Record<string, string | number> = { ...options.query };
    if (facts.access === "token") {
      query.token = await token(options.member === undefined ? request : { ...request, sub: options.member });
    } else if (options.member !== undefined) {
      query.member = options.member;
    }
    return query;
  };
  return {
    service,
    facts,
    tokenSecret,
    room: (name) => `${ROOM_PREFIX}${runId}-${short}${name ? `-${name}` : ""}`,
    boundedRoom: (name) => `${BOUNDED_ROOM_PREFIX}${runId}-${name}`,
    socketQuery: async (room, options = {}) => queryString(await credentials({ room }, options)),
    async openRoom(room, options = {}) {
      const query = await credentials({ room }, options);
      return track(await Peer.open(`${service.wsBase}/rooms/${encodeURIComponent(room)}/ws${queryString(query)}`, { autoAck: options.autoAck ?? true }));
    },
    async openMultiplexed(rooms, options = {}) {
      const query = await credentials({ grants: rooms.map((room) => ({ room })) }, options);
      return track(await Peer.open(`${service.wsBase}${MULTIPLEX_PATH}${queryString(query)}`, { autoAck: options.autoAck ?? true }));
    },
    async openRaw(url, options = {}) {
      return track(await Peer.open(url, { autoAck: options.autoAck ?? true, protocols: options.protocols, headers: options.headers }));
    },
    pusher: settings.pusher,
    pusherClient(options = {}) {
      const client = pusherClient(service.baseUrl, settings.pusher as PusherCredentials, options);
      clients.push(client);
      return client;
    },
    pusherBackEnd: () => pusherBackEnd(service.baseUrl, settings.pusher as PusherCredentials),
  };
}

/** The options a check needs against this service and was not given (it is skipped, saying which). */
export function missingCredentials(check: Check, settings: Pick<RunSettings, "facts" | "service" | "pusher">): Array<"--token-secret" | "--publish-key" | "--pusher-key"> {
  const missing: Array<"--token-secret" | "--publish-key" | "--pusher-key"> = [];
  if (check.needsPusher && !settings.pusher) missing.push("--pusher-key");
  if (check.needsSockets && !check.needsPusher && settings.facts.access === "closed") missing.push("--token-secret");
  if (check.needsPublishKey && settings.facts.publishKeyRequired && !settings.service.publishKey) missing.push("--publish-key");
  return missing;
}

/** Why a check is skipped for want of `missing`. */
function skipReason(missing: ReturnType<typeof missingCredentials>): string {
  if (missing.includes("--pusher-key")) return "a check of the Pusher front door needs its app: pass --pusher-app-id, --pusher-key and --pusher-secret";
  const what = missing.map((m) => (m === "--token-secret" ? "subscribe tokens" : "a publish key")).join(" and ");
  return `the service requires ${what}: pass ${missing.join(" and ")}`;
}

/** Runs one check within its deadline; whatever it does, its sockets are closed afterwards. */
async function runOne(check: Check, runId: string, settings: RunSettings): Promise<CheckResult> {
  const started = Date.now();
  const base = { id: check.id, clause: check.clause, check: check.title };
  const done = (result: CheckResult["result"], evidence: string): CheckResult => ({ ...base, result, evidence: evidence.replace(/\s+/g, " ").trim(), ms: Date.now() - started });
  const missing = missingCredentials(check, settings);
  if (missing.length > 0) return done("skip", skipReason(missing));
  const peers: Peer[] = [];
  const clients: Pusher[] = [];
  let timer: NodeJS.Timeout | undefined;
  try {
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new CheckFailed(`did not finish within ${check.timeoutMs} ms`)), check.timeoutMs);
    });
    const evidence = await Promise.race([check.run(contextFor(check, runId, settings, peers, clients)), deadline]);
    const violations = peers.flatMap((peer) => peer.violations);
    if (violations.length > 0) return done("fail", `the server sent frames that are not protocol: ${violations.slice(0, 2).join("; ")}`);
    return done("pass", evidence);
  } catch (error) {
    if (error instanceof CheckSkipped) return done("skip", error.message);
    return done("fail", error instanceof Error ? error.message : String(error));
  } finally {
    clearTimeout(timer);
    for (const peer of peers) peer.dispose();
    for (const client of clients) client.disconnect();
  }
}

/** Runs `checks`, `concurrency` at a time, and returns their results in the order given. */
export async function runChecks(checks: readonly Check[], settings: RunSettings): Promise<{ runId: string; results: CheckResult[] }> {
  const runId = newRunId();
  const results: CheckResult[] = new Array(checks.length);
  let next = 0;
  const worker = async () => {
    while (next < checks.length) {
      const index = next++;
      const result = await runOne(checks[index] as Check, runId, settings);
      results[index] = result;
      settings.onResult?.(result);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, settings.concurrency) }, worker));
  return { runId, results };
}
