#!/usr/bin/env node
// `npm run -s token -- --room NAME ...`: bundles token-command.ts with esbuild
// (Node cannot run TypeScript) into dist/, then runs it with this process's
// arguments, and TOKEN_SECRET from the environment or else from .dev.vars, the
// file `npm start` reads too (--dev-vars PATH or --no-dev-vars choose another
// or none).
import { build } from "esbuild";
import { fileURLToPath, pathToFileURL } from "node:url";
import { readDevVars } from "./dev-vars.mjs";

const root = fileURLToPath(new URL("../", import.meta.url));
const outfile = `${root}dist/token-cli.mjs`;

const argv = process.argv.slice(2);
let devVarsPath = `${root}.dev.vars`;
const args = [];
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--no-dev-vars") devVarsPath = null;
  else if (argv[i] === "--dev-vars" && argv[i + 1] !== undefined) devVarsPath = argv[++i];
  else args.push(argv[i]);
}
const fromFile = devVarsPath === null ? {} : readDevVars(devVarsPath).vars;
// The environment wins, as it does for the server.
const env = { ...fromFile, ...Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined && v !== "")) };

await build({
  entryPoints: [fileURLToPath(new URL("./token-command.ts", import.meta.url))],
  outfile,
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node20",
  logLevel: "warning",
});
const { runTokenCli } = await import(pathToFileURL(outfile).href);
const result = await runTokenCli(args, env);
process.stdout.write(result.stdout);
process.stderr.write(result.stderr);
process.exitCode = result.code;
