/**
 * The capacity tool's answer in a few lines: does the workload fit, what runs
 * out first, and what it costs, on Cloudflare, on this machine and on
 * fixed-price servers. The tables and sources behind each figure follow with
 * --details (render.ts).
 */
import type { CostEstimate } from "./cloudflare-cost";
import { fmt, percent, usd, usdPerMillion } from "./format";
import { deliveriesPerSecond, mostUsed, type ResourceUse, type VpsEstimate, type Workload } from "./model";

export interface VerdictInputs {
  workload: Workload;
  /** One room's resources on Cloudflare (rooms scale out, so a room that fits is a workload that fits). */
  cloudflare: readonly ResourceUse[];
  cost: CostEstimate;
  /** This machine's resources for the whole workload, self-hosted. */
  selfHosted: readonly ResourceUse[];
  hostName: string;
  vps: VpsEstimate;
}

/** How a table's most used resource reads: fits (with its share) or does not (with the ceiling it allows). */
function fit(resources: readonly ResourceUse[]): string {
  const top = mostUsed(resources);
  const ceiling = `it allows up to ${fmt(top.ceiling)} ${top.ceilingOf}`;
  return top.used > 1 ? `does NOT fit: ${top.resource} at ${percent(top.used)} (${ceiling})` : `fits; most used: ${top.resource}, ${percent(top.used)} (${ceiling})`;
}

export function verdict(v: VerdictInputs): string[] {
  const w = v.workload;
  const rooms = Math.ceil(w.connections / w.roomSize);
  const biggest = [...v.cost.lines].sort((a, b) => b.usd - a.usd)[0];
  const perMillion = usdPerMillion((v.cost.totalUsd / v.cost.deliveriesPerMonth) * 1e6);
  return [
    `${fmt(w.connections)} connections in ${fmt(rooms)} rooms of ${fmt(w.roomSize)}, ${w.messagesPerConnection} msg/s each: ${fmt(deliveriesPerSecond(w))} deliveries/s`,
    `Cloudflare: ${fit(v.cloudflare)}`,
    `  ${usd(v.cost.totalUsd)}/month, ${perMillion} per million delivered${biggest && biggest.usd > 0 ? `; largest item: ${biggest.item}, ${usd(biggest.usd)}` : ""}`,
    `Self-hosted on ${v.hostName}: ${fit(v.selfHosted)}`,
    `Fixed-price servers ($${v.vps.offer.monthlyUsd}/month each): ${v.vps.servers}, ${usd(v.vps.monthlyUsd)}/month with transfer (bound by ${v.vps.bindingResource})`,
  ];
}
