import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // The JSON report lets CI print a plain "N passed, N failed" summary.
    reporters: ["default", ["json", { outputFile: "dist/test-results.json" }]],
    projects: [
      {
        // Routing, validation and the Room object, inside workerd.
        plugins: [cloudflareTest({ wrangler: { configPath: "./wrangler.toml" } })],
        test: { name: "workerd", include: ["test/workerd/**/*.test.ts"] },
      },
      {
        // Real sockets from Node against the local server (worker/local/server.mjs).
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
