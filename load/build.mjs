// Bundles the load tool (TypeScript) into load/dist so plain Node 20 can run it.
// Dependencies (ws) stay external and resolve from the project's node_modules.
import { build } from "esbuild";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { WORKERD_BUNDLE } from "../tools/build-worker.mjs";

const root = dirname(fileURLToPath(import.meta.url));

const entries = {
  cli: "src/cli.ts",
  capacity: "src/capacity-cli.ts",
  bench: "bench/cli.ts",
  "client-worker": "src/client/worker.ts",
  "baseline-server": "baselines/ws-room-server.ts",
  "bare-server": "baselines/bare-workerd/server.ts",
  "partyserver-server": "baselines/partyserver/server.ts",
};

await build({
  entryPoints: Object.fromEntries(Object.entries(entries).map(([out, src]) => [out, join(root, src)])),
  outdir: join(root, "dist"),
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  sourcemap: "linked",
  logLevel: "warning",
  // Bundled CommonJS dependencies may call require(); give ESM output one.
  banner: { js: "import { createRequire as __loadCreateRequire } from 'node:module'; const require = __loadCreateRequire(import.meta.url);" },
});

// The bare workerd baseline's worker runs on workerd, bundled as the service's worker is.
await build({
  ...WORKERD_BUNDLE,
  entryPoints: [join(root, "baselines/bare-workerd/worker.ts")],
  outfile: join(root, "dist/bare-workerd-worker.js"),
  external: ["cloudflare:*"],
  // Inline, so a profile can map the bundle's frames to worker.ts and room.ts (bench/perf-steps.mjs).
  sourcemap: "inline",
});

// The PartyServer baseline's worker, with partyserver (pinned in package.json) bundled in.
await build({
  ...WORKERD_BUNDLE,
  entryPoints: [join(root, "baselines/partyserver/worker.ts")],
  outfile: join(root, "dist/partyserver-worker.js"),
  external: ["cloudflare:*"],
  sourcemap: "inline",
});
