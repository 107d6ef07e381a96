import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { WebhookEvent } from "../../protocol";
import { verifyWebhook } from "../../examples/webhook-receiver/receiver.mjs";

/** One request as the receiver saw it. */
export interface ReceivedRequest {
  at: number;
  /** Whether the signature held (the example receiver's check: examples/webhook-receiver/receiver.mjs). */
  verified: boolean;
  /** The status it was answered with. */
  status: number;
  events: WebhookEvent[];
}

/**
 * A webhook receiver on 127.0.0.1 for tests: it records every request and
 * answers 204 while up, 503 while down (nothing it is sent then counts as
 * received), and holds requests without answering while hanging.
 */
export class WebhookReceiver {
  readonly requests: ReceivedRequest[] = [];
  #server: Server;
  #mode: "up" | "down" | "hang" = "up";
  #secret: string;
  #waiters = new Set<() => void>();
  #held: ServerResponse[] = [];

  private constructor(secret: string) {
    this.#secret = secret;
    this.#server = createServer((req, res) => this.#handle(req, res));
  }

  static async start(secret: string, port = 0): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver(secret);
    await new Promise<void>((resolve) => receiver.#server.listen(port, "127.0.0.1", resolve));
    return receiver;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hooks`;
  }

  /** "down": answer 503; "hang": answer nothing; "up": 204. */
  set mode(mode: "up" | "down" | "hang") {
    this.#mode = mode;
  }

  /** Events of requests answered 204, in the order they arrived (repeats included). */
  get accepted(): WebhookEvent[] {
    return this.requests.filter((r) => r.status === 204).flatMap((r) => r.events);
  }

  /** Accepted events of `room`, each id once, in the order first received. */
  eventsOf(room: string): WebhookEvent[] {
    const ids = new Set<string>();
    return this.accepted.filter((e) => e.room === room && !ids.has(e.id) && ids.add(e.id) !== undefined);
  }

  /** Accepted events of `room` as `type:member` (or `type`) strings, each id once. */
  summary(room: string): string[] {
    return this.eventsOf(room).map((e) => ("member" in e.data ? `${e.type}:${e.data.member.id}` : e.type));
  }

  async waitFor(predicate: (r: WebhookReceiver) => boolean, timeoutMs: number, what: string): Promise<void> {
    if (predicate(this)) return;
    await new Promise<void>((resolve, reject) => {
      const check = () => {
        if (!predicate(this)) return;
        clearTimeout(timer);
        this.#waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; received ${JSON.stringify(this.requests.map((r) => [r.status, r.events.map((e) => e.type)]))}`));
      }, timeoutMs);
      this.#waiters.add(check);
    });
  }

  async stop(): Promise<void> {
    for (const res of this.#held.splice(0)) res.destroy();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const verified = verifyWebhook(this.#secret, req.headers["webhook-signature"], body) as boolean;
      const events = (JSON.parse(body.toString("utf8")) as { events: WebhookEvent[] }).events;
      if (this.#mode === "hang") {
        this.requests.push({ at: Date.now(), verified, status: 0, events });
        this.#held.push(res);
        return;
      }
      const status = this.#mode === "up" && verified ? 204 : this.#mode === "up" ? 401 : 503;
      this.requests.push({ at: Date.now(), verified, status, events });
      res.writeHead(status).end();
      for (const waiter of [...this.#waiters]) waiter();
    });
  }
}
