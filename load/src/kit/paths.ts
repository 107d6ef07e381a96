import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The checkout the load tool belongs to: the nearest folder above this file that holds load/build.mjs (from load/dist or load/src alike). */
export const REPO_ROOT = ((): string => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "load", "build.mjs"))) {
    const up = dirname(dir);
    if (up === dir) throw new Error("the load tool is not inside its checkout (no load/build.mjs above it)");
    dir = up;
  }
  return dir;
})();

/** Where `node load/build.mjs` writes the bundles. */
export const DIST_DIR = join(REPO_ROOT, "load", "dist");

/** Where results are written (not committed). */
export const RESULTS_DIR = join(REPO_ROOT, "load", "results");

/**
 * The local server's launcher in `checkout`: local-server/server.mjs, or worker/local/server.mjs in checkouts from
 * before it moved (a benchmark may run the code before a change side by side with the code after it).
 */
export function launcherIn(checkout: string): string {
  const current = join(checkout, "local-server/server.mjs");
  return existsSync(current) ? current : join(checkout, "worker/local/server.mjs");
}
