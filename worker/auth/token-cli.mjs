#!/usr/bin/env node
// `npm run token -- --room NAME ...`: bundles token-command.ts with esbuild (Node
// cannot run TypeScript) into dist/, then runs it with this process's
// arguments and environment.
import { build } from "esbuild";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
const outfile = `${root}dist/token-cli.mjs`;

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
const result = await runTokenCli(process.argv.slice(2), process.env);
process.stdout.write(result.stdout);
process.stderr.write(result.stderr);
process.exitCode = result.code;
