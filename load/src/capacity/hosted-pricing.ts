/**
 * List prices of hosted real-time services, to compare the cost of a
 * delivered message with. The figures are data (hosted-prices.json), each
 * with the page it was read on and when; a figure that could not be found is
 * absent (null there, undefined here), never guessed. Each service counts a
 * "message" differently: `counting` says how many counted messages one
 * publish to F sockets makes.
 */
import prices from "./hosted-prices.json";
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

/** The sources a figure names, by their key in the data file; a key it does not hold is an error in the data. */
function sourcesOf(keys: readonly string[]): PriceSource[] {
  const all = prices.sources as Record<string, PriceSource>;
  return keys.map((key) => {
    const source = all[key];
    if (!source) throw new Error(`hosted-prices.json names a source it does not hold: ${key}`);
    return source;
  });
}

/** null in the data (not published) is undefined here. */
const known = (value: number | null | undefined): number | undefined => value ?? undefined;

export const HOSTED_SERVICES: readonly HostedService[] = prices.services.map((s) => ({
  ...s,
  plans: s.plans.map((p) => ({ ...p, monthlyUsd: known(p.monthlyUsd), sources: sourcesOf(p.sources) })),
  sources: sourcesOf(s.sources),
}));

function service(name: string): HostedService {
  const found = HOSTED_SERVICES.find((s) => s.service.startsWith(name));
  if (!found) throw new Error(`hosted-prices.json has no service named ${name}`);
  return found;
}

export const ABLY = service("Ably");
export const PUSHER = service("Pusher");

export const SELF_HOSTED: readonly SelfHostedReference[] = prices.selfHosted.map(({ deliveriesPerMinute, brokerInstances, cpusPerBrokerInstance, ...r }) => ({
  ...r,
  deliveriesPerSecond: deliveriesPerMinute / 60,
  brokerCpus: brokerInstances * cpusPerBrokerInstance,
  sources: sourcesOf(r.sources),
}));

export const CENTRIFUGO = SELF_HOSTED[0] as SelfHostedReference;

/** CPU per delivered message in the reference benchmark, µs: all-in, and beyond what idle connections took. */
export function referenceCpuPerDeliveryUs(r: SelfHostedReference): { allIn: number; marginal: number } {
  const perSecond = r.deliveriesPerSecond;
  return {
    allIn: ((r.serverCpus + r.brokerCpus) * 1e6) / perSecond,
    marginal: ((r.serverCpus - r.idleServerCpus + r.brokerCpus) * 1e6) / perSecond,
  };
}
