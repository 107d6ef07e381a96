// Builds the server as a library, what `import ... from "edge-fanout"` gets
// (package.json "exports"):
//   dist/lib/index.js     worker/lib.ts bundled as one ES module; hono and
//                         cloudflare:* stay imports (the worker that uses it
//                         has them), the client SDK and demo page are inside
//   dist/lib/types/       type declarations (entry: types/worker/lib.d.ts)
//
// Usage: node tools/build-library.mjs [--no-types]   (`npm run build` and `npm pack` run it)
import { build, stop } from "esbuild";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildSdkModule, WORKERD_BUNDLE } from "./build-worker.mjs";

const root = fileURLToPath(new URL("../", import.meta.url));
const out = join(root, "dist/lib");

/** Bundles dist/lib/index.js (and, unless `types` is false, the declarations); returns the bundle's path. */
export async function buildLibrary({ types = true } = {}) {
  // The worker serves the SDK bundle and the demo page, built into a module first.
  buildSdkModule();
  rmSync(out, { recursive: true, force: true });
  await build({
    ...WORKERD_BUNDLE,
    entryPoints: [join(root, "worker/lib.ts")],
    outfile: join(out, "index.js"),
    external: ["cloudflare:*", "node:*", "hono", "hono/*"],
    sourcemap: "linked",
    legalComments: "none",
  });
  await stop();
  if (types) await emitDeclarations();
  return join(out, "index.js");
}

async function emitDeclarations() {
  const ts = (await import("typescript")).default;
  const program = ts.createProgram([join(root, "worker/lib.ts")], {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ES2022,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    lib: ["lib.es2022.d.ts"],
    types: ["@cloudflare/workers-types"],
    strict: true,
    noUncheckedIndexedAccess: true,
    skipLibCheck: true,
    declaration: true,
    emitDeclarationOnly: true,
    rootDir: root,
    outDir: join(out, "types"),
  });
  const emitted = program.emit();
  const problems = [...ts.getPreEmitDiagnostics(program), ...emitted.diagnostics];
  if (problems.length > 0) {
    const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => root, getNewLine: () => "\n" };
    console.error(ts.formatDiagnostics(problems, host));
    process.exit(1);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const path = await buildLibrary({ types: !process.argv.includes("--no-types") });
  console.log(`built ${path}`);
}
