// Bundles the worker (and its Durable Objects) into dist/worker.js for the local
// server. `wrangler deploy` bundles the same entry point on its own.
import { build } from "esbuild";
import { fileURLToPath } from "node:url";

export const root = fileURLToPath(new URL("../../", import.meta.url));
export const bundlePath = `${root}dist/worker.js`;

/** Builds dist/worker.js; returns its path. */
export async function buildWorker() {
  await build({
    entryPoints: [`${root}worker/index.ts`],
    outfile: bundlePath,
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    mainFields: ["module", "main"],
    external: ["cloudflare:*", "node:*"],
    loader: { ".html": "text", ".txt": "text" },
    sourcemap: "inline",
    logLevel: "warning",
  });
  return bundlePath;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await buildWorker();
  console.log(`built ${bundlePath}`);
}
