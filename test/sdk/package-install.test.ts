import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { build } from "esbuild";
import type { Browser } from "playwright-core";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type LocalServer } from "../helpers/server";
import { hasChromium, launchChromium, serveFiles, type StaticServer } from "../helpers/browser-harness";
import { publish } from "../helpers/sdk-harness";
import { startProxy, type TcpProxy } from "../helpers/sdk-proxy";
import { eventually, sleep } from "../helpers/wait";

/**
 * The SDK as another project gets it: `npm pack` of a copy of client-sdk/
 * without its build output (as in a fresh checkout), installed from the
 * tarball into a scratch project, type-checked there strictly without the DOM
 * lib, run by Node against the local server, and loaded by Chromium, with the
 * React hook in a page bundled from the installed package under StrictMode.
 */

const repo = fileURLToPath(new URL("../../", import.meta.url));
const run = promisify(execFile);

let work: string;
let app: string;
let packOutput: string;
let tarball: string;
let server: LocalServer;

/** npm without the variables an enclosing `npm test` sets, which would configure the scratch project. */
function npmEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.toLowerCase().startsWith("npm_")) env[key] = value;
  return env;
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "sdk-package-"));
  // A copy of the package's sources, no dist/: packing it proves `prepack` builds everything. The SDK
  // bundles the protocol and a few shared helpers from beside it in the repository, so those come too.
  const source = join(work, "client-sdk");
  cpSync(join(repo, "client-sdk"), source, { recursive: true, filter: (path) => !path.startsWith(join(repo, "client-sdk", "dist")) });
  for (const shared of ["protocol", "common"]) cpSync(join(repo, shared), join(work, shared), { recursive: true });
  // The build's tools (esbuild, typescript, @types/react) come from the repository, as they do for client-sdk/.
  symlinkSync(join(repo, "node_modules"), join(work, "node_modules"));

  const packing = run("npm", ["pack", "--pack-destination", work], { cwd: source, env: npmEnv(), timeout: 120_000 });
  let packed = "";
  [server] = await Promise.all([
    startServer(),
    packing.then((r) => {
      packOutput = r.stdout + r.stderr;
      packed = r.stdout.trim().split("\n").at(-1)!.trim(); // npm prints the tarball's name last
    }),
  ]);
  tarball = join(work, packed);

  app = join(work, "app");
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }));
  await run("npm", ["install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts", tarball], { cwd: app, env: npmEnv(), timeout: 120_000 });
  // What a Node project would have installed beside it: ws and the Node and ws types.
  mkdirSync(join(app, "node_modules", "@types"), { recursive: true });
  for (const name of ["ws", "@types/ws", "@types/node"]) symlinkSync(join(repo, "node_modules", name), join(app, "node_modules", name));
}, 180_000);

