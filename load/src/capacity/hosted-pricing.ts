/**
 * List prices of hosted real-time services, to compare the cost of a
 * delivered message with. Every figure carries the page it was read on and
 * when; a figure that could not be found is absent (undefined), never guessed.
 * Each service counts a "message" differently: `counting` says how many
 * counted messages one publish to F sockets makes.
 */
import type { PriceSource } from "./pricing";

export interface HostedPlan {
  plan: string;
  /** Monthly price, USD; undefined when not published. */
  monthlyUsd: number | undefined;
  /** Counted messages per day before publishes are refused (a hard daily cap). */
  messagesPerDay?: number;
  /** Counted messages per month before traffic is refused. */
  messagesPerMonth?: number;
  /** Counted messages per second across the account (published and received). */
  messagesPerSecond?: number;
  concurrentConnections?: number;
  sources: PriceSource[];
}

export interface HostedService {
  service: string;
  /** How the bill is made: metered per message, or flat plans with caps. */
  model: string;
  /** What one counted "message" is. */
  messageMeaning: string;
  /** Counted messages for one publish delivered to F sockets: perPublish + perDelivery × F. */
  counting: { perPublish: number; perDelivery: number };
  /** USD per million counted messages (metered services; first volume tier). */
  usdPerMillionMessages?: number;
  usdPerMillionConnectionMinutes?: number;
  usdPerMillionChannelMinutes?: number;
  plans: HostedPlan[];
  notes: string[];
  sources: PriceSource[];
}

const READ_ON = "2026-12-01";

const ABLY_RESOURCE_BASED: PriceSource = {
  url: "https://ably.com/docs/platform/pricing/resource-based",
  readOn: READ_ON,
  kind: "provider",
  says: "resource-based pricing = package fee + messages, channel minutes and connection minutes; applies to accounts that signed up before Ably moved to MAU pricing; Standard $29, Pro $399, Enterprise custom; message rate 500 / 2,500 / 10,000 / unlimited per second; 6,000,000 messages a month on Free; 200 / 10,000 / 50,000 / unlimited concurrent connections",
};
const ABLY_RATES: PriceSource = {
  url: "https://github.com/ably/docs/blob/8b283970668673452cab6d1f9c46cb929003ad27/src/pages/docs/platform/pricing/index.mdx",
  readOn: READ_ON,
  kind: "provider",
  says: "messages $2.50 per million (as low as $0.50 with volume), channel and connection minutes $1.00 per million (as low as $0.20); another version of the page lists $2.50 for the first 50 million, then $2.25, $1.95, $1.65, $1.40 and $1.25 over 50 billion",
};
const ABLY_COUNTING: PriceSource = {
  url: "https://ably.com/docs/platform/pricing/message-counting",
  readOn: READ_ON,
  kind: "provider",
  says: "1 inbound message per publish + 1 outbound per subscriber that receives it (1 publish to 10 subscribers = 11); echo to the publisher adds 1; Time and Ping are not counted",
};
const ABLY_PUBSUB: PriceSource = {
  url: "https://ably.com/docs/pub-sub/pricing",
  readOn: READ_ON,
  kind: "provider",
  says: "Pub/Sub is now priced per monthly active user (MAU): messages, channels and connection time don't affect that bill; persistence counts 1 additional message per stored message on per-message pricing",
};

