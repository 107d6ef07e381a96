/**
 * What a set of history rules (HISTORY_RULES, docs/history.md) costs: per
 * group of rooms (a name prefix, its room count and message rate), the rows
 * written, the data stored, how far back history and idempotency keys reach,
 * and the rows a history page and a wake-up read.
 *
 * The model follows the ring (durable-objects/room/storage/history.ts): a room's
 * history is `maxMessages` slots of one flush each, never deleted, only
 * overwritten, so a busy room stores maxMessages rows whatever its age bound
 * (the age bound says what is served, not what is kept); a room that empties
 * gives its storage back once its newest message is older than the bound.
 * An ephemeral room (`"store": false`) writes and stores nothing: its last
 * maxMessages messages (at most MEMORY_HISTORY_MAX_BYTES) live in memory,
 * and its keys as long as the room does (memory-history.ts).
 */
import { MEMORY_HISTORY_MAX_BYTES, retentionFor, type HistoryRule, type Retention } from "../../../common/retention";
import { overage, SECONDS_PER_MONTH, type Pricing } from "./pricing";

/** Rooms whose names start with `prefix` ("" for every other room), each with `messagesPerSecond`. */
export interface RoomGroup {
  prefix: string;
  rooms: number;
  messagesPerSecond: number;
}

export interface RetentionInputs {
  rules: readonly HistoryRule[];
  defaults: { HISTORY_MAX_MESSAGES: number; HISTORY_MAX_AGE_SECONDS: number };
  /** PUBLISH_DEDUPE_SECONDS. */
  dedupeSeconds: number;
  payloadBytes: number;
  /** Idempotency key bytes per message (0 when publishes carry none): each adds its key and a 16-character hash to its row. */
  keyBytes: number;
  /** Rows written per message (1 ÷ messages per flush). */
  rowsPerMessage: number;
}

export interface GroupCost {
  group: RoomGroup;
  retention: Retention;
  rowsWrittenPerMonth: number;
  /** Bytes stored over the group's rooms once their rings are full. */
  storedBytes: number;
  /** Messages history serves a client (resume, catch-up, pages): the ring's, or what arrived within the age bound. */
  servedMessages: number;
  servedSeconds: number;
  /** How long an idempotency key is recognised at this rate. */
  dedupeSeconds: number;
  /** Rows a 100-message history page reads. */
  rowsPerPage: number;
  /** Rows a waking room reads to rebuild its keys (when publishes carry keys), plus its binary search. */
  rowsPerWake: number;
}

export interface RetentionCost {
  groups: GroupCost[];
  rowsWrittenPerMonth: number;
  rowsWrittenUsd: number;
  storedBytes: number;
  /** Decimal GB (10^9 bytes), as storage is billed. */
  storedGb: number;
  storedUsd: number;
}

/** Bytes of a stored message beyond its data: the event's fields and its row's share of the columns. */
export const STORED_OVERHEAD_BYTES = 100;
/** A key's entry beside its message: the key, its hash (16), its place and separators. */
const KEY_ENTRY_OVERHEAD_BYTES = 22;

export function retentionCost(groups: readonly RoomGroup[], inputs: RetentionInputs, pricing: Pricing): RetentionCost {
  const costs = groups.map((group) => groupCost(group, inputs));
  const rows = costs.reduce((sum, g) => sum + g.rowsWrittenPerMonth, 0);
  const storedBytes = costs.reduce((sum, g) => sum + g.storedBytes, 0);
  const stored = storedBytes / 1e9;
  return {
    groups: costs,
    rowsWrittenPerMonth: rows,
    rowsWrittenUsd: overage(rows, pricing.sqliteRowsWrittenIncluded, pricing.sqliteRowsWrittenPerMillion),
    storedBytes,
    storedGb: stored,
    storedUsd: Math.max(0, stored - pricing.sqliteStoredGbIncluded) * pricing.sqliteStoredPerGbMonth,
  };
}

function groupCost(group: RoomGroup, inputs: RetentionInputs): GroupCost {
  // A prefix names the rooms it starts; "" matches no rule (every rule's prefix has a character).
  const retention = retentionFor(group.prefix, inputs.rules, inputs.defaults);
  const rate = group.messagesPerSecond;
  const messagesPerRow = 1 / inputs.rowsPerMessage;
  const rowsPerSecond = rate * inputs.rowsPerMessage;
  const keyBytes = inputs.keyBytes > 0 ? inputs.keyBytes + KEY_ENTRY_OVERHEAD_BYTES : 0;
  const messageBytes = inputs.payloadBytes + STORED_OVERHEAD_BYTES + keyBytes;
  if (!retention.store) {
    const held = Math.min(retention.maxMessages, Math.floor(MEMORY_HISTORY_MAX_BYTES / (inputs.payloadBytes + STORED_OVERHEAD_BYTES)));
    const heldSeconds = rate > 0 ? held / rate : Number.POSITIVE_INFINITY;
    return {
      group,
      retention,
      rowsWrittenPerMonth: 0,
      storedBytes: 0,
      servedMessages: rate > 0 ? Math.min(held, rate * retention.maxAgeSeconds) : 0,
      servedSeconds: Math.min(retention.maxAgeSeconds, heldSeconds),
      // Keys live in memory beside the ring, not in it: the dedupe window alone bounds them (while the room lives).
      dedupeSeconds: inputs.keyBytes > 0 ? inputs.dedupeSeconds : 0,
      rowsPerPage: 0,
      rowsPerWake: 0,
    };
  }
  const ringMessages = retention.maxMessages * messagesPerRow;
  // A ring is full once it has taken maxMessages flushes; rooms that publish keep it full.
  const storedPerRoom = rate > 0 ? ringMessages * messageBytes : 0;
  const ringSeconds = rate > 0 ? ringMessages / rate : Number.POSITIVE_INFINITY;
  const servedSeconds = Math.min(retention.maxAgeSeconds, ringSeconds);
  const dedupeSeconds = inputs.keyBytes > 0 ? Math.min(inputs.dedupeSeconds, servedSeconds) : 0;
  return {
    group,
    retention,
    rowsWrittenPerMonth: group.rooms * rowsPerSecond * SECONDS_PER_MONTH,
    storedBytes: group.rooms * storedPerRoom,
    servedMessages: rate > 0 ? Math.min(ringMessages, rate * retention.maxAgeSeconds) : 0,
    servedSeconds,
    dedupeSeconds,
    rowsPerPage: Math.min(100, Math.ceil(100 * inputs.rowsPerMessage)),
    rowsPerWake: inputs.keyBytes > 0 ? Math.ceil(Math.min(retention.maxMessages, rowsPerSecond * dedupeSeconds)) + Math.ceil(Math.log2(retention.maxMessages + 1)) : 0,
  };
}

/** `PREFIX=ROOMS@RATE` (`*` for every other room), as `--rule-rooms` takes it. */
export function parseRoomGroup(text: string): RoomGroup {
  const m = /^(.*)=(\d+(?:\.\d+)?)@(\d+(?:\.\d+)?)$/.exec(text);
  if (!m) throw new Error(`--rule-rooms takes PREFIX=ROOMS@MESSAGES_PER_SECOND (e.g. chat:=2000@0.5, *=100@1), got ${text}`);
  const prefix = m[1] === "*" ? "" : (m[1] as string);
  return { prefix, rooms: Number(m[2]), messagesPerSecond: Number(m[3]) };
}