afterAll(async () => {
  await server?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

const installed = () => join(app, "node_modules", "@edge-fanout", "client");

describe("npm pack", () => {
  it("builds the bundles and declarations and ships them with the licence", async () => {
    expect(packOutput).toMatch(/client-sdk\/dist\/sdk\.js: [\d.]+ KiB minified, [\d.]+ KiB minified\+gzipped/);
    expect(packOutput).toMatch(/client-sdk\/dist\/react\.js: [\d.]+ KiB minified/);
    const { stdout } = await run("tar", ["-tzf", tarball]);
    const files = stdout.trim().split("\n").map((f) => f.replace(/^package\//, "")).sort();
    for (const file of ["LICENSE", "README.md", "package.json", "dist/sdk.js", "dist/react.js", "dist/types/index.d.ts", "dist/types/react.d.ts", "dist/types/client.d.ts"]) {
      expect(files).toContain(file);
    }
    expect(files.filter((f) => !f.startsWith("dist/types/"))).toEqual(["LICENSE", "README.md", "dist/history.js", "dist/react.js", "dist/sdk.js", "package.json"]);
    expect(readFileSync(join(installed(), "LICENSE"), "utf8")).toBe(readFileSync(join(repo, "LICENSE"), "utf8"));
    expect(readFileSync(join(repo, "LICENSE"), "utf8")).toMatch(/^MIT License/);

    const manifest = JSON.parse(readFileSync(join(installed(), "package.json"), "utf8")) as Record<string, unknown>;
    expect(manifest).toMatchObject({
      name: "@edge-fanout/client",
      license: "MIT",
      type: "module",
      main: "./dist/sdk.js",
      types: "./dist/types/index.d.ts",
      exports: {
        ".": { types: "./dist/types/index.d.ts", default: "./dist/sdk.js" },
        "./react": { types: "./dist/types/react.d.ts", default: "./dist/react.js" },
      },
      peerDependenciesMeta: { react: { optional: true } },
    });
    expect(manifest.repository).toMatchObject({ type: "git", directory: "client-sdk" });
    // React is an optional peer: npm installed the SDK and nothing else.
    const lock = JSON.parse(readFileSync(join(app, "node_modules", ".package-lock.json"), "utf8")) as { packages: Record<string, unknown> };
    expect(Object.keys(lock.packages)).toEqual(["node_modules/@edge-fanout/client"]);
  });
});

// ---------------------------------------------------------------------------

const PORTABLE = `
import { RoomClient, CloseCode, PublishError, type RoomMessageEvent, type WebSocketConstructor, type TokenSource } from "@edge-fanout/client";
import type { UseRoomOptions, UseRoomResult } from "@edge-fanout/client/react";

// Nothing here may lean on the DOM lib: this name must not exist.
// @ts-expect-error AddEventListenerOptions is a DOM type
export type NotHere = AddEventListenerOptions;

export function follow(url: string, WebSocket: WebSocketConstructor, token: TokenSource, seen: number[]): RoomClient<{ n: number }> {
  const room = new RoomClient<{ n: number }>(url, { WebSocket, token, ackDelayMs: 200 });
  room.addEventListener("message", (e: RoomMessageEvent<{ n: number }>) => void seen.push(e.seq + e.data.n));
  room.addEventListener("state", (e) => { if (e.state === "closed" && e.code === CloseCode.UNAUTHORIZED) seen.length = 0; }, { once: true });
  room.publish({ n: 1 }).catch((error: unknown) => error instanceof PublishError && error.code === "closed");
  return room;
}
export type Hook = (options: UseRoomOptions<string>) => UseRoomResult<string>;
`;

const MAIN = `
import WebSocket from "ws";
import { RoomClient, type RoomMessageEvent } from "@edge-fanout/client";

const [url, httpBase] = process.argv.slice(2) as [string, string];
const room = new RoomClient<{ n: number }>(url, { WebSocket, token: async () => "unused-in-open-mode" });
const seen: Array<{ seq: number; n: number }> = [];
const done = new Promise<void>((resolve) => {
  room.addEventListener("message", (e: RoomMessageEvent<{ n: number }>) => {
    seen.push({ seq: e.seq, n: e.data.n });
    if (seen.length === 3) resolve();
  });
});
room.addEventListener("state", async (e) => {
  if (e.state !== "open") return;
  const published = await room.publish({ n: 1 });
  for (const n of [2, 3]) {
    await fetch(httpBase, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ n }) });
  }
  console.error("published over the socket as", published);
}, { once: true });
const timer = setTimeout(() => process.exit(2), 15_000);
await done;
clearTimeout(timer);
room.close();
console.log(JSON.stringify({ seen, state: room.state }));
`;

function check(files: string[], options: ts.CompilerOptions): string {
  const program = ts.createProgram(files, options);
  const diagnostics = ts.getPreEmitDiagnostics(program);
  if (options.noEmit !== true) program.emit();
  return ts.formatDiagnostics(diagnostics, { getCanonicalFileName: (f) => f, getCurrentDirectory: () => app, getNewLine: () => "\n" });
}

describe("in a Node project", () => {
  const strict: ts.CompilerOptions = {
    strict: true,
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
    skipLibCheck: false,
    target: ts.ScriptTarget.ES2022,
    lib: ["lib.es2022.d.ts"],
  };

  it("type-checks strictly against the declarations with no DOM lib and no ambient types, under every resolution", () => {
    writeFileSync(join(app, "portable.ts"), PORTABLE);
    const files = [join(app, "portable.ts")];
    const base = { ...strict, types: [], noEmit: true };
    expect(check(files, { ...base, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext })).toBe("");
    expect(check(files, { ...base, module: ts.ModuleKind.ES2022, moduleResolution: ts.ModuleResolutionKind.Bundler })).toBe("");
    // Older resolution: `types` for the package, `typesVersions` for its /react subpath.
    expect(check(files, { ...base, module: ts.ModuleKind.CommonJS, moduleResolution: ts.ModuleResolutionKind.Node10 })).toBe("");
  });

  it("compiles with @types/node and ws, and runs in Node against the local server", async () => {
    writeFileSync(join(app, "main.ts"), MAIN);
    const options = { ...strict, types: ["node"], module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, outDir: join(app, "out") };
    expect(check([join(app, "main.ts")], options)).toBe("");

    const room = `package-node-${process.pid}-${Date.now().toString(36)}`;
    const { stdout, stderr } = await run(process.execPath, [join(app, "out", "main.js"), `${server.wsUrl}/rooms/${room}/ws`, `${server.url}/rooms/${room}/publish`], {
      cwd: app,
      timeout: 20_000,
    });
    expect(stderr).toMatch(/published over the socket as 1/);
    expect(JSON.parse(stdout)).toEqual({ seen: [{ seq: 1, n: 1 }, { seq: 2, n: 2 }, { seq: 3, n: 3 }], state: "closed" });
  });
});

// ---------------------------------------------------------------------------

describe("in Chromium", () => {
  let browser: Browser | undefined;
  let files: StaticServer | undefined;
  let proxy: TcpProxy | undefined;
  beforeAll(async () => {
    if (!hasChromium) return;
    [browser, files, proxy] = await Promise.all([launchChromium(), serveFiles(app), startProxy(server.port)]);
  });
  afterAll(async () => {
    await Promise.all([browser?.close(), files?.close(), proxy?.close()]);
  });

  it("loads the installed module by its package name and follows a room", async (ctx) => {
    ctx.skip(!hasChromium, "no Chromium; install the Debian chromium package");
    const room = `package-browser-${process.pid}-${Date.now().toString(36)}`;
    const page = await browser!.newPage();
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(error.message));
    await files!.close();
    files = await serveFiles(app, {
      "/plain.html": `<!doctype html>
<script type="importmap">{"imports":{"@edge-fanout/client":"/node_modules/@edge-fanout/client/dist/sdk.js"}}</script>
<script type="module">
  import { RoomClient } from "@edge-fanout/client";
  const room = new RoomClient({ url: ${JSON.stringify(`${server.wsUrl}/rooms/${room}/ws`)} });
  window.seen = [];
  room.addEventListener("message", (e) => window.seen.push([e.seq, e.data]));
  room.addEventListener("state", (e) => (document.title = e.state));
</script>`,
    });
    await page.goto(`${files.url}/plain.html`);
    await page.waitForFunction(() => document.title === "open", null, { timeout: 15_000 });
    await publish(server.url, room, "hello browser");
    await page.waitForFunction(() => (window as unknown as { seen: unknown[] }).seen.length === 1, null, { timeout: 10_000 });
    expect(await page.evaluate(() => (window as unknown as { seen: unknown[] }).seen)).toEqual([[1, "hello browser"]]);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("runs useRoom under React StrictMode with one socket per mounted component", async (ctx) => {
    ctx.skip(!hasChromium, "no Chromium; install the Debian chromium package");
    const room = `package-react-${process.pid}-${Date.now().toString(36)}`;
    writeFileSync(
      join(app, "page.mjs"),
      `
import { StrictMode, createElement as h, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { useRoom } from "@edge-fanout/client/react";

function Room({ url }) {
  const { state, messages, publish, presence } = useRoom({ url, keep: 5 });
  // StrictMode runs this twice on mount: the count proves the double effects happened.
  useEffect(() => void (window.effects = (window.effects ?? 0) + 1), []);
  return h("div", null,
    h("p", { id: "state" }, state),
    h("p", { id: "presence" }, "presence: " + presence.count + " " + presence.members.map((m) => m.id).join(",")),
    h("ul", { id: "messages" }, messages.map((m) => h("li", { key: m.seq }, m.seq + ":" + m.data))),
    h("button", { id: "publish", onClick: () => publish("from react").then((seq) => (window.published = seq)) }, "publish"));
}

function App({ url }) {
  const [shown, setShown] = useState(true);
  return h("div", null, h("button", { id: "toggle", onClick: () => setShown((s) => !s) }, "toggle"), shown ? h(Room, { url }) : null);
}

createRoot(document.getElementById("root")).render(h(StrictMode, null, h(App, { url: window.ROOM_URL })));
`,
    );
    // Bundled from the installed package; React comes from the repository (the scratch project does not install it).
    await build({
      entryPoints: [join(app, "page.mjs")],
      outfile: join(app, "page.bundle.js"),
      bundle: true,
      format: "esm",
      absWorkingDir: app,
      nodePaths: [join(repo, "node_modules")],
      define: { "process.env.NODE_ENV": '"development"' }, // StrictMode's double effects happen in development builds only
      logLevel: "warning",
    });
    await files!.close();
    files = await serveFiles(app, {
      "/react.html": `<!doctype html><div id="root"></div>
<script>window.ROOM_URL = ${JSON.stringify(`${proxy!.wsUrl}/rooms/${room}/ws?member=react`)};</script>
<script type="module" src="/page.bundle.js"></script>`,
    });
    const acceptedBefore = proxy!.accepted;
    const page = await browser!.newPage();
    const errors: string[] = [];
    page.on("pageerror", (error) => errors.push(error.message));
    await page.goto(`${files.url}/react.html`);
    await page.waitForSelector("#state:text('open')", { timeout: 15_000 });
    expect(await page.evaluate(() => (window as unknown as { effects: number }).effects)).toBe(2);
    await sleep(500); // a second socket would have been opened by now
    expect(proxy!.accepted - acceptedBefore).toBe(1);
    const stats = async () => (await (await fetch(`${server.url}/rooms/${room}`)).json()) as { connections: number };
    expect((await stats()).connections).toBe(1);
    // The hook re-renders with the room's presence: this component's socket is its one member.
    await page.waitForSelector("#presence:text('presence: 1 react')", { timeout: 10_000 });

    await publish(server.url, room, "from http");
    await page.click("#publish");
    await page.waitForFunction(() => document.querySelectorAll("#messages li").length === 2, null, { timeout: 10_000 });
    expect(await page.$$eval("#messages li", (items) => items.map((li) => li.textContent))).toEqual(["1:from http", "2:from react"]);
    // The publish promise settles on the room's answer, which may come just after the message itself.
    await page.waitForFunction(() => (window as unknown as { published?: number }).published !== undefined, null, { timeout: 10_000 });
    expect(await page.evaluate(() => (window as unknown as { published: number }).published)).toBe(2);

    // Unmounting closes the socket.
    await page.click("#toggle");
    await eventually(async () => (await stats()).connections === 0, { timeoutMs: 10_000, everyMs: 100, what: "the socket closed" });
    expect((await stats()).connections).toBe(0);
    expect(proxy!.accepted - acceptedBefore).toBe(1);
    expect(errors).toEqual([]);
    await page.close();
  });
});
