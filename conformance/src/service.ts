import type { BroadcastResult, ErrorBody, HistoryPage, PresencePage, PublishAnswer, RoomStats } from "../../protocol/index.js";

/** An HTTP answer: its status, headers and body (parsed when it is JSON). */
export interface Answer<T = unknown> {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: T | undefined;
  /** Content-Type said JSON. */
  isJson: boolean;
}

/** What a refusal body must look like: `{"error": code, "message": text}`. */
export function isErrorBody(value: unknown): value is ErrorBody {
  return typeof value === "object" && value !== null && typeof (value as ErrorBody).error === "string" && typeof (value as ErrorBody).message === "string";
}

/**
 * The service's HTTP API as the suite uses it: every request carries the
 * publish key when one was given (except where a check leaves it out on
 * purpose) and has a deadline, so a check never hangs on a request.
 */
export class Service {
  constructor(
    readonly baseUrl: string,
    readonly publishKey: string | undefined,
    readonly timeoutMs = 10_000,
  ) {}

  /** ws:// or wss:// form of the base URL. */
  get wsBase(): string {
    return this.baseUrl.replace(/^http/, "ws");
  }

  authHeaders(): Record<string, string> {
    return this.publishKey ? { authorization: `Bearer ${this.publishKey}` } : {};
  }

  /** A request to `path` (relative to the base URL), with the publish key unless `headers` sets authorization itself or `auth` is false. */
  async request<T = unknown>(path: string, init: RequestInit & { auth?: boolean } = {}): Promise<Answer<T>> {
    const { auth = true, headers, ...rest } = init;
    const all: Record<string, string> = { ...(auth ? this.authHeaders() : {}), ...(headers as Record<string, string> | undefined) };
    const res = await fetch(`${this.baseUrl}${path}`, { ...rest, headers: all, signal: AbortSignal.timeout(this.timeoutMs) });
    const text = await res.text();
    const isJson = (res.headers.get("content-type") ?? "").includes("json");
    let json: T | undefined;
    try {
      json = JSON.parse(text) as T;
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, text, json, isJson };
  }

  /** Publishes `data` as JSON (or `body` verbatim with its content type). */
  publish(room: string, data: unknown, options: { key?: string; body?: string; contentType?: string; headers?: Record<string, string> } = {}): Promise<Answer<PublishAnswer>> {
    const headers: Record<string, string> = { "content-type": options.contentType ?? "application/json", ...options.headers };
    if (options.key !== undefined) headers["idempotency-key"] = options.key;
    return this.request<PublishAnswer>(`/rooms/${encodeURIComponent(room)}/publish`, {
      method: "POST",
      headers,
      body: options.body ?? JSON.stringify(data),
    });
  }

  /** Publishes and insists on a 200 with a seq: for checks whose subject is not the publish itself. */
  async publishOk(room: string, data: unknown): Promise<number> {
    const answer = await this.publish(room, data);
    if (answer.status !== 200 || typeof answer.json?.seq !== "number") throw new Error(`publish into ${room} answered ${answer.status}: ${answer.text.slice(0, 200)}`);
    return answer.json.seq;
  }

  stats(room: string): Promise<Answer<RoomStats>> {
    return this.request<RoomStats>(`/rooms/${encodeURIComponent(room)}`);
  }

  history(room: string, query: string): Promise<Answer<HistoryPage>> {
    return this.request<HistoryPage>(`/rooms/${encodeURIComponent(room)}/messages${query ? `?${query}` : ""}`);
  }

  presence(room: string): Promise<Answer<PresencePage>> {
    return this.request<PresencePage>(`/rooms/${encodeURIComponent(room)}/presence`);
  }

  broadcast(body: unknown, key?: string): Promise<Answer<BroadcastResult>> {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (key !== undefined) headers["idempotency-key"] = key;
    return this.request<BroadcastResult>("/broadcast", { method: "POST", headers, body: JSON.stringify(body) });
  }
}
