import { Histogram } from "../stats/histogram";
import type { CloseRecord } from "./messages";

/** Counters and histograms shared by every client of one process. */
export class ClientStats {
  readonly latency: { fast: Histogram; slow: Histogram };
  readonly fromRequest: { fast: Histogram; slow: Histogram };
  readonly handshakeMs = new Histogram(60_000);
  readonly welcomeMs = new Histogram(60_000);
  readonly downtimeMs = new Histogram(600_000);
  handshakes = 0;
  failures = 0;
  readonly failuresByCause: Record<string, number> = {};
  readonly reconnectFailures: Record<string, number> = {};
  reconnectAttempts = 0;
  welcomes = 0;
  events = 0;
  frames = 0;
  bytes = 0;
  closes = 0;
  readonly closesByCode: Record<string, number> = {};
  readonly closeRecords: CloseRecord[] = [];
  lastBackAt = 0;
  /**
   * Per message ("room\nseq"): the latency of its latest in-time first copy among
   * the fast clients of this process. Merged over processes (the max), it is the
   * time a publish took to reach every socket, which percentiles over
   * deliveries do not show.
   */
  readonly lastArrivalMs = new Map<string, number>();
  pongs = 0;
  parseErrors = 0;
  errorEvents = 0;
  /** Multiplexed connections: `subscribed` events, refused subscribes by error code, and the time a connection's rooms took. */
  subscribed = 0;
  readonly subscribeRefusals: Record<string, number> = {};
  readonly subscribeMs = new Histogram(60_000);

  constructor(ceilingMs: number) {
    this.latency = { fast: new Histogram(ceilingMs), slow: new Histogram(ceilingMs) };
    this.fromRequest = { fast: new Histogram(ceilingMs), slow: new Histogram(ceilingMs) };
  }

  countFailure(cause: string, reconnecting: boolean): void {
    this.failures++;
    const into = reconnecting ? this.reconnectFailures : this.failuresByCause;
    into[cause] = (into[cause] ?? 0) + 1;
  }
}
