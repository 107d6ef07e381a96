/**
 * `npm run bench -- <name> [options]`: runs one benchmark by name (`--help` after the name for its options);
 * without a name, lists them.
 */
import { runBench, type Bench } from "../src/kit/bench";
import broadcast from "./broadcast";
import compare from "./compare";
import cursor from "./cursor";
import faultSoak from "./fault-soak";
import history from "./history";
import hookSeam from "./hook-seam";
import multiplex from "./multiplex";
import newRooms from "./new-rooms";
import presence from "./presence";
import pressure from "./pressure";
import publish from "./publish";
import publishBatch from "./publish-batch";
import publishProfile from "./publish-profile";
import roomsChurn from "./rooms-churn";
import runtimeFloor from "./runtime-floor";
import sharded from "./sharded";
import webhooks from "./webhooks";

const BENCHES: readonly Bench[] = [compare, runtimeFloor, multiplex, sharded, hookSeam, publish, publishBatch, publishProfile, newRooms, broadcast, presence, webhooks, history, cursor, roomsChurn, pressure, faultSoak];

const [name, ...argv] = process.argv.slice(2);
const bench = BENCHES.find((b) => b.name === name);
if (!bench) {
  const asked = name === undefined || name === "--help" || name === "-h";
  if (!asked) process.stderr.write(`no benchmark named ${name}\n\n`);
  const width = Math.max(...BENCHES.map((b) => b.name.length));
  process.stdout.write(`Usage: npm run bench -- <name> [options]   (npm run bench -- <name> --help for its options)\n\n${BENCHES.map((b) => `  ${b.name.padEnd(width)}  ${b.title}`).join("\n")}\n`);
  process.exit(asked ? 0 : 2);
}
// Whatever is still open (servers' pipes, sockets) must not hold the process once the benchmark is done.
void runBench(bench, argv).then((code) => process.exit(code));
