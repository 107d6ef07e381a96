import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { managedServers } from "../helpers/servers";
import type { LocalServer } from "../helpers/server";
import { startFaultProxy, type FaultProxy } from "./fault-proxy";

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

/** Runs `npm run conformance` as a user would, with --json, and returns its exit code and rows. */
function runSuite(url: string, extra: string[] = []): Promise<{ code: number | null; rows: SuiteRow[]; ms: number; stderr: string }> {
  const started = Date.now();
  const args = ["run", "-s", "conformance", "--", "--url", url, "--publish-key", PUBLISH_KEY, "--token-secret", TOKEN_SECRET, "--json", ...extra];
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
      resolve({ code, rows, ms: Date.now() - started, stderr: `${stderr}\n${stdout.slice(0, 2000)}` });
    });
  });
}

const start = managedServers({ stopAfter: "all" });
let server: LocalServer;
let proxy: FaultProxy | undefined;

beforeAll(async () => {
  server = await start({ vars: { PUBLISH_KEY, TOKEN_SECRET, HISTORY_RULES } });
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
    expect(new Set(run.rows.map((row) => row.clause.split(" ")[0])).size).toBe(12);
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

  it("refuses a URL that is not a loopback address unless --allow-remote", async () => {
    const run = await runSuite("https://fanout.example.com");
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/not a loopback address.*--allow-remote/);
  }, 30_000);
});
