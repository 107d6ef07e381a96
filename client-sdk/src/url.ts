import { MULTIPLEX_PATH, isValidRoomName, roomSocketPath } from "../../protocol/index.js";

/**
 * A subscribe token, or a function that gives one. A function is called
 * before every connection attempt (sync or async), so a client can run for
 * longer than any one token lives: after the room closes the socket with 4001
 * because its token expired, the client asks for a new one and resumes.
 *
 * @see client-sdk/README.md#tokens
 */
export type TokenSource = string | (() => string | PromiseLike<string>);

/**
 * Where a connection attempt puts the token: in the subprotocol offer, or in the URL's query.
 *
 * @see client-sdk/README.md#where-the-token-travels
 */
export type TokenIn = "subprotocol" | "query";

/** Characters a subprotocol can hold (an HTTP token, RFC 6455 4.1): a JWT's base64url parts and dots are among them. */
const SUBPROTOCOL_CHARS = /^[\w!#$%&'*+.^`|~-]+$/;

/** Why a token cannot be offered as a subprotocol: both `ws` and browsers refuse to open such a socket. */
export const UNFIT_TOKEN = 'the token has characters a subprotocol cannot carry: use tokenIn "query"';

/** Whether `token` can travel in the subprotocol offer as `token.<token>`. */
export function fitsSubprotocol(token: string): boolean {
  return SUBPROTOCOL_CHARS.test(token);
}

/**
 * Where a room lives: a full URL, or a host plus a room name.
 *
 * @see client-sdk/README.md#options
 */
export interface RoomAddress {
  /** WebSocket URL of the room (ws:, wss:, http: or https:), e.g. "wss://example.com/rooms/lobby/ws". */
  url?: string;
  /** Host of the service, with or without a scheme, e.g. "example.com" or "http://127.0.0.1:8787". Defaults to the page's host. */
  host?: string;
  /** Room name; required with `host`. */
  room?: string;
  /**
   * Access token: a string, or a function called before every connection
   * attempt. Sent as `tokenIn` says.
   */
  token?: TokenSource;
  /**
   * Where the token travels. Browsers cannot set headers on a WebSocket but can
   * offer subprotocols, so by default it goes in `Sec-WebSocket-Protocol` as
   * `["fanout.v1", "token.<jwt>"]`, out of URLs and so out of access logs;
   * "query" sends it as `?token=` instead, for a proxy in between that drops
   * or does not answer the subprotocol offer.
   * @default "subprotocol"
   */
  tokenIn?: TokenIn;
  /**
   * Open mode only (a room without tokens): the member this client is in the
   * room's presence, and its member data. Anyone can choose any name, so the
   * room marks such members unverified; with tokens the token's `sub` and
   * `info` decide instead, and these are ignored.
   */
  member?: string;
  /** Member data for `member`: a JSON object of at most 1 KiB as JSON. */
  info?: Record<string, unknown>;
}

const HAS_SCHEME = /^[a-z][a-z0-9+.-]*:\/\//i;
const LOOPBACK = /^(localhost|127\.|\[::1\])/;

/**
 * Builds the WebSocket URL of a room, without the token (each connection
 * attempt adds it where `tokenIn` says).
 *
 * @param address a room URL, or a host (the page's when absent) and a room name.
 * @returns a ws: or wss: URL (a bare host gets wss:, or ws: for loopback).
 * @throws {TypeError} for an unusable address or room name.
 *
 * @example
 * ```ts
 * roomSocketUrl({ host: "fanout.example.com", room: "lobby" }); // "wss://fanout.example.com/rooms/lobby/ws"
 * ```
 *
 * @see client-sdk/README.md#options
 */
export function roomSocketUrl(address: RoomAddress): string {
  if (address.url) return socketUrl(address, address.url);
  const { room } = address;
  if (room === undefined || !isValidRoomName(room)) {
    throw new TypeError(`invalid room name ${JSON.stringify(room)}`);
  }
  return socketUrl(address, roomSocketPath(room));
}

/**
 * Where the service is, for a connection that follows many rooms: a URL of its `/ws`, or a host.
 *
 * @see client-sdk/README.md#fanoutclient
 */
export type ServiceAddress = Omit<RoomAddress, "room">;

/**
 * Builds the URL of the service's multiplexed connection (`/ws`), without
 * the token.
 *
 * @param address a URL of the connection, or a host (the page's when absent).
 * @returns a ws: or wss: URL.
 * @throws {TypeError} for an unusable address.
 *
 * @example
 * ```ts
 * multiplexSocketUrl({ host: "127.0.0.1:8787" }); // "ws://127.0.0.1:8787/ws"
 * ```
 *
 * @see client-sdk/README.md#many-rooms-over-one-connection
 */
export function multiplexSocketUrl(address: ServiceAddress): string {
  return socketUrl(address, address.url || MULTIPLEX_PATH);
}

/** `target` (a URL, or a path on the address's host) as a WebSocket URL with the open-mode identity. */
function socketUrl(address: ServiceAddress, target: string): string {
  const page = globalThis.location as Location | undefined;
  let url: URL;
  if (address.url) {
    url = new URL(target, page?.href);
  } else {
    const host = address.host ?? page?.host;
    if (!host) throw new TypeError("a url or a host is required outside a web page");
    let origin = host;
    if (!HAS_SCHEME.test(host)) {
      const secure = page ? page.protocol === "https:" : !LOOPBACK.test(host);
      origin = `${secure ? "wss" : "ws"}://${host}`;
    }
    url = new URL(target, origin);
  }
  if (url.protocol === "http:") url.protocol = "ws:";
  else if (url.protocol === "https:") url.protocol = "wss:";
  if (url.protocol !== "ws:" && url.protocol !== "wss:") {
    throw new TypeError(`unsupported URL scheme ${url.protocol}`);
  }
  if (address.member !== undefined) url.searchParams.set("member", address.member);
  if (address.info !== undefined) url.searchParams.set("info", JSON.stringify(address.info));
  return url.toString();
}

/** `url` with `token` as its `token` query parameter. */
export function withToken(url: string, token: string): string {
  const withIt = new URL(url);
  withIt.searchParams.set("token", token);
  return withIt.toString();
}

/** The room URL with the resume position the server should continue after. */
export function resumeUrl(base: string, since: number | undefined, epoch: string | undefined): string {
  if (since === undefined) return base;
  const url = new URL(base);
  url.searchParams.set("since", String(since));
  if (epoch !== undefined) url.searchParams.set("epoch", epoch);
  return url.toString();
}
