import { spawn } from "node:child_process";
import { lookup } from "node:dns/promises";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { managedServers } from "../../test/helpers/servers";
import type { LocalServer } from "../../test/helpers/server";
import { startFaultProxy, type FaultProxy } from "../../test/helpers/fault-proxy";
import { APP, pusherVars } from "../../test/helpers/pusher";

const PUBLISH_KEY = "pk-5c1d9e02-conformance-test";
const TOKEN_SECRET = "ts-7a3f60b4-conformance-test";
// A small history for the suite's bounded rooms only, so that its lost-range check runs.
const HISTORY_RULES = JSON.stringify([{ prefix: "conformance-bounded-", maxMessages: 16 }]);
const root = fileURLToPath(new URL("../../", import.meta.url));

interface SuiteRow {
  id: string;
  clause: string;
  result: "pass" | "fail" | "skip";
  evidence: string;
}

/** Runs `npm run conformance` as a user would, with the service's keys and --json unless told otherwise, and returns its exit code and rows. */
function runSuite(url: string, extra: string[] = [], { keys = true, json = true } = {}): Promise<{ code: number | null; rows: SuiteRow[]; ms: number; stderr: string; stdout: string }> {
  const started = Date.now();
  const pusher = ["--pusher-app-id", APP.id, "--pusher-key", APP.key, "--pusher-secret", APP.secret];
  const args = ["run", "-s", "conformance", "--", "--url", url, ...(keys ? ["--publish-key", PUBLISH_KEY, "--token-secret", TOKEN_SECRET, ...pusher] : []), ...(json ? ["--json"] : []), ...extra];
  const child = spawn("npm", args, { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => {
    child.once("exit", (code) => {
      let rows: SuiteRow[] = [];
      try {
        rows = (JSON.parse(stdout) as { results: SuiteRow[] }).results;
      } catch {
        // Left empty: the assertions below say what was printed.
      }
      resolve({ code, rows, ms: Date.now() - started, stderr: `${stderr}\n${stdout.slice(0, 2000)}`, stdout });
    });
  });
}

const start = managedServers({ stopAfter: "all" });
let server: LocalServer;
let proxy: FaultProxy | undefined;

beforeAll(async () => {
  server = await start({ vars: { PUBLISH_KEY, TOKEN_SECRET, HISTORY_RULES }, env: pusherVars() });
}, 60_000);

afterAll(async () => {
  await proxy?.close();
});

describe("npm run conformance", () => {
  it("passes every check against the local server", async () => {
    const run = await runSuite(server.url);
    const notPassed = run.rows.filter((row) => row.result !== "pass");
    expect(notPassed, run.stderr).toEqual([]);
    expect(run.rows.length).toBeGreaterThanOrEqual(20);
    expect(run.code).toBe(0);
    // Every clause with a check is covered.
    expect(new Set(run.rows.map((row) => row.clause.split(" ")[0])).size).toBe(13);
    expect(run.ms).toBeLessThan(90_000);
  }, 120_000);

  it("fails, naming order and exactly-once, when a proxy in front of the server sends a message twice", async () => {
    proxy = await startFaultProxy(server.url, { duplicateMessage: true });
    const run = await runSuite(proxy.url);
    expect(run.code, run.stderr).toBe(1);
    expect(proxy.duplicated).toBeGreaterThan(0);
    const byId = new Map(run.rows.map((row) => [row.id, row]));
    const order = byId.get("G1.concurrent-publishers");
    expect(order?.result).toBe("fail");
    expect(order?.clause).toBe("G1 order");
    expect(order?.evidence).toMatch(/delivered twice/);
    expect(byId.get("G3.resume-after-drop")?.result).toBe("fail");
    // The proxy is faithful otherwise: what does not depend on delivery still passes through it.
    for (const id of ["G11.bad-room", "G11.bad-bodies", "G11.publish-key", "G11.token", "G11.forbidden-room", "G5.forged-ack"]) {
      expect(byId.get(id)?.result, `${id}: ${byId.get(id)?.evidence}`).toBe("pass");
    }
  }, 120_000);

  it("skips what needs keys against a service with access control when given none, says so, and exits 0 when nothing failed", async () => {
    const run = await runSuite(server.url, [], { keys: false, json: false });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/sockets: tokens required, no --token-secret; publish key: required, no --publish-key; window and message limit unknown/);
    expect(run.stderr).toMatch(/the service has access control: \d+ of the \d+ checks need --token-secret or --publish-key and are skipped/);
    expect(run.stderr).not.toMatch(/window 0 B/);
    expect(run.stdout).toMatch(/ 0 failed, [1-9]\d* skipped/);
    // The refusals of a missing key need no key to check.
    expect(run.stdout).toMatch(/G11\.publish-key\s+PASS/);
    expect(run.stdout).toMatch(/G11\.bad-bodies\s+SKIP\s+the service requires a publish key: pass --publish-key/);
    expect(run.stdout).toMatch(/G1\.concurrent-publishers\s+SKIP\s+the service requires subscribe tokens and a publish key: pass --token-secret and --publish-key/);
  }, 60_000);

  it("refuses a URL that is not a loopback address unless --allow-remote", async () => {
    const run = await runSuite("https://192.0.2.1");
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/192\.0\.2\.1 is not a loopback address.*--allow-remote/);
  }, 30_000);

  it("judges a name by the addresses it resolves to: a *.localhost name this machine does not resolve is refused, localhost is taken", async () => {
    const name = "conformance-check.localhost";
    const resolved = await lookup(name, { all: true }).then((all) => all.map((a) => a.address), () => []);
    const run = await runSuite(`http://${name}:${server.port}`, ["--only", "G11.bad-room"]);
    if (resolved.length > 0 && resolved.every((a) => a.startsWith("127.") || a === "::1")) {
      // This machine resolves *.localhost itself (systemd's myhostname): then it is loopback.
      expect(run.code, run.stderr).toBe(0);
    } else {
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/conformance-check\.localhost does not resolve .*--allow-remote/);
    }
    const local = await runSuite(`http://localhost:${server.port}`, ["--only", "G11.bad-room"]);
    expect(local.code, local.stderr).toBe(0);
    expect(local.rows.map((row) => row.result)).toEqual(["pass"]);
  }, 60_000);
});
