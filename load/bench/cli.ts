/**
 * `npm run bench -- <name> [options]`: runs one benchmark by name (`--help` after the name for its options);
 * without a name, lists them.
 */
import { runBench } from "../src/kit/bench";
import { BENCHES } from "./benches";
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
