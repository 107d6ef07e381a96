/**
 * A webhook receiver inside workerd, for unit tests of a room's webhook
 * delivery: requests to its URL made with the global `fetch` are answered
 * by the receiver (every other request goes out as usual), so a test says
 * how each request is answered and reads what arrived, byte for byte.
 * Answers: a status (204 by default), a network error, a redirect, or a
 * status the test gives later (a receiver that is slow to answer).
 *
 * Workers-only in practice (it replaces workerd's global fetch while
 * installed); Node tests use test/helpers/webhook-receiver.ts, a real server.
 */
import type { WebhookEvent } from "../../../protocol";

/** One request as the receiver saw it. */
export interface FetchedRequest {
  at: number;
  method: string;
  headers: Headers;
  /** The body as it arrived. */
  body: string;
  events: WebhookEvent[];
  /** What it was answered: a status, or "network error" (null while a held answer is pending). */
  answer: number | "network error" | null;
  /** Whether the caller followed redirects (a delivery must not: "manual"). */
  redirect: string | undefined;
}

/** How the receiver answers a request: a status, a network error, or a status once the promise settles. */
export type Answer = number | "network error" | Promise<number>;

export class FetchReceiver {
  readonly url: string;
  readonly requests: FetchedRequest[] = [];
  /** Answers for the next requests, in order; once used up, `otherwise`. */
  readonly answers: Answer[] = [];
  otherwise: Answer = 204;
  readonly #original: typeof fetch;

  private constructor(url: string) {
    this.url = url;
    this.#original = globalThis.fetch;
  }

  /** Starts answering requests to `url` (until `stop`). */
  static install(url = "https://hooks.example.test/fanout"): FetchReceiver {
    const receiver = new FetchReceiver(url);
    const original = receiver.#original;
    globalThis.fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
      const request = new Request(input, init);
      if (request.url !== url) return original(input, init);
      return receiver.#receive(request, init?.redirect);
    };
    return receiver;
  }

  /** Gives the global fetch back. */
  stop(): void {
    globalThis.fetch = this.#original;
  }

  /** Every event the receiver acknowledged (2xx), in the order it got them, repeats included. */
  get acknowledged(): WebhookEvent[] {
    return this.requests.filter((r) => typeof r.answer === "number" && r.answer >= 200 && r.answer < 300).flatMap((r) => r.events);
  }

  /** The ids of each request's events, request by request. */
  get idsByRequest(): string[][] {
    return this.requests.map((r) => r.events.map((e) => e.id));
  }

  async #receive(request: Request, redirect: string | undefined): Promise<Response> {
    const body = await request.text();
    const planned = this.answers.shift() ?? this.otherwise;
    const events = (JSON.parse(body) as { events: WebhookEvent[] }).events;
    const received: FetchedRequest = { at: Date.now(), method: request.method, headers: request.headers, body, events, answer: null, redirect };
    this.requests.push(received);
    const answer = await planned;
    received.answer = answer;
    if (answer === "network error") throw new TypeError(`Network connection lost reaching ${this.url}`);
    if (answer >= 300 && answer < 400) return new Response(null, { status: answer, headers: { location: "https://elsewhere.example.test/" } });
    return new Response(null, { status: answer });
  }
}

/** An answer the test gives later: `answer` is what the receiver waits for, `give` gives it. */
export function heldAnswer(): { answer: Promise<number>; give(status: number): void } {
  let give!: (status: number) => void;
  const answer = new Promise<number>((resolve) => (give = resolve));
  return { answer, give };
}
