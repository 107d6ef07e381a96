import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import WebSocket from "ws";
import { mintToken } from "../../common/tokens";
import { parseServerFrame } from "../../protocol";
import { privateDirOf, type LocalServer } from "../helpers/server";
import { managedServers } from "../helpers/servers";
import { sleep } from "../helpers/wait";

// `npm start` reads configuration as `wrangler dev` does, and keeps secrets
// off the disk, out of its output and out of reach of the network.

const root = fileURLToPath(new URL("../../", import.meta.url));
const run = promisify(execFile);

const serve = managedServers({ signal: "SIGTERM" });

function devVarsFile(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), "fanout-dev-vars-")), ".dev.vars");
  writeFileSync(path, text);
  return path;
}

/** Opens a socket; resolves with its welcome event, or the HTTP status it was refused with. */
function welcome(url: string, headers: Record<string, string> = {}): Promise<{ welcome?: Record<string, unknown>; status?: number }> {
  return new Promise((resolve, reject) => {
    // Refusals as HTTP statuses, which this reads; without the header they are 4001/4003 closes.
    const ws = new WebSocket(url, { headers: { "X-Refusal": "http", ...headers } });
    ws.once("message", (data) => {
      // The welcome shares its frame with the events after it (docs/protocol.md): it is the frame's first event.
      const frame = parseServerFrame(data.toString());
      resolve({ welcome: frame.ok ? ({ ...frame.value[0] } as Record<string, unknown>) : { invalid: data.toString() } });
      ws.terminate();
    });
    ws.once("unexpected-response", (_req, res) => resolve({ status: res.statusCode }));
    ws.once("error", reject);
  });
}

async function publishWith(server: LocalServer, key: string): Promise<number> {
  const res = await fetch(`${server.url}/rooms/config/publish`, { method: "POST", body: "x", headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res.status;
}

describe("vars and secrets from .dev.vars and the environment", () => {
  it("binds them with --var over the environment over .dev.vars over wrangler.toml, and prints no value", async () => {
    const file = devVarsFile(
      [
        "# local settings",
        "PUBLISH_KEY=file-key-8c1f",
        'export TOKEN_SECRET="file secret 8c1f"',
        "ALLOWED_ORIGINS=https://app.example   # the dev front end",
        "WINDOW_BYTES=4096",
        "CLIENT_FRAME_BURST=9",
        "NOT_A_SETTING=zzz-unused-8c1f",
        "",
      ].join("\n"),
    );
    const server = await serve({
      args: ["--dev-vars", file],
      env: { PUBLISH_KEY: "env-key-8c1f", TOKEN_SECRET: "env-secret-8c1f", CLIENT_FRAME_BURST: "7" },
      vars: { PUBLISH_KEY: "var-key-8c1f" },
    });

    // PUBLISH_KEY: --var wins over the environment and the file.
    expect(await publishWith(server, "var-key-8c1f")).toBe(200);
    expect(await publishWith(server, "env-key-8c1f")).toBe(401);
    expect(await publishWith(server, "file-key-8c1f")).toBe(401);

    // TOKEN_SECRET: the environment wins over the file.
    const room = "config";
    const url = (token: string) => `${server.wsUrl}/rooms/${room}/ws?token=${token}`;
    expect((await welcome(url(await mintToken("file secret 8c1f", { room })))).status).toBe(401);
    const opened = await welcome(url(await mintToken("env-secret-8c1f", { room })));
    // WINDOW_BYTES from the file; CLIENT_FRAME_BURST from the environment over the file; CLIENT_FRAMES_PER_SECOND from wrangler.toml.
    expect(opened.welcome).toMatchObject({ type: "welcome", window: 4096, rate: { perSecond: 20, burst: 7 } });

    // ALLOWED_ORIGINS from the file.
    const token = await mintToken("env-secret-8c1f", { room });
    expect((await welcome(url(token), { Origin: "https://app.example" })).welcome).toMatchObject({ type: "welcome" });
    expect((await welcome(url(token), { Origin: "https://other.example" })).status).toBe(403);

    const output = server.output();
    expect(output).toContain("PUBLISH_KEY set (--var), TOKEN_SECRET set (environment), ALLOWED_ORIGINS set (.dev.vars)");
    expect(output).toMatch(/NOT_A_SETTING, which the service does not use; ignored/);
    for (const value of ["8c1f", "zzz-unused"]) expect(output).not.toContain(value);
  });

  it("lets `npm run -s token` take TOKEN_SECRET from the same .dev.vars, printing only the token", async () => {
    const file = devVarsFile("TOKEN_SECRET=shared-secret-51aa\n");
    const server = await serve({ args: ["--dev-vars", file] });
    const env = { ...process.env };
    delete env.TOKEN_SECRET;
    const { stdout } = await run("npm", ["run", "-s", "token", "--", "--dev-vars", file, "--room", "cli"], { cwd: root, env });
    expect(stdout).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+\n$/);
    expect((await welcome(`${server.wsUrl}/rooms/cli/ws?token=${stdout.trim()}`)).welcome).toMatchObject({ type: "welcome", room: "cli" });
  });
});

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
}

