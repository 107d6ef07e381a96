/**
 * The load tool's multiplexed clients (`--mux K`) against the local server:
 * every delivery accounted for per subscription (room and seq), subscribes
 * refused per room counted as such, and after a drop every room resumed from
 * its own ledger.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { muxRoomsOf, parseLoadOptions, totalSockets, totalSubscriptions } from "../src/options";
import type { Summary } from "../src/report/metrics";
import { managedServers } from "../../test/helpers/servers";

const root = fileURLToPath(new URL("../../", import.meta.url));
const server = managedServers();

beforeAll(() => {
  execFileSync(process.execPath, ["load/build.mjs"], { cwd: root, stdio: "inherit" });
}, 60_000);

interface Run {
  ok: boolean;
  error?: string;
  summary: Summary;
  details: Record<string, unknown>;
}

/** One run of the bundled load tool against `url`, as a user runs it; the first target's result. */
function load(url: string, ...args: string[]): Run {
  const out = execFileSync(process.execPath, ["load/dist/cli.js", ...args, "--url", url, "--procs", "1", "--sources", "0", "--json", "--no-report", "--quiet"], {
    cwd: root,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
    timeout: 90_000,
  });
  const report = JSON.parse(out.slice(out.indexOf("{"))) as { runs: Run[] };
  return report.runs[0] as Run;
}

describe("--mux: which rooms each connection follows", () => {
  it("tiles the rooms: 1,000 connections × 20 of 400 rooms give every room 50 followers, no connection a room twice", () => {
    const rooms = Array.from({ length: 400 }, (_, i) => `r${i}`);
    const followers = new Map<string, number>();
    for (let c = 0; c < 1000; c++) {
      const mine = muxRoomsOf(c, 20, rooms);
      expect(new Set(mine).size).toBe(20);
      for (const room of mine) followers.set(room, (followers.get(room) ?? 0) + 1);
    }
    expect(followers.size).toBe(400);
    expect(new Set(followers.values())).toEqual(new Set([50]));
  });

  it("keeps --sockets as followers per room, so one set of options describes the same subscriptions either way", () => {
    const single = parseLoadOptions(["fanout", "--rooms", "200", "--sockets", "50"]);
    const mux = parseLoadOptions(["fanout", "--rooms", "200", "--sockets", "50", "--mux", "20"]);
    expect(totalSockets(mux)).toBe(500);
    expect(totalSubscriptions(mux)).toBe(totalSubscriptions(single));
    expect(() => parseLoadOptions(["fanout", "--rooms", "7", "--sockets", "3", "--mux", "2"])).toThrow(/do not divide/);
    expect(() => parseLoadOptions(["fanout", "--rooms", "4", "--sockets", "3", "--mux", "5"])).toThrow(/more rooms/);
    expect(() => parseLoadOptions(["fanout", "--rooms", "4", "--sockets", "2", "--mux", "2", "--baseline"])).toThrow(/Node baseline/);
  });
});

describe("--mux against the local server", () => {
  it("fanout: every subscription gets each of its room's messages once, in order", async () => {
    const { url } = await server();
    const run = load(url, "fanout", "--rooms", "6", "--sockets", "4", "--mux", "3", "--rate", "4", "--duration", "3", "--deadline", "3000");
    expect(run.error).toBeUndefined();
    const s = run.summary;
    expect(s.connected).toBe(8);
    expect(s.subscriptions).toBe(24);
    // Each room's messages reach its 4 followers: expected is counted per subscription.
    expect(s.published).toBeGreaterThan(30);
    expect(s.expected).toBe((s.published ?? 0) * 4);
    expect(s.delivered).toBe(s.expected);
    expect({ lost: s.lost, duplicates: s.duplicates, outOfOrder: s.outOfOrder, gaps: s.gaps, refused: s.subscribeRefusals }).toEqual({
      lost: 0,
      duplicates: 0,
      outOfOrder: 0,
      gaps: 0,
      refused: 0,
    });
  }, 120_000);

  it("counts a refused subscribe per room, and the connection's other rooms still deliver", async () => {
    const { url } = await server({ vars: { MAX_ROOMS_PER_CONNECTION: "2" } });
    const run = load(url, "fanout", "--rooms", "3", "--sockets", "2", "--mux", "3", "--rate", "4", "--duration", "2", "--deadline", "3000");
    const s = run.summary;
    // Two connections of three rooms each: the third subscribe of each is refused, and only that one.
    expect(s.subscribeRefusals).toBe(2);
    expect((run.details.subscribe as { refusalsByCode: Record<string, number> }).refusalsByCode).toEqual({ too_many_rooms: 2 });
    expect(s.subscriptions).toBe(4);
    expect(s.expected).toBeGreaterThan(0);
    expect(s.lost).toBe(0);
  }, 120_000);

  it("storm: every connection cut at once comes back and resumes each room from its own seq, nothing lost", async () => {
    const { url } = await server();
    const run = load(url, "storm", "--rooms", "6", "--sockets", "4", "--mux", "3", "--rate", "5", "--duration", "6", "--drop-at", "2", "--backoff-max", "1000", "--deadline", "5000");
    expect(run.error).toBeUndefined();
    const s = run.summary;
    expect(s.notBack).toBe(0);
    expect(s.reconnectAttempts).toBeGreaterThanOrEqual(8);
    expect(s.allBackMs).toBeGreaterThan(0);
    expect(s.expected).toBe((s.published ?? 0) * 4);
    expect({ lost: s.lost, duplicates: s.duplicates, outOfOrder: s.outOfOrder }).toEqual({ lost: 0, duplicates: 0, outOfOrder: 0 });
  }, 120_000);
});
