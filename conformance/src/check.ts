import type Pusher from "pusher-js";
import type PusherServer from "pusher";
import type { Peer } from "./peer.js";
import type { PusherClientOptions, PusherCredentials } from "./pusher-clients.js";
import type { Service } from "./service.js";

/** How the suite opens sockets on this service. */
export type AccessMode =
  /** The suite mints subscribe tokens with the given TOKEN_SECRET. */
  | "token"
  /** The service takes sockets without tokens (no TOKEN_SECRET): members are named with `?member=`. */
  | "open"
  /** The service wants tokens and the suite has no secret: checks that need sockets are skipped. */
  | "closed";

/** What the suite learnt about the service before the checks. */
export interface ServiceFacts {
  access: AccessMode;
  /** The service wants a publish key (a publish without one was 401). */
  publishKeyRequired: boolean;
  /** A welcome's limits, which every socket is told; null when no socket could be opened (tokens required, no secret given). */
  window: number | null;
  maxMessageBytes: number | null;
}

export interface SocketOptions {
  /** Acknowledge every frame as it arrives (default true). */
  autoAck?: boolean;
  /** The member id (a token's `sub`, or `?member=` in open mode); none: a socket without identity. */
  member?: string;
  /** Further query parameters (since, epoch, rewind). */
  query?: Record<string, string | number>;
}

/** What a check gets: the service, names of its own and sockets the runner closes afterwards. */
export interface Context {
  readonly service: Service;
  readonly facts: ServiceFacts;
  readonly tokenSecret: string | undefined;
  /** A room name unique to this run and check: `conformance-<run>-<name>`. */
  room(name: string): string;
  /** A room name under `conformance-bounded-`, the prefix a deployment may give a small history (HISTORY_RULES). */
  boundedRoom(name: string): string;
  /** The query string (with `?`) a socket into `room` opens with: its token, or its member in open mode, and `options.query`. */
  socketQuery(room: string, options?: SocketOptions): Promise<string>;
  /** Opens a room's socket with this run's credentials; closed by the runner after the check. */
  openRoom(room: string, options?: SocketOptions): Promise<Peer>;
  /** Opens a multiplexed connection (`GET /ws`) allowed into `rooms`; closed by the runner after the check. */
  openMultiplexed(rooms: string[], options?: SocketOptions): Promise<Peer>;
  /** Opens a socket at `url` as given (a refusal check's own credentials); closed by the runner after the check. */
  openRaw(url: string, options?: { protocols?: string[]; headers?: Record<string, string>; autoAck?: boolean }): Promise<Peer>;
  /** The Pusher app the run was given (`--pusher-*`); checks that need it declare `needsPusher`. */
  readonly pusher: PusherCredentials | undefined;
  /** A stock pusher-js client of that app; disconnected by the runner after the check. */
  pusherClient(options?: PusherClientOptions): Pusher;
  /** The stock server SDK of that app. */
  pusherBackEnd(): PusherServer;
}

/** One check of the suite: it names the clause of docs/guarantees.md it checks. */
export interface Check {
  /** Stable id, `<clause id>.<what>`, e.g. `G1.concurrent-publishers`. */
  id: string;
  /** The clause, as docs/guarantees.md heads it, e.g. `G1 order`. */
  clause: string;
  /** What is checked, in a few words. */
  title: string;
  /** Longest the check may take; past it, it fails. */
  timeoutMs: number;
  /** Checks with sockets only run when the suite can open sockets. */
  needsSockets: boolean;
  /** Checks of the Pusher front door run only with the app's credentials (`--pusher-app-id`, `--pusher-key`, `--pusher-secret`). */
  needsPusher?: boolean;
  /** Checks that publish, or read a room over HTTP, only run when the suite has the publish key a service requires. */
  needsPublishKey: boolean;
  /** Resolves with the evidence of a pass; throws CheckFailed (or anything) for a fail, CheckSkipped for a skip. */
  run(ctx: Context): Promise<string>;
}

export type Outcome = "pass" | "fail" | "skip";

export interface CheckResult {
  id: string;
  clause: string;
  check: string;
  result: Outcome;
  evidence: string;
  ms: number;
}

/** A check saw the service break its clause. */
export class CheckFailed extends Error {}

/** A check cannot run against this deployment (it says why). */
export class CheckSkipped extends Error {}

/** Fails the check with `evidence` unless `condition` holds. */
export function expect(condition: unknown, evidence: string): asserts condition {
  if (!condition) throw new CheckFailed(evidence);
}

export function skip(reason: string): never {
  throw new CheckSkipped(reason);
}

/** Why seqs are not exactly `from..to`, each once, in order (null when they are). */
export function seqProblem(seqs: readonly number[], from: number, to: number): string | null {
  const seen = new Set<number>();
  for (let i = 0; i < seqs.length; i++) {
    const seq = seqs[i] as number;
    if (seen.has(seq)) return `seq ${seq} delivered twice (at positions ${seqs.indexOf(seq)} and ${i})`;
    seen.add(seq);
    const expected = from + i;
    if (seq !== expected) return seq > expected ? `seq ${expected} missing (got ${seq} at position ${i})` : `seq ${seq} out of order at position ${i} (expected ${expected})`;
  }
  if (seqs.length !== to - from + 1) return `got ${seqs.length} messages, expected ${to - from + 1} (seqs ${from}..${to})`;
  return null;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
