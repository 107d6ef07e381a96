import { isValidRoomName, roomSocketPath } from "./protocol.js";

/** Where a room lives: a full URL, or a host plus a room name. */
export interface RoomAddress {
  /** WebSocket URL of the room (ws:, wss:, http: or https:), e.g. "wss://example.com/rooms/lobby/ws". */
  url?: string;
  /** Host of the service, with or without a scheme, e.g. "example.com" or "http://127.0.0.1:8787". Defaults to the page's host. */
  host?: string;
  /** Room name; required with `host`. */
  room?: string;
  /** Access token, sent as the `token` query parameter (browsers cannot set headers on a WebSocket). */
  token?: string;
}

const HAS_SCHEME = /^[a-z][a-z0-9+.-]*:\/\//i;
const LOOPBACK = /^(localhost|127\.|\[::1\])/;

/** Builds the WebSocket URL of a room; throws a TypeError for an unusable address. */
export function roomSocketUrl(address: RoomAddress): string {
  const page = globalThis.location as Location | undefined;
  let url: URL;
  if (address.url) {
    url = new URL(address.url, page?.href);
  } else {
    const { room } = address;
    if (room === undefined || !isValidRoomName(room)) {
      throw new TypeError(`invalid room name ${JSON.stringify(room)}`);
    }
    const host = address.host ?? page?.host;
    if (!host) throw new TypeError("a url or a host is required outside a web page");
    let origin = host;
    if (!HAS_SCHEME.test(host)) {
      const secure = page ? page.protocol === "https:" : !LOOPBACK.test(host);
      origin = `${secure ? "wss" : "ws"}://${host}`;
    }
    url = new URL(roomSocketPath(room), origin);
  }
  if (url.protocol === "http:") url.protocol = "ws:";
  else if (url.protocol === "https:") url.protocol = "wss:";
  if (url.protocol !== "ws:" && url.protocol !== "wss:") {
    throw new TypeError(`unsupported URL scheme ${url.protocol}`);
  }
  if (address.token) url.searchParams.set("token", address.token);
  return url.toString();
}

/** The room URL with the resume position the server should continue after. */
export function resumeUrl(base: string, since: number | undefined, epoch: string | undefined): string {
  if (since === undefined) return base;
  const url = new URL(base);
  url.searchParams.set("since", String(since));
  if (epoch !== undefined) url.searchParams.set("epoch", epoch);
  return url.toString();
}
