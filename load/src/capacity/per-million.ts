/**
 * Cost per million delivered messages: this service's estimate beside the
 * list prices of hosted services, each computed the way that service counts
 * (a publish and each delivery, per day or per month, capped or metered).
 */
import type { CostEstimate } from "./cloudflare-cost";
import { fmt, usd } from "./format";
import { referenceCpuPerDeliveryUs, type HostedPlan, type HostedService, type SelfHostedReference } from "./hosted-pricing";
import { deliveriesPerSecond, type VpsEstimate, type VpsOffer, type Workload } from "./model";
import { SECONDS_PER_MONTH, type PriceSource } from "./pricing";

export interface PerMillionLine {
  service: string;
  /** The plan the figure is for ("" when none applies). */
  plan: string;
  /** USD per million delivered messages for this workload; undefined when it cannot be computed from published figures. */
  usdPerMillionDelivered: number | undefined;
  /** What this workload would cost a month on that plan, when a listed, priced plan fits it. */
  monthlyUsd: number | undefined;
  /** How the figure was computed. */
  basis: string;
  /** Whether and where the workload fits the listed plans. */
  fits: string;
  messageMeaning: string;
  sources: PriceSource[];
  notes: string[];
}

const DAY = 86_400;

/** Counted messages per delivered message: a publish to F sockets counts perPublish + perDelivery × F. */
export function countedPerDelivered(s: HostedService, roomSize: number): number {
  return (s.counting.perPublish + s.counting.perDelivery * roomSize) / roomSize;
}

/** Counted messages per second of the workload under a service's counting. */
export function countedPerSecond(s: HostedService, w: Workload): number {
  return w.connections * w.messagesPerConnection * (s.counting.perPublish + s.counting.perDelivery * w.roomSize);
}

function priced(plans: readonly HostedPlan[]): HostedPlan[] {
  return plans.filter((p) => p.monthlyUsd !== undefined).sort((a, b) => (a.monthlyUsd as number) - (b.monthlyUsd as number));
}

function planFits(p: HostedPlan, w: Workload, perSecond: number): boolean {
  if (p.concurrentConnections !== undefined && w.connections > p.concurrentConnections) return false;
  if (p.messagesPerSecond !== undefined && perSecond > p.messagesPerSecond) return false;
  if (p.messagesPerDay !== undefined && perSecond * DAY > p.messagesPerDay) return false;
  if (p.messagesPerMonth !== undefined && perSecond * SECONDS_PER_MONTH > p.messagesPerMonth) return false;
  return true;
}

function limitsOf(p: HostedPlan): string {
  const parts: string[] = [];
  if (p.messagesPerSecond !== undefined) parts.push(`${fmt(p.messagesPerSecond)} msg/s`);
  if (p.messagesPerDay !== undefined) parts.push(`${fmt(p.messagesPerDay)} msg/day`);
  if (p.messagesPerMonth !== undefined) parts.push(`${fmt(p.messagesPerMonth)} msg/month`);
  if (p.concurrentConnections !== undefined) parts.push(`${fmt(p.concurrentConnections)} connections`);
  return parts.join(", ");
}