describe("secrets stay off the disk and the network", () => {
  it("writes no file holding a secret, keeps its sockets in a private directory it removes, and hides the admin routes", async () => {
    const stale = join(root, "dist", "workerd-40404.capnp");
    writeFileSync(stale, "left by an older launcher");
    const secrets = { PUBLISH_KEY: "disk-key-77d2", TOKEN_SECRET: "disk-secret-77d2" };
    const server = await serve({ env: secrets });
    expect(existsSync(stale)).toBe(false);

    const privateDir = privateDirOf(server.workerdPid);
    if (privateDir === null) throw new Error("workerd holds no Unix socket");
    expect(statSync(privateDir).mode & 0o777).toBe(0o700);
    expect(readdirSync(privateDir).every((name) => name.endsWith(".sock"))).toBe(true);

    for (const path of [...filesUnder(join(root, "dist")), ...filesUnder(server.dataDir), ...filesUnder(privateDir)]) {
      const text = readFileSync(path, "latin1");
      for (const secret of Object.values(secrets)) expect(text.includes(secret), path).toBe(false);
    }
    for (const file of ["cmdline", "environ"]) {
      const text = readFileSync(`/proc/${server.workerdPid}/${file}`, "latin1");
      for (const secret of Object.values(secrets)) expect(text.includes(secret), file).toBe(false);
    }

    // The admin routes answer on the private socket only: a client's header does nothing here.
    const room = "admin";
    const held = new WebSocket(`${server.wsUrl}/rooms/${room}/ws?token=${await mintToken(secrets.TOKEN_SECRET, { room })}`);
    const closes: number[] = [];
    held.on("close", (code) => closes.push(code));
    await new Promise((resolve, reject) => {
      held.once("open", resolve);
      held.once("error", reject);
    });
    for (const [method, path] of [["POST", "/__local/shutdown"], ["POST", "/__local/pressure"], ["GET", "/__local/health"]] as const) {
      const res = await fetch(`${server.url}${path}`, { method, headers: { "x-local-admin-token": "guess" }, body: method === "POST" ? "{}" : undefined });
      expect(res.status, path).toBe(404);
      await res.arrayBuffer();
    }
    await sleep(500);
    expect(closes).toEqual([]);
    expect(held.readyState).toBe(WebSocket.OPEN);
    held.terminate();
    expect(server.output()).not.toMatch(/disk-(key|secret)-77d2/);

    await server.stop();
    expect(existsSync(privateDir)).toBe(false);
  });
});

describe("the banner's demo link", () => {
  const linkIn = (server: LocalServer) => /^ {2}Demo: +(\S+)/m.exec(server.output())?.[1];

  it("links the demo page the app serves, and says how to add a token when TOKEN_SECRET is set", async () => {
    const [open, tokened] = await Promise.all([serve(), serve({ env: { TOKEN_SECRET: "banner-secret-5d2a" } })]);
    expect(linkIn(open)).toBe(`${open.url}/demo?room=lobby`);
    const page = await fetch(`${open.url}/demo?room=lobby`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    await page.arrayBuffer();
    expect(tokened.output()).toContain(`Demo:       ${tokened.url}/demo?room=lobby&token=TOKEN  (TOKEN_SECRET is set: TOKEN from \`npm run -s token -- --room lobby\`)`);
    expect(tokened.output()).not.toContain("banner-secret-5d2a");
  });

  it("honours --mount, and names no demo when the app does not serve one", async () => {
    const [mounted, withoutDemo] = await Promise.all([
      // The fan-out app mounted at /fanout (demo on), and a team's worker that mounts it at /realtime with demo: false.
      serve({ build: true, args: ["--config", join(root, "test/hooks/wrangler.toml"), "--mount", "/fanout"] }),
      serve({ build: true, args: ["--config", join(root, "examples/chat/wrangler.toml"), "--mount", "/realtime"] }),
    ]);
    expect(linkIn(mounted)).toBe(`${mounted.url}/fanout/demo?room=lobby`);
    expect((await fetch(`${mounted.url}/fanout/demo?room=lobby`)).status).toBe(200);
    expect(withoutDemo.output()).toContain(`listening on ${withoutDemo.url}/realtime`);
    expect(linkIn(withoutDemo)).toBeUndefined();
  }, 90_000);
});
