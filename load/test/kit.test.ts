/**
 * The benchmark kit's own parts, on their own: options as every benchmark reads them, interleaved rounds and
 * their medians, pacing, result files as the capacity tool reads them, and the prices it quotes.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import prices from "../src/capacity/hosted-prices.json";
import { optionsUsage, parseOptions, readChoice, readNumber, UsageRequested } from "../src/kit/args";
import { BASELINES } from "../src/kit/baselines";
import { eventsOf } from "../src/kit/raw-client";
import { interleaved, medianTable, rotation } from "../src/kit/rounds";
import { paced } from "../src/kit/time";
import { readResult } from "../src/result";
import { median, spreadOf } from "../src/stats/percentile";

const SPECS = {
  rooms: { default: "1,100", help: "room counts" },
  rounds: { default: "3", help: "rounds" },
  print: { flag: true, help: "only print" },
  var: { multiple: true, help: "KEY=VALUE" },
} as const;

describe("options", () => {
  it("reads numbers, lists, flags and repeated options by name, with their defaults", () => {
    const args = parseOptions(["--rounds", "5", "--print", "--var", "A=1", "--var", "B=2", "burst"], SPECS, true);
    expect(args.int("rounds", { min: 1 })).toBe(5);
    expect(args.numbers("rooms")).toEqual([1, 100]);
    expect(args.flag("print")).toBe(true);
    expect(args.texts("var")).toEqual(["A=1", "B=2"]);
    expect(args.positionals).toEqual(["burst"]);
    expect(args.withDefaults({ rounds: "9" }).int("rounds")).toBe(5);
  });

  it("refuses what it does not know and numbers out of range, naming the option", () => {
    expect(() => parseOptions(["--roundz", "3"], SPECS)).toThrow(/roundz/);
    expect(() => parseOptions(["burst"], SPECS)).toThrow(/positional/);
    expect(() => parseOptions(["--rounds", "0"], SPECS).int("rounds", { min: 1 })).toThrow(/--rounds must be a number of at least 1, got 0/);
    expect(() => parseOptions(["--rounds", "2.5"], SPECS).int("rounds")).toThrow(/--rounds must be an integer/);
    expect(() => readNumber("x", "rate", 1)).toThrow(/--rate must be a number, got x/);
    expect(() => readChoice("sometimes", "gate", ["auto", "on", "off"], "auto")).toThrow(/--gate must be auto, on, off/);
    expect(() => parseOptions(["-h"], SPECS)).toThrow(UsageRequested);
  });

  it("prints its help from the same specs it parses", () => {
    const usage = optionsUsage(SPECS);
    for (const name of Object.keys(SPECS)) expect(usage).toContain(`--${name}`);
    expect(usage).toContain("(default 1,100)");
  });
});

describe("interleaved rounds", () => {
  it("rotates the order each round, so every variant runs in every position equally often", () => {
    const items = ["a", "b", "c"];
    const firsts = [0, 1, 2].map((round) => rotation(items, round)[0]);
    expect(firsts).toEqual(["a", "b", "c"]);
    // A step keeps runs together: a target's two room counts stay side by side.
    expect(rotation(["a1", "a2", "b1", "b2"], 1, 2)).toEqual(["b1", "b2", "a1", "a2"]);
  });

  it("gives each variant its results in round order", async () => {
    const order: string[] = [];
    const out = await interleaved(["x", "y"], 2, async (v, round) => {
      order.push(`${v}${round}`);
      return round;
    });
    expect(order).toEqual(["x0", "y0", "y1", "x1"]);
    expect(out.get("x")).toEqual([0, 1]);
  });

  it("medians and spread: the middle round, the lowest and highest, and (highest - lowest) ÷ median", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(spreadOf([10, 12, 8])).toEqual({ median: 10, low: 8, high: 12, spread: 0.4, rounds: 3 });
    fc.assert(fc.property(fc.array(fc.double({ min: -1e6, max: 1e6, noNaN: true }), { minLength: 1 }), (values) => {
      const s = spreadOf(values);
      return s.low <= s.median && s.median <= s.high;
    }));
  });

  it("tables the medians with their spread and the ratios against the first column, leaving out rows no column has", () => {
    const text = medianTable(
      [
        { name: "ours", rounds: [{ summary: { x: 10 } }, { summary: { x: 20 } }, { summary: { x: 30 } }] },
        { name: "floor", rounds: [{ summary: { x: 5 } }, { summary: { x: 10 } }, { summary: { x: 15 } }] },
      ],
      [["x", "figure x", 0], ["y", "figure y", 0]],
      3,
    );
    expect(text).toMatch(/figure x\s+20\s+10\s+0\.50x/);
    expect(text).toMatch(/10-30 \(100\.0%\)\s+5-15 \(100\.0%\)/);
    expect(text).not.toContain("figure y");
  });
});

describe("pacing", () => {
  it("keeps to its schedule and to the work in flight", async () => {
    let inFlight = 0;
    let most = 0;
    const started: number[] = [];
    const t0 = performance.now();
    await paced(10, { concurrency: 3, rate: 200 }, async () => {
      started.push(performance.now() - t0);
      most = Math.max(most, ++inFlight);
      await new Promise((r) => setTimeout(r, 20));
      inFlight--;
    });
    expect(started).toHaveLength(10);
    expect(most).toBeLessThanOrEqual(3);
    // Item 9 is due 45 ms after the first: never earlier.
    expect(started[9]).toBeGreaterThanOrEqual(44);
  });
});

describe("frames as a benchmark's client reads them", () => {
  it("skims message frames for seq and tag without parsing their data, and reads the rest whole", () => {
    const frame = Buffer.from(JSON.stringify([{ type: "message", seq: 7, data: { text: "a}b" }, ts: 1, tag: 42 }, { type: "message", seq: 8, data: 1, ts: 2, tag: 43 }]));
    expect(eventsOf(frame, true)).toEqual([{ type: "message", seq: 7, tag: 42 }, { type: "message", seq: 8, tag: 43 }]);
    expect(eventsOf(Buffer.from('{"type":"welcome","seq":3,"epoch":"e","window":1024}'), true)).toEqual([{ type: "welcome", seq: 3, epoch: "e", window: 1024 }]);
    expect(eventsOf(Buffer.from("not json"), false)).toEqual([{ type: "invalid", text: "not json" }]);
  });
});

describe("result files and quoted prices", () => {
  const dir = mkdtempSync(join(tmpdir(), "load-kit-"));
  const file = (name: string, value: unknown): string => {
    const path = join(dir, name);
    writeFileSync(path, JSON.stringify(value));
    return path;
  };

  it("reads a result of the kind asked for, and from before the header named it; refuses another kind", () => {
    expect(readResult(file("m.json", { tool: "edge-fanout-load", schema: 1, bench: "multiplex", tables: [] }), "multiplex").bench).toBe("multiplex");
    expect(readResult(file("old.json", { bench: "sharded", steps: {} }), "sharded").bench).toBe("sharded");
    expect(readResult(file("l.json", { tool: "edge-fanout-load", schema: 1, scenario: "fanout", runs: [] }), "load").scenario).toBe("fanout");
    expect(() => readResult(file("s.json", { bench: "sharded" }), "multiplex")).toThrow(/not a multiplex benchmark result/);
  });

  it("keeps every quoted price with a source that says where and when it was read", () => {
    const keys = new Set(Object.keys(prices.sources));
    for (const source of Object.values(prices.sources)) {
      expect(source.url).toMatch(/^https:\/\//);
      expect(source.readOn).toMatch(/^\d{4}-\d{2}-\d{2}$/);
      expect(["provider", "secondary"]).toContain(source.kind);
    }
    const named = [...prices.services.flatMap((s) => [...s.sources, ...s.plans.flatMap((p) => p.sources)]), ...prices.selfHosted.flatMap((r) => r.sources)];
    for (const key of named) expect(keys.has(key), key).toBe(true);
    for (const s of prices.services) for (const p of s.plans) expect(p.sources.length, `${s.service} ${p.plan}`).toBeGreaterThan(0);
  });

  it("names each baseline once, and gives every one a run can add a port of its own", () => {
    const names = BASELINES.map((b) => b.name);
    expect(new Set(names).size).toBe(names.length);
    const ports = BASELINES.filter((b) => b.flag).map((b) => `${b.port.option}+${b.port.offset ?? 0}`);
    expect(new Set(ports).size).toBe(ports.length);
  });
});