/** A metered service (per counted message, per connection minute, per channel minute, plus a package fee). */
export function meteredEstimate(w: Workload, s: HostedService): PerMillionLine {
  const perSecond = countedPerSecond(s, w);
  const counted = perSecond * SECONDS_PER_MONTH;
  const deliveries = deliveriesPerSecond(w) * SECONDS_PER_MONTH;
  const rooms = w.channels ?? Math.ceil(w.connections / w.roomSize);
  const minutes = SECONDS_PER_MONTH / 60;
  const messagesUsd = (counted / 1e6) * (s.usdPerMillionMessages ?? 0);
  const connectionUsd = ((w.connections * minutes) / 1e6) * (s.usdPerMillionConnectionMinutes ?? 0);
  const channelUsd = ((rooms * minutes) / 1e6) * (s.usdPerMillionChannelMinutes ?? 0);
  const usage = messagesUsd + connectionUsd + channelUsd;
  const plan = priced(s.plans).find((p) => planFits(p, w, perSecond));
  const unpriced = s.plans.find((p) => p.monthlyUsd === undefined);
  const base = plan?.monthlyUsd ?? 0;
  const perMillion = s.usdPerMillionMessages === undefined ? undefined : ((usage + base) / deliveries) * 1e6;
  const largest = priced(s.plans).at(-1);
  return {
    service: s.service,
    plan: plan?.plan ?? unpriced?.plan ?? "",
    usdPerMillionDelivered: perMillion,
    monthlyUsd: plan ? usage + base : undefined,
    basis:
      `${usd(s.usdPerMillionMessages ?? 0)} per million counted messages × ${countedPerDelivered(s, w.roomSize).toFixed(3)} counted per delivery` +
      ` + connection minutes ${usd(connectionUsd)} + channel minutes ${usd(channelUsd)} a month${plan ? ` + ${plan.plan} ${usd(base)}` : ""}, at the first-tier list price`,
    fits: plan
      ? `fits ${plan.plan} (${limitsOf(plan)}): ${usd(usage + base)}/month`
      : `needs ${fmt(perSecond)} counted msg/s and ${fmt(w.connections)} connections: beyond ${largest ? `${largest.plan} (${limitsOf(largest)})` : "every listed plan"}, so ${unpriced?.plan ?? "a custom plan"} (price not published; ${usd(usage)}/month at list price before volume discounts)`,
    messageMeaning: s.messageMeaning,
    sources: s.sources,
    notes: s.notes,
  };
}

/** A service of flat plans with a daily cap: the price of a counted message at full use of the cap. */
export function cappedPlanEstimate(w: Workload, s: HostedService): PerMillionLine {
  const perSecond = countedPerSecond(s, w);
  const deliveries = deliveriesPerSecond(w) * SECONDS_PER_MONTH;
  const ratio = countedPerDelivered(s, w.roomSize);
  const paid = priced(s.plans).filter((p) => (p.monthlyUsd ?? 0) > 0 && p.messagesPerDay !== undefined);
  const atCap = (p: HostedPlan): number => ((p.monthlyUsd as number) / (((p.messagesPerDay as number) * SECONDS_PER_MONTH) / DAY / 1e6)) * ratio;
  const fitting = priced(s.plans).find((p) => planFits(p, w, perSecond));
  const cheapest = [...paid].sort((a, b) => atCap(a) - atCap(b))[0];
  const largest = paid.at(-1);
  const unpriced = s.plans.find((p) => p.monthlyUsd === undefined);
  const sources = [...new Set([...s.sources, ...(fitting ?? cheapest)?.sources ?? []])];
  if (fitting && fitting.monthlyUsd !== undefined) {
    return {
      service: s.service,
      plan: fitting.plan,
      usdPerMillionDelivered: (fitting.monthlyUsd / deliveries) * 1e6,
      monthlyUsd: fitting.monthlyUsd,
      basis: `${fitting.plan} ${usd(fitting.monthlyUsd)}/month over this workload's ${fmt(deliveries / 1e6)} million deliveries`,
      fits: `fits ${fitting.plan} (${limitsOf(fitting)}): ${usd(fitting.monthlyUsd)}/month`,
      messageMeaning: s.messageMeaning,
      sources,
      notes: s.notes,
    };
  }
  return {
    service: s.service,
    plan: cheapest?.plan ?? "",
    usdPerMillionDelivered: cheapest ? atCap(cheapest) : undefined,
    monthlyUsd: undefined,
    basis: cheapest
      ? `${cheapest.plan} ${usd(cheapest.monthlyUsd as number)}/month ÷ ${fmt((cheapest.messagesPerDay as number) / 1e6)} million counted messages a day × 30 days, × ${ratio.toFixed(3)} counted per delivery: the lowest price per message of the listed plans, at full use of the cap every day`
      : "no priced plan with a daily cap",
    fits: `needs ${fmt(perSecond * DAY)} counted messages/day and ${fmt(w.connections)} connections: beyond ${largest ? `${largest.plan} (${limitsOf(largest)})` : "every listed plan"}, so ${unpriced?.plan ?? "a custom plan"} (price not published)`,
    messageMeaning: s.messageMeaning,
    sources,
    notes: s.notes,
  };
}

