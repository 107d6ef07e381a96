/**
 * The local server the load tool spawns without its accept gate
 * (`--server-gate off`) admits upgrades up to a descriptor ceiling, a quarter
 * of its limit by default, counting every descriptor workerd holds. A run
 * asking for as many sockets as that ceiling used to see its last upgrades
 * refused (503 over_capacity) where the floors, which have no ceiling,
 * connected them all; the load tool now sizes the ceiling to the run, and
 * names a refusal by its body, so a limit reads as one.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { parseLoadOptions, spawnedCeiling } from "../src/options";
import { freePort } from "../../test/helpers/server";

const root = fileURLToPath(new URL("../../", import.meta.url));
const run = promisify(execFile);

interface ConnectRun {
  runs: { label: string; ok: boolean; summary: { connected?: number; connectFailures?: number }; details: { connectFailuresByCause?: Record<string, number> }; notes: string[] }[];
}

async function connect(sockets: number, env: Record<string, string>): Promise<ConnectRun["runs"][number]> {
  const port = await freePort();
  const args = [`${root}load/dist/cli.js`, "connect", "--spawn", "--port", String(port), "--server-gate", "off", "--sockets", String(sockets), "--wave", String(sockets), "--hold", "1", "--json", "--quiet", "--no-report"];
  const { CONNECTION_CEILING: _, ...inherited } = process.env;
  const { stdout } = await run(process.execPath, args, { cwd: root, env: { ...inherited, ...env }, timeout: 150_000, maxBuffer: 64 * 1024 * 1024 });
  const report = JSON.parse(stdout.slice(stdout.indexOf("{"))) as ConnectRun;
  return report.runs[0] as ConnectRun["runs"][number];
}

beforeAll(async () => {
  await run(process.execPath, [`${root}load/build.mjs`], { cwd: root, timeout: 120_000 });
}, 150_000);

describe("the load tool's local server without its gate", () => {
  it("sizes the ceiling to the run's sockets, unless CONNECTION_CEILING says otherwise", () => {
    const options = (...args: string[]) => parseLoadOptions(["connect", "--sockets", "5000", ...args]);
    expect(spawnedCeiling(options("--server-gate", "off"), {})).toBe(6024);
    expect(spawnedCeiling(options("--server-gate", "off"), { CONNECTION_CEILING: "10000" })).toBeUndefined();
    expect(spawnedCeiling(options(), {})).toBeUndefined();
    expect(spawnedCeiling(options("--server-gate", "on"), {})).toBeUndefined();
  });

  it("connects every socket with the ceiling it sets; a ceiling below the run is refused as over_capacity, and named so", async () => {
    const sized = await connect(150, {});
    expect(sized.ok).toBe(true);
    expect(sized.summary).toMatchObject({ connected: 150, connectFailures: 0 });
    expect(sized.notes.join("\n")).toMatch(/connection ceiling set to 1174 descriptors/);

    // The launcher's ceiling counts every descriptor workerd holds: 150 sockets do not fit under 120.
    const capped = await connect(150, { CONNECTION_CEILING: "120" });
    const refused = capped.details.connectFailuresByCause ?? {};
    expect(capped.summary.connected).toBeLessThan(150);
    expect(Object.keys(refused)).toEqual(["http 503 over_capacity"]);
    expect((capped.summary.connected ?? 0) + (refused["http 503 over_capacity"] ?? 0)).toBe(150);
  }, 300_000);
});
