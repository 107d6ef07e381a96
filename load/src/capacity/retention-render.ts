/** The capacity tool's text for a set of history rules (retention.ts). */
import { bytes, fmt, usd } from "./format";
import type { RetentionCost, RetentionInputs } from "./retention";

function seconds(s: number): string {
  if (!Number.isFinite(s)) return "unbounded";
  if (s >= 86_400) return `${fmt(s / 86_400)} d`;
  if (s >= 3600) return `${fmt(s / 3600)} h`;
  if (s >= 60) return `${fmt(s / 60)} min`;
  return `${fmt(s)} s`;
}

export function retentionSection(cost: RetentionCost, inputs: RetentionInputs): string {
  const out: string[] = [];
  out.push(
    `History rules (HISTORY_RULES: ${inputs.rules.length} rule${inputs.rules.length === 1 ? "" : "s"}; ${inputs.payloadBytes} B payload, ${fmt(inputs.rowsPerMessage)} rows per message, ${inputs.keyBytes > 0 ? `${inputs.keyBytes} B idempotency keys, PUBLISH_DEDUPE_SECONDS ${inputs.dedupeSeconds}` : "no idempotency keys"}):`,
  );
  const head = ["rooms", "rule (maxMessages / maxAge)", "rooms", "msg/s each", "rows written/month", "stored", "history reaches", "keys reach", "rows/page", "rows/wake"];
  const lines = cost.groups.map((g) => [
    g.group.prefix === "" ? "* (others)" : g.group.prefix,
    `${g.retention.rule ?? "defaults"} (${fmt(g.retention.maxMessages)} / ${seconds(g.retention.maxAgeSeconds)}${g.retention.store ? "" : ", in memory"})`,
    fmt(g.group.rooms),
    fmt(g.group.messagesPerSecond),
    fmt(g.rowsWrittenPerMonth),
    bytes(g.storedBytes),
    `${fmt(g.servedMessages)} msgs, ${seconds(g.servedSeconds)}`,
    inputs.keyBytes > 0 ? seconds(g.dedupeSeconds) : "-",
    fmt(g.rowsPerPage),
    inputs.keyBytes > 0 ? fmt(g.rowsPerWake) : "0",
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] as string).length)));
  const row = (cells: string[]) => `  ${cells.map((c, i) => (i < 2 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join("  ")}`;
  out.push(row(head), ...lines.map(row));
  out.push(
    `  total: ${fmt(cost.rowsWrittenPerMonth)} rows written a month (${usd(cost.rowsWrittenUsd)} beyond the included 50 M), ${bytes(cost.storedBytes)} stored once rings are full (${usd(cost.storedUsd)} a month beyond the included 5 GB of 10^9 bytes)`,
  );
  out.push(
    "  Rows written follow messages (one per flush), not the rules: a rule moves storage, and how far back resume, pages and keys reach.",
    "  A ring keeps maxMessages rows until they are overwritten, whatever its age bound: a short maxAgeSeconds serves less, it stores as much.",
    "  Keys reach min(PUBLISH_DEDUPE_SECONDS, what history keeps); rows read ($0.001/M) are a page's and a wake's only, and cost next to nothing.",
  );
  if (cost.groups.some((g) => !g.retention.store)) {
    out.push(
      '  "in memory": an ephemeral rule ("store": false) writes no row per message and stores nothing; its ring and keys live while the room does',
      "  (a restart, or an eviction with no socket of its own, starts a new epoch: docs/history.md#ephemeral-rooms).",
    );
  }
  return out.join("\n");
}
