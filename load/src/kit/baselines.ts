/**
 * The servers the service is measured against, one declarative entry each: its
 * name, how it starts, what it serves and what a reader of its figures must
 * know. The load tool's command line (--<flag>, --<port option>), a
 * benchmark's --targets and the kit's server start all read this table, so a
 * new baseline is one entry here (and its server under load/baselines/).
 */
import { join } from "node:path";
import { DIST_DIR } from "./paths";

export interface Baseline {
  /** Its name in results (the load tool's run label) and in a benchmark's --targets. */
  name: string;
  /** How a sentence names it. */
  title: string;
  /** The load tool's flag that adds it to a run (--flag); none when another option picks it. */
  flag?: string;
  /** The load tool's option for its port, the option's default, and this baseline's offset from it (baselines may share one option). */
  port: { option: string; default: number; offset?: number };
  /** --help text of the flag. */
  help: string;
  /** What a reader of its figures must know, printed with them. */
  note: string;
  /** workerd: its launcher prints "workerd pid N", the process sampled; node: the process started is the server. */
  runtime: "workerd" | "node";
  /** Serves multiplexed connections (GET /ws). */
  multiplexed: boolean;
  /** Node's arguments to start it on `port`, keeping what it stores under `workDir`. */
  args(port: number, workDir: string): string[];
}

const nodeBaseline = (durable: boolean): Baseline => ({
  name: durable ? "baseline-durable" : "baseline",
  title: durable ? "the durable Node baseline" : "the Node baseline",
  ...(durable ? {} : { flag: "baseline" }),
  port: { option: "baseline-port", default: 18210 },
  help: durable
    ? "the Node baseline commits each message to SQLite first (needs better-sqlite3)"
    : "also run against load/baselines/ws-room-server.ts (a minimal Node ws room server)",
  note: durable ? "durable baseline: each message is committed to SQLite (WAL, synchronous=FULL) before its publish is answered" : "",
  runtime: "node",
  multiplexed: false,
  args: (port, workDir) => [join(DIST_DIR, "baseline-server.js"), "--port", String(port), ...(durable ? ["--durable", join(workDir, "baseline-history.sqlite")] : [])],
});

const bareBaseline = (durable: boolean): Baseline => ({
  name: durable ? "bare-durable" : "bare",
  title: durable ? "the durable bare workerd baseline" : "the bare workerd baseline",
  flag: durable ? "baseline-bare-durable" : "baseline-bare",
  port: { option: "bare-port", default: 18220, offset: durable ? 1 : 0 },
  help: durable
    ? "also run against the bare workerd baseline that stores each message in SQLite first (on --bare-port + 1)"
    : "also run against the bare workerd baseline (load/baselines/bare-workerd: the runtime's floor)",
  note: durable
    ? "bare workerd baseline, durable: each message is inserted into the room object's SQLite before its publish is answered and sent"
    : "bare workerd baseline: one object per room sends each publish to every socket; no acks, window, history, coalescing or auth",
  runtime: "workerd",
  multiplexed: true,
  args: (port, workDir) => [join(DIST_DIR, "bare-server.js"), "--port", String(port), "--data", join(workDir, "data"), ...(durable ? ["--durable"] : [])],
});

/** A peer's room server on the same workerd: PartyServer (pinned in package.json) as its README writes one. */
const partyserverBaseline: Baseline = {
  name: "partyserver",
  title: "the PartyServer baseline",
  flag: "baseline-partyserver",
  port: { option: "partyserver-port", default: 18230 },
  help: "also run against a PartyServer room server (load/baselines/partyserver: partyserver 0.5.10 as its README writes one, hibernation on, publish = onRequest + this.broadcast), on workerd directly",
  note: "PartyServer baseline: partyserver 0.5.10 as its README writes a room (hibernation on, publish = onRequest + this.broadcast); no acks, window, history or auth",
  runtime: "workerd",
  multiplexed: false,
  args: (port, workDir) => [join(DIST_DIR, "partyserver-server.js"), "--port", String(port), "--data", join(workDir, "data")],
};

export const BASELINES: readonly Baseline[] = [nodeBaseline(false), nodeBaseline(true), bareBaseline(false), bareBaseline(true), partyserverBaseline];

export function baselineNamed(name: string): Baseline {
  const baseline = BASELINES.find((b) => b.name === name);
  if (!baseline) throw new Error(`no baseline named ${name}: one of ${BASELINES.map((b) => b.name).join(", ")}`);
  return baseline;
}
