import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { parseHistoryRules } from "../../common/retention";
import { CLOUDFLARE_PRICING, SECONDS_PER_MONTH } from "../src/capacity/pricing";
import { parseRoomGroup, retentionCost, STORED_OVERHEAD_BYTES, type RetentionInputs } from "../src/capacity/retention";

/** The capacity tool's pricing of a HISTORY_RULES set for rooms grouped by prefix. */

const rules = parseHistoryRules(JSON.stringify([{ prefix: "chat:", maxMessages: 10_000, maxAgeSeconds: 86_400 }, { prefix: "price:", maxAgeSeconds: 60 }]));
const inputs: RetentionInputs = {
  rules,
  defaults: { HISTORY_MAX_MESSAGES: 1000, HISTORY_MAX_AGE_SECONDS: 120 },
  dedupeSeconds: 120,
  payloadBytes: 200,
  keyBytes: 0,
  rowsPerMessage: 1,
};
const repo = fileURLToPath(new URL("../../", import.meta.url));

describe("history rules in the capacity tool", () => {
  it("reads room groups as PREFIX=ROOMS@RATE, * for the others", () => {
    expect(parseRoomGroup("chat:=2000@0.5")).toEqual({ prefix: "chat:", rooms: 2000, messagesPerSecond: 0.5 });
    expect(parseRoomGroup("*=10@1")).toEqual({ prefix: "", rooms: 10, messagesPerSecond: 1 });
    expect(() => parseRoomGroup("chat:2000")).toThrow(/PREFIX=ROOMS@/);
  });

  it("prices rows by messages and storage by each group's ring, and says how far back history and keys reach", () => {
    const cost = retentionCost(
      [
        { prefix: "chat:", rooms: 2000, messagesPerSecond: 0.2 },
        { prefix: "price:", rooms: 50, messagesPerSecond: 20 },
        { prefix: "", rooms: 500, messagesPerSecond: 1 },
      ],
      { ...inputs, keyBytes: 36 },
      CLOUDFLARE_PRICING,
    );
    const [chat, price, others] = cost.groups;
    expect(chat!.retention).toEqual({ maxMessages: 10_000, maxAgeSeconds: 86_400, store: true, rule: "chat:" });
    expect(price!.retention).toEqual({ maxMessages: 1000, maxAgeSeconds: 60, store: true, rule: "price:" });
    expect(others!.retention.rule).toBeNull();
    expect(chat!.rowsWrittenPerMonth).toBeCloseTo(2000 * 0.2 * SECONDS_PER_MONTH);
    // A full ring of 10,000 one-message rows per room, each message its payload, overhead and key entry.
    expect(chat!.storedBytes).toBeCloseTo(2000 * 10_000 * (200 + STORED_OVERHEAD_BYTES + 36 + 22));
    // price: at 20 msg/s its 1,000 slots hold 50 s, less than its 60 s bound: keys reach 50 s.
    expect(price!.servedSeconds).toBe(50);
    expect(price!.dedupeSeconds).toBe(50);
    expect(chat!.dedupeSeconds).toBe(120);
    expect(cost.rowsWrittenUsd).toBeCloseTo((cost.rowsWrittenPerMonth - 50e6) / 1e6);
  });

  it("stores as much for a short age bound as for a long one: the ring is overwritten, not emptied", () => {
    const long = retentionCost([{ prefix: "a", rooms: 1, messagesPerSecond: 1 }], { ...inputs, defaults: { HISTORY_MAX_MESSAGES: 1000, HISTORY_MAX_AGE_SECONDS: 86_400 } }, CLOUDFLARE_PRICING);
    const short = retentionCost([{ prefix: "a", rooms: 1, messagesPerSecond: 1 }], { ...inputs, defaults: { HISTORY_MAX_MESSAGES: 1000, HISTORY_MAX_AGE_SECONDS: 10 } }, CLOUDFLARE_PRICING);
    expect(short.storedBytes).toBe(long.storedBytes);
    expect(short.groups[0]!.servedMessages).toBe(10);
    // Coalescing: two messages a flush halve the rows, and a ring of 1,000 rows then holds 2,000 messages.
    const coalesced = retentionCost([{ prefix: "a", rooms: 1, messagesPerSecond: 1 }], { ...inputs, rowsPerMessage: 0.5 }, CLOUDFLARE_PRICING);
    expect(coalesced.rowsWrittenPerMonth).toBeCloseTo(long.rowsWrittenPerMonth / 2);
    expect(coalesced.groups[0]!.servedMessages).toBe(120);
    expect(coalesced.storedBytes).toBeCloseTo(2 * long.storedBytes);
  });

  it("prices an ephemeral rule at no row written and nothing stored, its reach the ring in memory", () => {
    const ephemeral = parseHistoryRules(JSON.stringify([{ prefix: "price:", store: false, maxMessages: 500 }, { prefix: "chat:", maxMessages: 500 }]));
    const cost = retentionCost(
      [
        { prefix: "price:", rooms: 2000, messagesPerSecond: 5 },
        { prefix: "chat:", rooms: 2000, messagesPerSecond: 5 },
      ],
      { ...inputs, rules: ephemeral, keyBytes: 36 },
      CLOUDFLARE_PRICING,
    );
    const [price, chat] = cost.groups;
    expect(price!.retention.store).toBe(false);
    expect(price).toMatchObject({ rowsWrittenPerMonth: 0, storedBytes: 0, rowsPerPage: 0, rowsPerWake: 0 });
    // The same rooms storing: a row per message, a full ring each.
    expect(chat!.rowsWrittenPerMonth).toBeCloseTo(2000 * 5 * SECONDS_PER_MONTH);
    expect(cost.rowsWrittenPerMonth).toBe(chat!.rowsWrittenPerMonth);
    // 500 messages at 5 msg/s: 100 s of them, within the 120 s bound; keys live beside the ring, for the dedupe window.
    expect(price!.servedMessages).toBe(500);
    expect(price!.servedSeconds).toBe(100);
    expect(price!.dedupeSeconds).toBe(120);
  });

  it("prices the many-rooms model's ephemeral rooms (--ephemeral) at no row written", async () => {
    await promisify(execFile)(process.execPath, [`${repo}load/build.mjs`], { timeout: 120_000 });
    const args = [`${repo}load/dist/capacity.js`, "--connections", "4000", "--room-size", "20", "--msgs-per-conn", "0.25", "--json"];
    const stored = JSON.parse((await promisify(execFile)(process.execPath, args, { timeout: 60_000 })).stdout) as { cost: { lines: { item: string; quantity: number }[] } };
    const ephemeral = JSON.parse((await promisify(execFile)(process.execPath, [...args, "--ephemeral"], { timeout: 60_000 })).stdout) as typeof stored;
    const rows = (r: typeof stored) => r.cost.lines.find((l) => l.item.startsWith("SQLite rows written"))?.quantity;
    expect(rows(stored)).toBeGreaterThan(0);
    expect(rows(ephemeral)).toBe(0);
  });

  it("prints the section from npm run capacity", async () => {
    // What `npm run capacity` runs: the tool's build, then the tool.
    await promisify(execFile)(process.execPath, [`${repo}load/build.mjs`], { timeout: 120_000 });
    const { stdout } = await promisify(execFile)(process.execPath, [`${repo}load/dist/capacity.js`, "--history-rules", JSON.stringify([{ prefix: "chat:", maxMessages: 10_000 }]), "--rule-rooms", "chat:=10@1", "--rule-rooms", "*=5@1"], { timeout: 60_000 });
    expect(stdout).toMatch(/History rules \(HISTORY_RULES: 1 rule;/);
    expect(stdout).toMatch(/chat:\s+chat: \(10,000 \/ 2 min\)\s+10/);
    expect(stdout).toMatch(/\* \(others\)\s+defaults \(1,000 \/ 2 min\)/);
  });
});
