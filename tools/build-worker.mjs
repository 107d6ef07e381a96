// Bundles the worker (and its Durable Objects) into dist/worker.js for the local
// server. `wrangler deploy` bundles the same entry point on its own. Another
// worker's entry (the launcher's --config) is bundled the same way beside it.
import { build, stop } from "esbuild";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

export const root = fileURLToPath(new URL("../", import.meta.url));
export const bundlePath = `${root}dist/worker.js`;

/** esbuild options for code that runs on workerd (the worker, the library): packages resolved as workerd resolves them. */
export const WORKERD_BUNDLE = {
  bundle: true,
  format: "esm",
  platform: "neutral",
  target: "es2022",
  conditions: ["workerd", "worker", "browser"],
  mainFields: ["module", "main"],
  logLevel: "warning",
};

/** Builds the client SDK into the module the worker serves (and the library embeds). */
export function buildSdkModule() {
  execFileSync(process.execPath, [`${root}client-sdk/build.mjs`, "--no-types"], { stdio: ["ignore", "ignore", "inherit"] });
}

/**
 * Builds the client SDK (the worker serves it), then the worker: this
 * repository's (worker/index.ts into dist/worker.js) unless `entry` names
 * another; returns the bundle's path.
 * @param {{ entry?: string; outfile?: string }} [target]
 */
export async function buildWorker(target = {}) {
  const entry = target.entry ?? `${root}worker/index.ts`;
  const outfile = target.outfile ?? bundlePath;
  buildSdkModule();
  await build({
    ...WORKERD_BUNDLE,
    entryPoints: [entry],
    outfile,
    external: ["cloudflare:*", "node:*"],
    loader: { ".html": "text", ".txt": "text" },
    sourcemap: "inline",
  });
  // esbuild keeps a service process (and its pipes) for further builds; the launcher makes none.
  await stop();
  return outfile;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await buildWorker();
  console.log(`built ${bundlePath}`);
}