/** The estimate that fits how a service bills. */
export function hostedEstimate(w: Workload, s: HostedService): PerMillionLine {
  return s.usdPerMillionMessages !== undefined ? meteredEstimate(w, s) : cappedPlanEstimate(w, s);
}

/**
 * A self-hosted server without a per-message price: its benchmark's CPU per
 * delivery priced at the fixed-price server's cost of a vCPU-second. A derived
 * figure (CPU only), not a list price.
 */
export function referenceEstimate(w: Workload, r: SelfHostedReference, vps: VpsOffer): PerMillionLine {
  const cpu = referenceCpuPerDeliveryUs(r);
  const usdPerCpuSecond = vps.monthlyUsd / (vps.serverThreads * SECONDS_PER_MONTH);
  const perMillion = cpu.allIn * usdPerCpuSecond; // µs per delivery × 1e6 deliveries = that many CPU-seconds
  const cpus = (deliveriesPerSecond(w) * cpu.allIn) / 1e6;
  return {
    service: r.service,
    plan: "",
    usdPerMillionDelivered: perMillion,
    monthlyUsd: undefined,
    basis: `derived, not a list price: its benchmark's ${fmt(cpu.allIn)} µs of CPU per delivery (${fmt(cpu.marginal)} µs beyond the idle connections) × ${usd(vps.monthlyUsd)} per vCPU-month; CPU only (no memory, transfer or redundancy)`,
    fits: `this workload's ${fmt(deliveriesPerSecond(w))} deliveries/s would take ~${fmt(cpus)} CPUs at that rate (${r.setup})`,
    messageMeaning: `${r.licence}`,
    sources: r.sources,
    notes: r.notes,
  };
}

/** This service on Cloudflare: the whole monthly bill over the deliveries it makes. */
export function cloudflarePerMillion(cost: CostEstimate): PerMillionLine {
  const perMillion = (cost.totalUsd / cost.deliveriesPerMonth) * 1e6;
  const rows = cost.lines.find((l) => l.item.startsWith("SQLite rows written"));
  return {
    service: "this service on Cloudflare",
    plan: "Workers Paid",
    usdPerMillionDelivered: perMillion,
    monthlyUsd: cost.totalUsd,
    basis: `the estimated bill ${usd(cost.totalUsd)}/month over ${fmt(cost.deliveriesPerMonth / 1e6)} million deliveries (outgoing messages are free; ${usd(rows?.usd ?? 0)} of it is SQLite rows written)`,
    fits: `one Durable Object per room; ${fmt(cost.rooms)} rooms`,
    messageMeaning: "billed: incoming socket messages (publishes, acks, heartbeats) at 20:1, rows written per flush; deliveries are not billed",
    sources: [],
    notes: [],
  };
}

/** This service self-hosted on fixed-price servers: servers and transfer over the deliveries. */
export function vpsPerMillion(e: VpsEstimate, w: Workload, label: string): PerMillionLine {
  const deliveries = deliveriesPerSecond(w) * SECONDS_PER_MONTH;
  return {
    service: label,
    plan: e.offer.name,
    usdPerMillionDelivered: (e.monthlyUsd / deliveries) * 1e6,
    monthlyUsd: e.monthlyUsd,
    basis: `${e.servers} × ${usd(e.offer.monthlyUsd)} servers (bound by ${e.bindingResource}) + ${usd(e.transferOverageUsd)} transfer a month`,
    fits: e.fitsOneRoom ? "every room fits one thread" : "a room this size does not fit one thread",
    messageMeaning: "no per-message price: servers and outgoing transfer",
    sources: [],
    notes: [],
  };
}
