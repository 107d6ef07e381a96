// Bundles the conformance suite (TypeScript) into conformance/dist so plain Node 20 can run it.
// Dependencies (ws, hono) stay external and resolve from the project's node_modules.
import { build } from "esbuild";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const root = dirname(fileURLToPath(import.meta.url));

await build({
  entryPoints: { cli: join(root, "src/cli.ts") },
  outdir: join(root, "dist"),
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  sourcemap: "linked",
  logLevel: "warning",
});
