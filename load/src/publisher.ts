import { Agent as HttpAgent, request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { roomPublishPath } from "../../protocol";
import { Histogram } from "./stats/histogram";
import { classifyConnectError } from "./stats/failures";
import type { PublishedRange } from "./stats/ledger";

export interface HttpAnswer {
  status: number;
  body: string;
  ms: number;
}

/** A small keep-alive HTTP client for publishes and stats; one per target. */
export class HttpClient {
  private readonly agent: HttpAgent;
  private readonly secure: boolean;

  constructor(
    private readonly origin: string,
    maxSockets = 64,
    /** Extra headers on every request (credentials for a protected publish API). */
    private readonly headers: Record<string, string> = {},
  ) {
    this.secure = origin.startsWith("https:");
    this.agent = this.secure ? new HttpsAgent({ keepAlive: true, maxSockets }) : new HttpAgent({ keepAlive: true, maxSockets });
  }

  send(method: "GET" | "POST", path: string, body?: string, timeoutMs = 10_000): Promise<HttpAnswer> {
    const started = performance.now();
    const url = new URL(path, this.origin);
    const doRequest = this.secure ? httpsRequest : httpRequest;
    return new Promise((resolve, reject) => {
      const req = doRequest(
        url,
        {
          method,
          agent: this.agent,
          headers: {
            ...this.headers,
            ...(body === undefined ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(body) }),
          },
          timeout: timeoutMs,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8"), ms: performance.now() - started }));
          res.on("error", reject);
        },
      );
      req.on("timeout", () => req.destroy(Object.assign(new Error("request timed out"), { code: "ETIMEDOUT" })));
      req.on("error", reject);
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Payload published by the tool: `k` counter, `t` send time (ms), `p` padding to the requested size. */
export function makePayload(counter: number, sentAt: number, payloadBytes: number): string {
  const bare = JSON.stringify({ k: counter, t: sentAt, p: "" });
  return JSON.stringify({ k: counter, t: sentAt, p: "x".repeat(Math.max(0, payloadBytes - bare.length)) });
}

export interface PublisherStats {
  attempted: number;
  accepted: number;
  failures: Record<string, number>;
  /** HTTP round trip of accepted publishes, ms. */
  httpMs: Histogram;
  /** Sum of `recipients` the server reported (room publishes) — its own count of deliveries attempted. */
  serverRecipients: number;
  /** Largest delay between a publish's scheduled time and its start, ms (the publisher fell behind). */
  maxLagMs: number;
  firstAt: number;
  lastAt: number;
}

export type PublishMode =
  | { kind: "room" }
  | { kind: "broadcast"; select: { rooms: string[] } | { prefix: string } };

export interface PublisherOptions {
  rooms: string[];
  /** Messages per second per room (room mode) or broadcasts per second (broadcast mode). */
  rate: number;
  payloadBytes: number;
  mode: PublishMode;
  /**
   * Publishes in flight per room at once (room mode). 1 keeps seqs in request
   * order; more lets the publisher outrun a room's fan-out, which is what
   * exercises coalescing.
   */
  concurrency?: number;
}

/**
 * Publishes at a fixed rate without drift. In room mode each room has
 * `concurrency` publishes in flight at most (one by default), which lets the
 * publisher see exactly which seqs were accepted (and when a room's seq
 * restarted after its history was lost: a new generation).
 */
export class Publisher {
  readonly stats: PublisherStats = {
    attempted: 0,
    accepted: 0,
    failures: {},
    httpMs: new Histogram(60_000),
    serverRecipients: 0,
    maxLagMs: 0,
    firstAt: 0,
    lastAt: 0,
  };
  private readonly generations = new Map<string, PublishedRange[]>();
  private running = false;
  private loops: Array<Promise<void>> = [];
  private counter = 0;
  /** Set when the server answered the first broadcast with a status that means "no such endpoint". */
  fatal: string | undefined;

  constructor(
    private readonly http: HttpClient,
    private readonly options: PublisherOptions,
  ) {}

  start(): void {
    this.running = true;
    const start = performance.now() + 5;
    if (this.options.mode.kind === "room") {
      const lanes = Math.max(1, this.options.concurrency ?? 1);
      const interval = 1000 / this.options.rate;
      // Each room gets `lanes` loops at rate/lanes, staggered so together they keep the rate.
      this.loops = this.options.rooms.flatMap((room, i) =>
        Array.from({ length: lanes }, (_, lane) =>
          this.loop(start + (i / this.options.rooms.length) * interval + lane * interval, () => this.publishRoom(room), interval * lanes),
        ),
      );
    } else {
      const select = this.options.mode.select;
      this.loops = [this.loop(start, () => this.publishBroadcast(select))];
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  /** Accepted seq ranges per room, by generation. */
  ranges(): Record<string, PublishedRange[]> {
    return Object.fromEntries([...this.generations].map(([room, gens]) => [room, gens.map((g) => ({ ...g }))]));
  }

  /** Latest accepted seq per room (current generation). */
  lastSeqByRoom(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [room, gens] of this.generations) {
      const last = gens[gens.length - 1];
      if (last) out[room] = last.last;
    }
    return out;
  }

  private async loop(firstAt: number, publishOnce: () => Promise<void>, interval = 1000 / this.options.rate): Promise<void> {
    let next = firstAt;
    while (this.running) {
      const wait = next - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      if (!this.running) break;
      const lag = performance.now() - next;
      if (lag > this.stats.maxLagMs) this.stats.maxLagMs = lag;
      await publishOnce();
      next += interval;
      if (this.fatal) break;
    }
  }

  private noteAccepted(room: string, seq: number): void {
    let gens = this.generations.get(room);
    if (!gens) {
      gens = [];
      this.generations.set(room, gens);
    }
    const current = gens[gens.length - 1];
    // With several publishes in flight, answers arrive slightly out of order:
    // a seq just below the generation's range extends it; only a seq far below
    // (the room's seq restarted) opens a new generation.
    const lanes = Math.max(1, this.options.concurrency ?? 1);
    if (!current || seq < current.first - lanes || (lanes === 1 && seq <= current.last)) gens.push({ first: seq, last: seq });
    else {
      current.first = Math.min(current.first, seq);
      current.last = Math.max(current.last, seq);
    }
  }

  private fail(cause: string): void {
    this.stats.failures[cause] = (this.stats.failures[cause] ?? 0) + 1;
  }

  private async publishRoom(room: string): Promise<void> {
    const sentAt = Date.now();
    const body = makePayload(++this.counter, sentAt, this.options.payloadBytes);
    this.stats.attempted++;
    if (!this.stats.firstAt) this.stats.firstAt = sentAt;
    try {
      const answer = await this.http.send("POST", roomPublishPath(room), body);
      if (answer.status !== 200) {
        this.fail(`http ${answer.status}`);
        return;
      }
      const parsed = JSON.parse(answer.body) as { seq?: unknown; recipients?: unknown };
      if (typeof parsed.seq !== "number") {
        this.fail("answer without seq");
        return;
      }
      this.stats.accepted++;
      this.stats.lastAt = sentAt;
      this.stats.httpMs.add(answer.ms);
      if (typeof parsed.recipients === "number") this.stats.serverRecipients += parsed.recipients;
      this.noteAccepted(room, parsed.seq);
    } catch (error) {
      this.fail(classifyConnectError(error));
    }
  }

  private async publishBroadcast(select: { rooms: string[] } | { prefix: string }): Promise<void> {
    const sentAt = Date.now();
    const data = JSON.parse(makePayload(++this.counter, sentAt, this.options.payloadBytes)) as unknown;
    this.stats.attempted++;
    if (!this.stats.firstAt) this.stats.firstAt = sentAt;
    try {
      const answer = await this.http.send("POST", "/broadcast", JSON.stringify({ data, ...select }));
      if (answer.status < 200 || answer.status >= 300) {
        this.fail(`http ${answer.status}`);
        if (this.stats.accepted === 0 && [404, 405, 501].includes(answer.status)) {
          this.fatal = `POST /broadcast answered HTTP ${answer.status}: this server has no broadcast endpoint (coordinator) yet`;
        }
        return;
      }
      this.stats.accepted++;
      this.stats.lastAt = sentAt;
      this.stats.httpMs.add(answer.ms);
      // The service answers {"sockets", "failedCount", ...}; the baseline {"recipients"}.
      const parsed = JSON.parse(answer.body) as { recipients?: unknown; sockets?: unknown; failedCount?: unknown };
      const recipients = typeof parsed.recipients === "number" ? parsed.recipients : parsed.sockets;
      if (typeof recipients === "number") this.stats.serverRecipients += recipients;
      if (typeof parsed.failedCount === "number" && parsed.failedCount > 0) this.fail("broadcast rooms failed");
    } catch (error) {
      this.fail(classifyConnectError(error));
    }
  }
}
