/**
 * How much history a room keeps, by its name: the `HISTORY_RULES` var's rules
 * (a JSON array of `{"prefix", "maxMessages", "maxAgeSeconds", "store"}`; the
 * longest prefix that starts a room's name wins), else HISTORY_MAX_MESSAGES and
 * HISTORY_MAX_AGE_SECONDS. Read once per environment (common/settings.ts);
 * a room asks once, when it starts, and the edge when a socket asks to rewind.
 *
 * `"store": false` makes a rule's rooms ephemeral: they keep their messages
 * in memory only (durable-objects/room/memory-history.ts), within the same
 * bounds, and write no row per message.
 *
 * A rule that breaks its bounds is refused with a `bad_config` log line and
 * ignored, as a bad limit var is; the other rules still apply.
 */
import { isValidRoomName } from "../protocol";
import { isCacheChannelRoom, PUSHER_CACHE_SECONDS } from "../protocol/pusher";
import { logEvent } from "./log";

/**
 * Most slots a room's history ring may have (HISTORY_MAX_MESSAGES and every
 * rule's maxMessages). A slot holds one flush's row of at most 256 KiB of
 * messages, and rows are never deleted, only overwritten: 32,768 full rows are
 * 8 GiB, inside the platform's 10 GB per object with room for the rest of the
 * room's storage. A ring that large also stays quick to search (15 point
 * reads find any row).
 */
export const MAX_HISTORY_MESSAGES = 32_768;
/** Longest age bound a rule may set: a year. A room keeps its storage until its newest message is this old. */
export const MAX_HISTORY_AGE_SECONDS = 31_536_000;
/**
 * Bytes of messages an ephemeral room keeps in memory at most, whatever its
 * maxMessages (the oldest go first): as much as a leaf keeps of its room, a
 * sixteenth of an object's 128 MB.
 */
export const MEMORY_HISTORY_MAX_BYTES = 8 * 1024 * 1024;
/** Most rules HISTORY_RULES may hold: a room's bounds are looked up in them one by one. */
export const MAX_HISTORY_RULES = 100;

export interface HistoryRule {
  prefix: string;
  maxMessages?: number;
  maxAgeSeconds?: number;
  /** False: the rule's rooms keep their messages in memory only (ephemeral rooms). */
  store?: boolean;
}

/** A room's history bounds, where it keeps them, and the rule they came from (null: the HISTORY_MAX_* vars). */
export interface Retention {
  maxMessages: number;
  maxAgeSeconds: number;
  /** Whether the room stores its messages in SQLite (true) or keeps them in memory only (an ephemeral room). */
  store: boolean;
  rule: string | null;
}

const RULE_FIELDS = new Set(["prefix", "maxMessages", "maxAgeSeconds", "store"]);

/**
 * The rules of a HISTORY_RULES value, longest prefix first. Absent or empty
 * means none; anything else that is not a JSON array is refused whole; each
 * entry is checked on its own.
 */
export function parseHistoryRules(raw: unknown): HistoryRule[] {
  if (raw === undefined || raw === null || raw === "") return [];
  let value: unknown = raw;
  if (typeof raw === "string") {
    try {
      value = JSON.parse(raw);
    } catch {
      logEvent("bad_config", { var: "HISTORY_RULES", problem: "not JSON", value: raw.slice(0, 200) });
      return [];
    }
  }
  if (!Array.isArray(value)) {
    logEvent("bad_config", { var: "HISTORY_RULES", problem: "must be a JSON array of rules" });
    return [];
  }
  const rules: HistoryRule[] = [];
  const seen = new Set<string>();
  for (const [index, entry] of value.entries()) {
    const problem = ruleProblem(entry, seen);
    if (problem === null && rules.length >= MAX_HISTORY_RULES) {
      logEvent("bad_config", { var: "HISTORY_RULES", index, problem: `more than ${MAX_HISTORY_RULES} rules: the rest are ignored` });
      break;
    }
    if (problem !== null) {
      logEvent("bad_config", { var: "HISTORY_RULES", index, problem, entry: JSON.stringify(entry)?.slice(0, 200) ?? null });
      continue;
    }
    const rule = entry as HistoryRule;
    seen.add(rule.prefix);
    rules.push({
      prefix: rule.prefix,
      ...(rule.maxMessages !== undefined ? { maxMessages: rule.maxMessages } : {}),
      ...(rule.maxAgeSeconds !== undefined ? { maxAgeSeconds: rule.maxAgeSeconds } : {}),
      ...(rule.store !== undefined ? { store: rule.store } : {}),
    });
  }
  // Longest first, so the first rule that matches is the most specific one.
  return rules.sort((a, b) => b.prefix.length - a.prefix.length);
}

/**
 * The history bounds of room `room`: its longest matching rule's, each bound it leaves out from
 * the defaults. A Pusher cache channel's room whose rule sets no age bound (or that no rule names)
 * keeps its messages at least as long as Pusher keeps a cache channel's last event: an ephemeral
 * rule for `pusher:` rooms keeps it in memory that long too.
 */
export function retentionFor(
  room: string,
  rules: readonly HistoryRule[],
  defaults: { HISTORY_MAX_MESSAGES: number; HISTORY_MAX_AGE_SECONDS: number },
): Retention {
  const rule = rules.find((r) => room.startsWith(r.prefix));
  const ageFloor = isCacheChannelRoom(room) ? PUSHER_CACHE_SECONDS : 0;
  return {
    maxMessages: Math.max(1, rule?.maxMessages ?? defaults.HISTORY_MAX_MESSAGES),
    maxAgeSeconds: rule?.maxAgeSeconds ?? Math.max(ageFloor, defaults.HISTORY_MAX_AGE_SECONDS),
    store: rule?.store ?? true,
    rule: rule?.prefix ?? null,
  };
}

function ruleProblem(entry: unknown, seen: ReadonlySet<string>): string | null {
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) return "a rule is an object";
  const fields = entry as Record<string, unknown>;
  const unknown = Object.keys(fields).find((key) => !RULE_FIELDS.has(key));
  if (unknown !== undefined) return `unknown field ${JSON.stringify(unknown)} (a rule has prefix, maxMessages, maxAgeSeconds, store)`;
  const { prefix, maxMessages, maxAgeSeconds, store } = fields;
  // A prefix is the start of a room name, so it follows the names' rules.
  if (typeof prefix !== "string" || !isValidRoomName(prefix)) return "prefix must be the start of a room name (1-64 letters, digits, . _ : ~ -, starting with a letter or digit)";
  if (seen.has(prefix)) return `prefix ${JSON.stringify(prefix)} has a rule already`;
  if (maxMessages === undefined && maxAgeSeconds === undefined && store === undefined) return "a rule sets maxMessages, maxAgeSeconds, store, or several of them";
  if (store !== undefined && typeof store !== "boolean") return "store must be true or false";
  if (maxMessages !== undefined && !wholeIn(maxMessages, 1, MAX_HISTORY_MESSAGES)) return `maxMessages must be a whole number from 1 to ${MAX_HISTORY_MESSAGES}`;
  if (maxAgeSeconds !== undefined && !wholeIn(maxAgeSeconds, 0, MAX_HISTORY_AGE_SECONDS)) return `maxAgeSeconds must be a whole number from 0 to ${MAX_HISTORY_AGE_SECONDS}`;
  return null;
}

function wholeIn(value: unknown, min: number, max: number): boolean {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= min && value <= max;
}
