/**
 * Earlier messages of a room, over HTTP (`GET /rooms/{room}/messages`,
 * docs/history.md), for a back end: the route is guarded by the service's
 * publish key, which must never reach a browser. A page that wants to show
 * "load earlier" asks its own server, which calls this; a socket that only
 * wants the last messages when it opens uses `?rewind=N` instead.
 *
 * Its own entry point (`@edge-fanout/client/history`), so the browser bundle
 * does not carry it.
 */
import { isValidRoomName, roomMessagesPath, type ErrorBody, type ErrorCode, type HistoryPage } from "../../protocol/index.js";

export type { HistoryMessage, HistoryPage } from "../../protocol/index.js";

/** What `fetchHistory` needs of `fetch` (the global one by default; Node 20 has it). */
export type HistoryFetch = (
  url: string,
  init: { headers: Record<string, string>; signal?: unknown },
) => Promise<{ status: number; json(): Promise<unknown> }>;

/**
 * Which page of a room's history `fetchHistory` asks for, and how.
 *
 * @see docs/history.md#history-over-http
 */
export interface HistoryOptions {
  /** Messages after this seq (exclusive); pages forward (oldest first) unless `direction` says otherwise. */
  after?: number;
  /** Messages before this seq (exclusive); pages newest first unless `direction` says otherwise. */
  before?: number;
  /**
   * Messages per page, 1-1000 (the service applies the default).
   * @default 100
   */
  limit?: number;
  /** "forward" (oldest first) or "backward" (newest first); absent, forward when `after` is given, else backward. */
  direction?: "forward" | "backward";
  /** A previous page's `cursor`: the next page of the same range (with `limit` only). */
  cursor?: string;
  /** The epoch the seqs belong to: a room whose history started over answers 409 `conflict`. */
  epoch?: string;
  /** The service's PUBLISH_KEY, when it has one. Server-side only. */
  publishKey?: string;
  /** The `fetch` to call; the global one when absent. */
  fetch?: HistoryFetch;
  /** An AbortSignal, passed to `fetch`. */
  signal?: unknown;
}

/**
 * A history request the service refused: its status and error code (`not_found`, `bad_request`, `conflict`, `unauthorized`...).
 *
 * @example
 * ```ts
 * try {
 *   await fetchHistory(fanoutUrl, "chat:lobby", { epoch, publishKey });
 * } catch (error) {
 *   if (error instanceof HistoryError && error.code === "conflict") startOver(); // the room's history started over
 * }
 * ```
 *
 * @see docs/history.md#history-over-http
 */
export class HistoryError extends Error {
  constructor(
    /** The HTTP status the service answered. */
    readonly status: number,
    /** The service's error code, or "unexpected" for an answer without one. */
    readonly code: ErrorCode | "unexpected",
    message: string,
  ) {
    super(message);
    this.name = "HistoryError";
  }
}

/**
 * One page of room `room`'s history from the service at `baseUrl`
 * (`https://fanout.example.com`, or the URL an app is mounted at). Without
 * `after`, `before` or `cursor`: the newest messages, newest first.
 *
 * @typeParam T the type of message data.
 * @param baseUrl the service's URL, or the URL its app is mounted at.
 * @param room the room's name.
 * @param [options={}] the range, page size, cursor, epoch and publish key.
 * @returns the page: `{ room, epoch, direction, messages, cursor, lost, rowsRead }`.
 * @throws {TypeError} for an invalid room name.
 * @throws {HistoryError} when the service refuses the request.
 *
 * @example
 * ```ts
 * import { fetchHistory } from "@edge-fanout/client/history";
 *
 * // Server-side: the 50 messages before the oldest one a client has, newest first.
 * const page = await fetchHistory<Chat>(fanoutUrl, "chat:lobby", { before: 951, limit: 50, publishKey });
 * for (const { seq, data } of page.messages) console.log(seq, data.text);
 * ```
 *
 * @see docs/history.md#history-over-http
 */
export async function fetchHistory<T = unknown>(baseUrl: string, room: string, options: HistoryOptions = {}): Promise<HistoryPage<T>> {
  if (!isValidRoomName(room)) throw new TypeError(`invalid room name ${JSON.stringify(room)}`);
  const url = new URL(roomMessagesPath(room).slice(1), baseUrl.endsWith("/") ? baseUrl : `${baseUrl}/`);
  const query: [string, number | string | undefined][] = [
    ["after", options.after],
    ["before", options.before],
    ["limit", options.limit],
    ["direction", options.direction],
    ["cursor", options.cursor],
    ["epoch", options.epoch],
  ];
  for (const [name, value] of query) if (value !== undefined) url.searchParams.set(name, String(value));
  const headers: Record<string, string> = { accept: "application/json" };
  if (options.publishKey !== undefined) headers.authorization = `Bearer ${options.publishKey}`;
  const get = options.fetch ?? (globalThis.fetch as unknown as HistoryFetch);
  const res = await get(url.toString(), { headers, signal: options.signal });
  const body = (await res.json().catch(() => null)) as HistoryPage<T> | ErrorBody | null;
  if (res.status === 200 && body !== null && "messages" in body) return body;
  const refusal = body !== null && "error" in body ? body : null;
  throw new HistoryError(res.status, refusal?.error ?? "unexpected", refusal?.message ?? `the service answered ${res.status}`);
}

/**
 * Every page of a range, one after the other, following each page's cursor
 * until the range holds nothing more.
 *
 * @typeParam T the type of message data.
 * @param baseUrl the service's URL, or the URL its app is mounted at.
 * @param room the room's name.
 * @param [options={}] the range and page size, as for `fetchHistory`.
 * @returns the pages, in order.
 * @throws {HistoryError} when the service refuses a request.
 *
 * @example
 * ```ts
 * for await (const page of historyPages(fanoutUrl, "prices", { after: 0, limit: 1000, publishKey })) store(page.messages);
 * ```
 *
 * @see docs/history.md#history-over-http
 */
export async function* historyPages<T = unknown>(baseUrl: string, room: string, options: HistoryOptions = {}): AsyncGenerator<HistoryPage<T>> {
  let page = await fetchHistory<T>(baseUrl, room, options);
  yield page;
  const { publishKey, fetch, signal, limit } = options;
  while (page.cursor !== null) {
    page = await fetchHistory<T>(baseUrl, room, { cursor: page.cursor, publishKey, fetch, signal, limit });
    yield page;
  }
}
