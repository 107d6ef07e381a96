/**
 * Cloudflare's published prices used by the cost estimate, with where they
 * come from. Prices change: check the pages below before quoting a figure.
 *
 * - Workers Paid: https://developers.cloudflare.com/workers/platform/pricing/
 * - Durable Objects: https://developers.cloudflare.com/durable-objects/platform/pricing/
 *   (20:1 billing of incoming WebSocket messages, outgoing messages free, duration
 *   billed at 128 MB per object while it is active and not eligible to hibernate)
 * - Limits: https://developers.cloudflare.com/durable-objects/platform/limits/ and
 *   https://developers.cloudflare.com/durable-objects/api/state/ (32,768 hibernatable
 *   WebSockets per object), soft limit of 1,000 requests/s per object
 *   (https://developers.cloudflare.com/durable-objects/reference/faq/)
 */
/** Where a price was read, and when: prices change, so every figure carries both. */
export interface PriceSource {
  url: string;
  /** The date the page was read (a stored copy of it), YYYY-MM-DD, or how long ago when not re-read. */
  readOn: string;
  /** "provider": the seller's own page; "secondary": someone else's account of it, to check before quoting. */
  kind: "provider" | "secondary";
  /** What was read there. */
  says: string;
}

export interface Pricing {
  /** Workers Paid subscription, USD per month (includes the allowances below). */
  workersPaidMonthly: number;
  workerRequestsIncluded: number;
  workerRequestsPerMillion: number;
  workerCpuMsIncluded: number;
  workerCpuMsPerMillion: number;
  doRequestsIncluded: number;
  doRequestsPerMillion: number;
  /** Incoming WebSocket messages billed per request. */
  doIncomingMessagesPerRequest: number;
  doGbSecondsIncluded: number;
  doGbSecondsPerMillion: number;
  /** Memory every active object is billed for, GB. */
  doBilledMemoryGb: number;
  sqliteRowsWrittenIncluded: number;
  sqliteRowsWrittenPerMillion: number;
  sqliteStoredGbIncluded: number;
  sqliteStoredPerGbMonth: number;
  /** A one-line summary of where and when these figures were read. */
  source: string;
  sources: PriceSource[];
}

export const CLOUDFLARE_PRICING: Pricing = {
  workersPaidMonthly: 5,
  workerRequestsIncluded: 10_000_000,
  workerRequestsPerMillion: 0.3,
  workerCpuMsIncluded: 30_000_000,
  workerCpuMsPerMillion: 0.02,
  doRequestsIncluded: 1_000_000,
  doRequestsPerMillion: 0.15,
  doIncomingMessagesPerRequest: 20,
  doGbSecondsIncluded: 400_000,
  doGbSecondsPerMillion: 12.5,
  doBilledMemoryGb: 0.128,
  sqliteRowsWrittenIncluded: 50_000_000,
  sqliteRowsWrittenPerMillion: 1.0,
  sqliteStoredGbIncluded: 5,
  sqliteStoredPerGbMonth: 0.2,
  source: "developers.cloudflare.com Workers and Durable Objects pricing pages, Workers Paid plan (see sources for dates)",
  sources: [
    {
      url: "https://developers.cloudflare.com/durable-objects/platform/pricing/",
      readOn: "2026-12-01",
      kind: "provider",
      says: "requests 1 million included + $0.15/million, WebSocket messages included (incoming billed 20:1, outgoing free); duration 400,000 GB-s + $12.50/million GB-s; objects idle and eligible for hibernation are not billed for duration",
    },
    {
      url: "https://developers.cloudflare.com/durable-objects/platform/pricing/",
      readOn: "earlier in 2026, not re-read on 2026-12-01",
      kind: "provider",
      says: "SQLite storage: rows written 50 million included + $1.00/million, rows read $0.001/million, stored data 5 GB-month + $0.20/GB-month; duration billed at 128 MB per active object",
    },
    {
      url: "https://developers.cloudflare.com/workers/platform/pricing/",
      readOn: "earlier in 2026, not re-read on 2026-12-01",
      kind: "provider",
      says: "Workers Paid $5/month: 10 million requests + $0.30/million, 30 million CPU-ms + $0.02/million",
    },
  ],
};

/** Platform limits per Durable Object. */
export const CLOUDFLARE_LIMITS = {
  /** Hibernatable WebSockets per object. */
  socketsPerObject: 32_768,
  /** Soft limit on requests per second per object. */
  requestsPerSecondPerObject: 1_000,
  /** Memory of the isolate an object runs in, bytes. */
  memoryPerObjectBytes: 128 * 1024 * 1024,
} as const;

/** Seconds in the billing month the estimate uses (30 days). */
export const SECONDS_PER_MONTH = 30 * 24 * 3600;

/** What `quantity` costs past the plan's `included` amount, at `perMillion` dollars per million units. */
export function overage(quantity: number, included: number, perMillion: number): number {
  return (Math.max(0, quantity - included) / 1e6) * perMillion;
}
