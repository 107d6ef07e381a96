import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig, type TestProjectInlineConfiguration } from "vitest/config";

/**
 * A project of tests that run in Node: the service end to end through `npm start` (test/service),
 * the client SDK (test/sdk), the conformance suite and the load tool beside their code, and the
 * docs held to the code (test/docs). Their files run one at a time, in one queue across all of
 * these projects: each starts servers of its own, and a 2-core machine stays honest.
 */
function nodeProject(name: string, include: string[]): TestProjectInlineConfiguration {
  return {
    test: {
      name,
      include,
      environment: "node",
      // Builds the worker bundle once; every local server starts with --no-build.
      globalSetup: ["test/helpers/global-setup.ts"],
      fileParallelism: false,
      testTimeout: 60_000,
      hookTimeout: 60_000,
    },
  };
}

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
      nodeProject("service", ["test/service/**/*.test.ts"]),
      nodeProject("sdk", ["test/sdk/**/*.test.ts"]),
      nodeProject("conformance", ["conformance/test/**/*.test.ts"]),
      nodeProject("load", ["load/test/**/*.test.ts"]),
      nodeProject("docs", ["test/docs/**/*.test.ts"]),
    ],
  },
});