const PUSHER_COUNTING: PriceSource = {
  url: "https://docs.bird.com/pusher/channels/channels/limits/how-is-my-message-count-calculated-in-channels",
  readOn: READ_ON,
  kind: "provider",
  says: "counted: every REST API call (e.g. a publish), every message delivered to a connected client, webhooks, presence member_added/removed; not counted: ping/pong and subscription commands; 1 publish to 50 subscribers = 51",
};
const PUSHER_LIMITS: PriceSource = {
  url: "https://docs.bird.com/pusher/channels/channels/limits/what-happens-when-i-hit-my-channels-plan-limits",
  readOn: READ_ON,
  kind: "provider",
  says: "at the message limit, publishes are refused with 403 over quota; at the connection limit, new connections are refused; message limits count from 00:00 to 23:59 UTC (a daily cap)",
};
const PUSHER_HEADROOM: PriceSource = {
  url: "https://pusher.com/blog/making-it-easier-to-outgrow-usage-limits-in-your-channels-plan/",
  readOn: READ_ON,
  kind: "provider",
  says: "paid plans are capped at the plan limit plus 20% by default; overages only on Enterprise plans",
};
const PUSHER_PLANS_CEO: PriceSource = {
  url: "https://blog.mattheworiordan.com/p/transparent-pricing-that-rewards",
  readOn: READ_ON,
  kind: "secondary",
  says: "(Ably's CEO, citing Pusher's pricing page) Startup plan $49/month = 1M messages/day + 500 concurrent connections",
};
const PUSHER_PLANS_LIST: PriceSource = {
  url: "https://raw.githubusercontent.com/api-evangelist/pusher/refs/heads/main/plans/pusher-plans-pricing.yml",
  readOn: READ_ON,
  kind: "secondary",
  says: "a third-party listing that says it was generated, not harvested from the provider: Sandbox free 200K/day 100 connections; Startup $49 1M/day 500; Pro $99 4M/day 2K; Business $299 10M/day 5K; Premium $499 20M/day 10K; Growth $699 40M/day 15K; Plus $899 60M/day 20K; Growth Plus $1,199 90M/day 30K; Enterprise custom",
};

export const ABLY: HostedService = {
  service: "Ably Pub/Sub",
  model: "per message (resource-based pricing, accounts from before MAU pricing)",
  messageMeaning: "each publish counts 1 and each delivery to a subscriber counts 1 (echo to the publisher included); stored history adds 1 per message",
  counting: { perPublish: 1, perDelivery: 1 },
  usdPerMillionMessages: 2.5,
  usdPerMillionConnectionMinutes: 1,
  usdPerMillionChannelMinutes: 1,
  plans: [
    { plan: "Free", monthlyUsd: 0, messagesPerMonth: 6_000_000, messagesPerSecond: 500, concurrentConnections: 200, sources: [ABLY_RESOURCE_BASED] },
    { plan: "Standard", monthlyUsd: 29, messagesPerSecond: 2_500, concurrentConnections: 10_000, sources: [ABLY_RESOURCE_BASED] },
    { plan: "Pro", monthlyUsd: 399, messagesPerSecond: 10_000, concurrentConnections: 50_000, sources: [ABLY_RESOURCE_BASED] },
    { plan: "Enterprise", monthlyUsd: undefined, sources: [ABLY_RESOURCE_BASED] },
  ],
  notes: [
    "volume tiers lower the $2.50 per million beyond 50 million a month; the two versions of the pricing page read disagree on how far",
    "new accounts are priced per monthly active user; the price per MAU was not in the pages read (an earlier version of the pricing page said $0.05 per MAU with 20,000 messages per user a month)",
  ],
  sources: [ABLY_RATES, ABLY_COUNTING, ABLY_RESOURCE_BASED, ABLY_PUBSUB],
};

