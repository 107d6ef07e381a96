import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // The JSON report lets CI print a plain "N passed, N failed" summary.
    reporters: ["default", ["json", { outputFile: "dist/test-results.json" }]],
    projects: [
      {
        // Routing, validation and the Room object, inside workerd. Rooms named `ephemeral:...` keep
        // their messages in memory only (test/workerd/ephemeral.test.ts); no other test uses the prefix.
        plugins: [
          cloudflareTest({
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: { bindings: { HISTORY_RULES: JSON.stringify([{ prefix: "ephemeral:", store: false, maxMessages: 50 }]) } },
          }),
        ],
        test: { name: "workerd", include: ["test/workerd/**/*.test.ts"] },
      },
      {
        // A worker of its own that mounts the app and binds a Room subclass overriding every hook.
        plugins: [cloudflareTest({ wrangler: { configPath: "./test/hooks/wrangler.toml" } })],
        test: { name: "hooks", include: ["test/hooks/**/*.test.ts"] },
      },
      {
        // The example worker, as it imports the package ("edge-fanout": dist/lib, built by `npm run build`).
        plugins: [cloudflareTest({ wrangler: { configPath: "./examples/chat/wrangler.toml" } })],
        test: { name: "example", include: ["examples/chat/test/**/*.test.ts"] },
      },
      {
        // Real sockets from Node against the local server (local-server/server.mjs).
        test: {
          name: "node",
          include: ["test/node/**/*.test.ts"],
          environment: "node",
          globalSetup: ["test/helpers/global-setup.ts"],
          // Each file starts its own servers; running files one at a time keeps a 2-core machine honest.
          fileParallelism: false,
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
