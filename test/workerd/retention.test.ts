import { describe, expect, it, vi } from "vitest";
import { PUSHER_CACHE_SECONDS, pusherRoom } from "../../protocol/pusher";
import { MAX_HISTORY_MESSAGES, MAX_HISTORY_RULES, parseHistoryRules, retentionFor } from "../../common/retention";
import { historyRules, readLimits } from "../../common/settings";

/** HISTORY_RULES: history bounds by room-name prefix, and what a bad rule comes to. */

const DEFAULTS = { HISTORY_MAX_MESSAGES: 1000, HISTORY_MAX_AGE_SECONDS: 120 };

function badConfigLines(run: () => void): Record<string, unknown>[] {
  const log = vi.spyOn(console, "log").mockImplementation(() => {});
  try {
    run();
    return log.mock.calls.map((c) => JSON.parse(String(c[0])) as Record<string, unknown>).filter((l) => l.event === "bad_config");
  } finally {
    log.mockRestore();
  }
}

describe("HISTORY_RULES", () => {
  const rules = parseHistoryRules(
    JSON.stringify([
      { prefix: "chat:", maxMessages: 10_000, maxAgeSeconds: 86_400 },
      { prefix: "price:", maxAgeSeconds: 60 },
      { prefix: "chat:vip:", maxMessages: 20_000 },
    ]),
  );

  it("gives a room the bounds of its longest matching prefix, each bound it leaves out from the defaults", () => {
    expect(retentionFor("chat:lobby", rules, DEFAULTS)).toEqual({ maxMessages: 10_000, maxAgeSeconds: 86_400, store: true, rule: "chat:" });
    expect(retentionFor("chat:vip:1", rules, DEFAULTS)).toEqual({ maxMessages: 20_000, maxAgeSeconds: 120, store: true, rule: "chat:vip:" });
    expect(retentionFor("price:eur", rules, DEFAULTS)).toEqual({ maxMessages: 1000, maxAgeSeconds: 60, store: true, rule: "price:" });
    expect(retentionFor("lobby", rules, DEFAULTS)).toEqual({ maxMessages: 1000, maxAgeSeconds: 120, store: true, rule: null });
    // A prefix is the start of the name, not any part of it.
    expect(retentionFor("my-chat:x", rules, DEFAULTS).rule).toBeNull();
  });

  it("keeps a Pusher cache channel's last event as long as Pusher does, in an ephemeral room too, unless its rule sets an age", () => {
    const pusher = parseHistoryRules(JSON.stringify([{ prefix: "pusher:", store: false }, { prefix: "pusher:1:cache-short", maxAgeSeconds: 30 }]));
    expect(retentionFor(pusherRoom("1", "cache-ticker"), pusher, DEFAULTS)).toEqual({ maxMessages: 1000, maxAgeSeconds: PUSHER_CACHE_SECONDS, store: false, rule: "pusher:" });
    expect(retentionFor(pusherRoom("1", "orders"), pusher, DEFAULTS)).toEqual({ maxMessages: 1000, maxAgeSeconds: 120, store: false, rule: "pusher:" });
    expect(retentionFor(pusherRoom("1", "cache-short"), pusher, DEFAULTS).maxAgeSeconds).toBe(30);
    expect(retentionFor(pusherRoom("1", "cache-ticker"), [], DEFAULTS).maxAgeSeconds).toBe(PUSHER_CACHE_SECONDS);
  });

  it("reads them once per environment, beside the limits", () => {
    const env = { HISTORY_RULES: JSON.stringify([{ prefix: "a", maxMessages: 5 }]), HISTORY_MAX_MESSAGES: "50" };
    expect(historyRules(env)).toEqual([{ prefix: "a", maxMessages: 5 }]);
    expect(retentionFor("abc", historyRules(env), readLimits(env)).maxMessages).toBe(5);
    expect(retentionFor("bcd", historyRules(env), readLimits(env)).maxMessages).toBe(50);
    expect(historyRules({})).toEqual([]);
  });

  it("refuses what is not a JSON array as a whole, with a bad_config line", () => {
    for (const raw of ["[{", '{"prefix":"a"}', "12"]) {
      let parsed: unknown;
      const lines = badConfigLines(() => (parsed = parseHistoryRules(raw)));
      expect(parsed, raw).toEqual([]);
      expect(lines, raw).toHaveLength(1);
      expect(lines[0]).toMatchObject({ var: "HISTORY_RULES" });
    }
  });

  it("refuses each bad rule on its own, logged, and keeps the good ones", () => {
    const entries = [
      { prefix: "ok:", maxMessages: 10 },
      "not an object",
      { prefix: "", maxMessages: 10 },
      { prefix: "-dash", maxMessages: 10 },
      { prefix: "has space", maxMessages: 10 },
      { prefix: "none:" },
      { prefix: "zero:", maxMessages: 0 },
      { prefix: "big:", maxMessages: MAX_HISTORY_MESSAGES + 1 },
      { prefix: "frac:", maxMessages: 1.5 },
      { prefix: "text:", maxMessages: "10" },
      { prefix: "old:", maxAgeSeconds: -1 },
      { prefix: "typo:", maxMessage: 10 },
      { prefix: "ok:", maxMessages: 20 },
      { prefix: "edge:", maxMessages: MAX_HISTORY_MESSAGES, maxAgeSeconds: 0 },
    ];
    let parsed: unknown;
    const lines = badConfigLines(() => (parsed = parseHistoryRules(JSON.stringify(entries))));
    expect(parsed).toEqual([
      { prefix: "edge:", maxMessages: MAX_HISTORY_MESSAGES, maxAgeSeconds: 0 },
      { prefix: "ok:", maxMessages: 10 },
    ]);
    expect(lines.map((l) => l.index)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  });

  it('reads "store": false as an ephemeral rule, alone or beside bounds, and refuses a store that is not true or false', () => {
    let parsed: unknown;
    const entries = [
      { prefix: "price:", store: false },
      { prefix: "cursor:", store: false, maxMessages: 20, maxAgeSeconds: 5 },
      { prefix: "chat:", store: true, maxMessages: 10 },
      { prefix: "bad:", store: "no" },
      { prefix: "worse:", store: 0, maxMessages: 5 },
    ];
    const lines = badConfigLines(() => (parsed = parseHistoryRules(JSON.stringify(entries))));
    expect(lines.map((l) => l.index)).toEqual([3, 4]);
    expect(lines[0]?.problem).toMatch(/store must be true or false/);
    const rules = parsed as ReturnType<typeof parseHistoryRules>;
    expect(retentionFor("price:eur", rules, DEFAULTS)).toEqual({ maxMessages: 1000, maxAgeSeconds: 120, store: false, rule: "price:" });
    expect(retentionFor("cursor:doc1", rules, DEFAULTS)).toEqual({ maxMessages: 20, maxAgeSeconds: 5, store: false, rule: "cursor:" });
    expect(retentionFor("chat:x", rules, DEFAULTS).store).toBe(true);
    expect(retentionFor("bad:x", rules, DEFAULTS).store).toBe(true);
  });

  it(`keeps at most ${MAX_HISTORY_RULES} rules`, () => {
    const many = Array.from({ length: MAX_HISTORY_RULES + 5 }, (_, i) => ({ prefix: `p${i}:`, maxMessages: 10 }));
    let parsed: unknown[] = [];
    const lines = badConfigLines(() => (parsed = parseHistoryRules(JSON.stringify(many))));
    expect(parsed).toHaveLength(MAX_HISTORY_RULES);
    expect(lines).toHaveLength(1);
  });

  it("bounds HISTORY_MAX_MESSAGES itself to what a ring can hold", () => {
    const lines = badConfigLines(() => expect(readLimits({ HISTORY_MAX_MESSAGES: String(MAX_HISTORY_MESSAGES + 1) }).HISTORY_MAX_MESSAGES).toBe(1000));
    expect(lines).toHaveLength(1);
    expect(readLimits({ HISTORY_MAX_MESSAGES: String(MAX_HISTORY_MESSAGES) }).HISTORY_MAX_MESSAGES).toBe(MAX_HISTORY_MESSAGES);
  });
});
