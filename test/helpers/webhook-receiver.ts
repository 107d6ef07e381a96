import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { WebhookEvent } from "../../protocol";
import { verifyWebhook } from "../../examples/webhook-receiver/receiver.mjs";
import { Waiters } from "./wait";

/** One request as the receiver saw it. */
export interface ReceivedRequest<Event = WebhookEvent> {
  at: number;
  /** Whether the signature held (the receiver's check: by default the example receiver's, examples/webhook-receiver/receiver.mjs). */
  verified: boolean;
  /** The status it was answered with. */
  status: number;
  events: Event[];
  headers: IncomingHttpHeaders;
  /** The body as it arrived, byte for byte (as UTF-8 text). */
  rawBody: string;
}

/** A receiver's check of one request: whether it is signed as it must be. */
export type WebhookCheck = (request: { headers: IncomingHttpHeaders; rawBody: string }) => boolean;

/**
 * A webhook receiver on 127.0.0.1 for tests: it records every request and
 * answers 204 while up, 503 while down (nothing it is sent then counts as
 * received), and holds requests without answering while hanging. A request
 * whose check fails is answered 401. `Event` is the format's event: this
 * service's own by default (`start`), another's with `checking`.
 */
export class WebhookReceiver<Event = WebhookEvent> {
  readonly requests: ReceivedRequest<Event>[] = [];
  #server: Server;
  #mode: "up" | "down" | "hang" = "up";
  #check: WebhookCheck;
  #waiters = new Waiters();
  #held: ServerResponse[] = [];

  private constructor(check: WebhookCheck) {
    this.#check = check;
    this.#server = createServer((req, res) => this.#handle(req, res));
  }

  /** A receiver of this service's own webhooks, signed with `secret`. */
  static start(secret: string, port = 0): Promise<WebhookReceiver> {
    return WebhookReceiver.checking<WebhookEvent>((r) => verifyWebhook(secret, r.headers["webhook-signature"], Buffer.from(r.rawBody)) as boolean, port);
  }

  /** A receiver whose requests hold when `check` says so (another format's signature). */
  static async checking<Event>(check: WebhookCheck, port = 0): Promise<WebhookReceiver<Event>> {
    const receiver = new WebhookReceiver<Event>(check);
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
  get accepted(): Event[] {
    return this.requests.filter((r) => r.status === 204).flatMap((r) => r.events);
  }

  /** Accepted events of `room`, each id once, in the order first received (this service's own format). */
  eventsOf(room: string): WebhookEvent[] {
    const ids = new Set<string>();
    return (this.accepted as unknown as WebhookEvent[]).filter((e) => e.room === room && !ids.has(e.id) && ids.add(e.id) !== undefined);
  }

  /** Accepted events of `room` as `type:member` (or `type`) strings, each id once. */
  summary(room: string): string[] {
    return this.eventsOf(room).map((e) => ("member" in e.data ? `${e.type}:${e.data.member.id}` : e.type));
  }

  waitFor(predicate: (r: WebhookReceiver<Event>) => boolean, timeoutMs: number, what: string): Promise<void> {
    return this.#waiters.waitFor(() => predicate(this), { timeoutMs, what, detail: () => `received ${JSON.stringify(this.requests.map((r) => [r.status, r.events.map((e) => (e as { type?: string; name?: string }).type ?? (e as { name?: string }).name)]))}` });
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
      const rawBody = Buffer.concat(chunks).toString("utf8");
      const verified = this.#check({ headers: req.headers, rawBody });
      const events = (JSON.parse(rawBody) as { events: Event[] }).events;
      const received = { at: Date.now(), verified, events, headers: req.headers, rawBody };
      if (this.#mode === "hang") {
        this.requests.push({ ...received, status: 0 });
        this.#held.push(res);
        return;
      }
      const status = this.#mode === "up" && verified ? 204 : this.#mode === "up" ? 401 : 503;
      this.requests.push({ ...received, status });
      res.writeHead(status).end();
      this.#waiters.notify();
    });
  }
}