export const PUSHER: HostedService = {
  service: "Pusher Channels",
  model: "flat monthly plans with a daily message cap and a connection cap",
  messageMeaning: "each publish (REST call) counts 1 and each delivery to a connected client counts 1; the cap is per day (00:00-23:59 UTC), hard at +20%",
  counting: { perPublish: 1, perDelivery: 1 },
  plans: [
    { plan: "Sandbox", monthlyUsd: 0, messagesPerDay: 200_000, concurrentConnections: 100, sources: [PUSHER_PLANS_LIST] },
    { plan: "Startup", monthlyUsd: 49, messagesPerDay: 1_000_000, concurrentConnections: 500, sources: [PUSHER_PLANS_CEO, PUSHER_PLANS_LIST] },
    { plan: "Pro", monthlyUsd: 99, messagesPerDay: 4_000_000, concurrentConnections: 2_000, sources: [PUSHER_PLANS_LIST] },
    { plan: "Business", monthlyUsd: 299, messagesPerDay: 10_000_000, concurrentConnections: 5_000, sources: [PUSHER_PLANS_LIST] },
    { plan: "Premium", monthlyUsd: 499, messagesPerDay: 20_000_000, concurrentConnections: 10_000, sources: [PUSHER_PLANS_LIST] },
    { plan: "Growth", monthlyUsd: 699, messagesPerDay: 40_000_000, concurrentConnections: 15_000, sources: [PUSHER_PLANS_LIST] },
    { plan: "Plus", monthlyUsd: 899, messagesPerDay: 60_000_000, concurrentConnections: 20_000, sources: [PUSHER_PLANS_LIST] },
    { plan: "Growth Plus", monthlyUsd: 1_199, messagesPerDay: 90_000_000, concurrentConnections: 30_000, sources: [PUSHER_PLANS_LIST] },
    { plan: "Enterprise", monthlyUsd: undefined, sources: [PUSHER_PLANS_LIST] },
  ],
  notes: [
    "plan prices and caps come from secondary sources: pusher.com/channels/pricing itself was not among the stored pages; check it before quoting",
    "no per-message price on self-serve plans: the cost per million below assumes the daily cap is used in full every day",
  ],
  sources: [PUSHER_COUNTING, PUSHER_LIMITS, PUSHER_HEADROOM, PUSHER_PLANS_CEO, PUSHER_PLANS_LIST],
};

export const HOSTED_SERVICES: readonly HostedService[] = [ABLY, PUSHER];

/** A self-hosted server with no per-message price: its cost is the machines its own benchmark needed. */
export interface SelfHostedReference {
  service: string;
  licence: string;
  /** Deliveries per second the benchmark sustained. */
  deliveriesPerSecond: number;
  /** CPUs the server nodes used at that rate. */
  serverCpus: number;
  /** CPUs the same nodes used for the connections alone, with few messages. */
  idleServerCpus: number;
  /** CPUs of the broker (Redis) behind them. */
  brokerCpus: number;
  connections: number;
  memoryBytes: number;
  setup: string;
  notes: string[];
  sources: PriceSource[];
}

export const CENTRIFUGO: SelfHostedReference = {
  service: "Centrifugo (self-hosted)",
  licence: "open source; no per-message price. A price for Centrifugo PRO was not found in the pages read",
  deliveriesPerSecond: 28_000_000 / 60,
  serverCpus: 40,
  idleServerCpus: 10,
  brokerCpus: 5 * 0.32,
  connections: 1_000_000,
  memoryBytes: 27e9,
  setup: "20 pods of the Centrifuge library on Intel Xeon E5-2640 v4 (2.40 GHz), 5 Redis shards, Protobuf, ~100-byte messages, channels of 10 subscribers, 200k connects/disconnects a minute, p99 200 ms",
  notes: ["a 2020 benchmark on 2016 hardware with small rooms (10 subscribers), not a measurement of this workload"],
  sources: [
    {
      url: "https://centrifugal.dev/blog/2020/02/10/million-connections-with-centrifugo",
      readOn: READ_ON,
      kind: "provider",
      says: "1 million WebSocket connections, 28 million messages per minute delivered, 40 CPU for the server nodes (20 pods, ~2 CPU each), 27 GB RAM (~30 KB per connection), 0.32 CPU per Redis instance × 5; ~10 CPU for a million connections without many messages",
    },
  ],
};

/** CPU per delivered message in the reference benchmark, µs: all-in, and beyond what idle connections took. */
export function referenceCpuPerDeliveryUs(r: SelfHostedReference): { allIn: number; marginal: number } {
  const perSecond = r.deliveriesPerSecond;
  return {
    allIn: ((r.serverCpus + r.brokerCpus) * 1e6) / perSecond,
    marginal: ((r.serverCpus - r.idleServerCpus + r.brokerCpus) * 1e6) / perSecond,
  };
}
