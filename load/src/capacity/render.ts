/** The capacity tool's text output: resource tables, the bill, and the cost per million beside hosted services. */
import type { CostEstimate } from "./cloudflare-cost";
import { bitsPerSecond, bytes, cpuPerSecond, fmt, percent, usd, usdPerMillion } from "./format";
import { mostUsed, type ResourceUse } from "./model";
import type { PerMillionLine } from "./per-million";
import type { PriceSource } from "./pricing";

/** A resource's demand or capacity in its own unit. */
export function amount(value: number, unit: ResourceUse["unit"]): string {
  switch (unit) {
    case "bytes":
      return bytes(value);
    case "CPU µs/s":
      return cpuPerSecond(value);
    case "bit/s":
      return bitsPerSecond(value);
    case "requests/s":
      return `${fmt(value)}/s`;
    case "descriptors":
    case "sockets":
      return fmt(value);
  }
}

/**
 * One table: per resource the demand, the capacity, the share used
 * (demand ÷ capacity) and, in its own column, the largest workload that fits.
 */
export function resourceTable(title: string, resources: readonly ResourceUse[]): string {
  const top = mostUsed(resources);
  const head = `  ${"resource".padEnd(26)} ${"demand".padStart(14)} ${"capacity".padStart(14)} ${"used".padStart(8)}   ceiling (all else equal)`;
  const rows = resources.map((r) => {
    const mark = r === top ? "  <- most used" : "";
    const ceiling = `${fmt(r.ceiling)} ${r.ceilingOf}`;
    return `  ${r.resource.padEnd(26)} ${amount(r.demand, r.unit).padStart(14)} ${amount(r.capacity, r.unit).padStart(14)} ${percent(r.used).padStart(8)}   ${ceiling}${mark}\n      ${r.detail}`;
  });
  const verdict = top.used > 1 ? ": DOES NOT FIT" : "";
  return `${title}\n${head}\n${rows.join("\n")}\n  most used: ${top.resource}, ${percent(top.used)} of it${verdict} (used = demand ÷ capacity; the ceiling column is the largest workload that resource alone allows)`;
}

export function costTable(title: string, cost: CostEstimate): string {
  const out = [title];
  const perMillion = (v: number): string => usdPerMillion((v / cost.deliveriesPerMonth) * 1e6);
  out.push(`  ${"item".padEnd(58)} ${"quantity".padStart(16)} ${"unit".padEnd(9)} ${"USD/month".padStart(10)} ${"per M delivered".padStart(16)}`);
  for (const line of cost.lines) {
    out.push(`  ${line.item.padEnd(58)} ${fmt(line.quantity).padStart(16)} ${line.unit.padEnd(9)} ${usd(line.usd).padStart(10)} ${perMillion(line.usd).padStart(16)}`);
  }
  out.push(`  ${"total".padEnd(58)} ${"".padStart(16)} ${"".padEnd(9)} ${usd(cost.totalUsd).padStart(10)} ${perMillion(cost.totalUsd).padStart(16)}`);
  out.push("  assumptions:");
  for (const a of cost.assumptions) out.push(`   - ${a}`);
  return out.join("\n");
}

function sourceLine(s: PriceSource): string {
  return `${s.url} (read ${s.readOn}${s.kind === "secondary" ? ", SECONDARY source" : ""}): ${s.says}`;
}

/** Cost per million delivered messages, this service first, then the hosted services with their sources. */
export function perMillionTable(title: string, lines: readonly PerMillionLine[]): string {
  const out = [title];
  for (const l of lines) {
    const name = l.plan ? `${l.service} (${l.plan})` : l.service;
    out.push(`  ${name.padEnd(48)} ${usdPerMillion(l.usdPerMillionDelivered).padStart(10)} per million delivered`);
    out.push(`      how: ${l.basis}`);
    out.push(`      fit: ${l.fits}`);
    out.push(`      a "message": ${l.messageMeaning}`);
    for (const n of l.notes) out.push(`      note: ${n}`);
    for (const s of l.sources) out.push(`      source: ${sourceLine(s)}`);
  }
  return out.join("\n");
}

export function sourcesList(title: string, sources: readonly PriceSource[]): string {
  return [title, ...sources.map((s) => `  - ${sourceLine(s)}`)].join("\n");
}
