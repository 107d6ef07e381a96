/**
 * The stock Pusher libraries against the local server: pusher-js as an app's
 * front end would configure it (a custom host, plain `ws`, no fallbacks), and
 * the `pusher` server SDK as its back end would (signing channel
 * authorizations and sign-ins, calling the HTTP API). Nothing here speaks
 * Pusher itself: that is the point.
 */
import Pusher, { type Channel } from "pusher-js";
import WebSocket from "ws";
import PusherServer from "pusher";
import type { LocalServer } from "./server";
import { until } from "./wait";

/** The app the tests' servers serve. */
export const APP = { id: "4242", key: "test-app-key", secret: "test-app-secret" } as const;

/** The vars that turn the front door on for APP (with client events, unless `clientEvents` is false). */
export function pusherVars(options: { clientEvents?: boolean } = {}): Record<string, string> {
  return { PUSHER_APP_ID: APP.id, PUSHER_APP_KEY: APP.key, PUSHER_APP_SECRET: APP.secret, PUSHER_CLIENT_EVENTS: options.clientEvents === false ? "0" : "1" };
}

/** The app's back end: the stock server SDK pointed at the local server (with another secret or key, a stranger's). */
export function backEnd(server: LocalServer, secret: string = APP.secret, key: string = APP.key): PusherServer {
  return new PusherServer({ appId: APP.id, key, secret, host: "127.0.0.1", port: String(server.port), useTLS: false });
}

/**
 * A request of the HTTP API signed by the SDK's own signer
 * (createSignedQueryString), for what the SDK's methods would not send:
 * bodies it would refuse to build, another body than the one signed, stale
 * clocks, parameters twice.
 */
export async function signedRequest(
  server: LocalServer,
  method: "GET" | "POST",
  path: string,
  options: {
    body?: string;
    /** A body sent in place of the one signed. */
    sentBody?: string;
    params?: Record<string, string>;
    appId?: string;
    /** Changes the signed query before it is sent. */
    query?: (signed: string) => string;
  } = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const fullPath = `/apps/${options.appId ?? APP.id}${path}`;
  const signed = backEnd(server).createSignedQueryString({ method, path: fullPath, ...(options.body === undefined ? {} : { body: options.body }), ...(options.params ? { params: options.params } : {}) });
  const body = options.sentBody ?? options.body;
  const response = await fetch(`${server.url}${fullPath}?${options.query ? options.query(signed) : signed}`, {
    method,
    ...(body === undefined ? {} : { body, headers: { "content-type": "application/json" } }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

export interface FrontEndOptions {
  /** The presence member this client is (`user_id`, `user_info`), signed by the back end. */
  user?: { id: string; info?: Record<string, unknown> };
  /** Sign in as this user (`pusher.signin()`). */
  signin?: { id: string; watchlist?: string[] };
  /** Signatures from another secret: every private and presence subscribe is refused. */
  badSignatures?: boolean;
}

/** A pusher-js client of APP on the local server, authorized by `backEnd`'s SDK, as an app would wire it. */
export function frontEnd(server: LocalServer, options: FrontEndOptions = {}): Pusher {
  const signer = backEnd(server, options.badSignatures ? "not-the-secret" : APP.secret);
  const client = new Pusher(APP.key, {
    cluster: "local",
    wsHost: "127.0.0.1",
    wsPort: server.port,
    forceTLS: false,
    enabledTransports: ["ws"],
    disableStats: true,
    channelAuthorization: {
      endpoint: "/unused",
      transport: "ajax",
      customHandler: ({ socketId, channelName }, callback) => {
        const member = options.user ? { user_id: options.user.id, ...(options.user.info ? { user_info: options.user.info } : {}) } : undefined;
        callback(null, channelName.startsWith("presence-") ? signer.authorizeChannel(socketId, channelName, member ?? { user_id: "anonymous" }) : signer.authorizeChannel(socketId, channelName));
      },
    },
    userAuthentication: {
      endpoint: "/unused",
      transport: "ajax",
      customHandler: ({ socketId }, callback) => {
        callback(null, signer.authenticateUser(socketId, { id: options.signin?.id ?? "nobody", ...(options.signin?.watchlist ? { watchlist: options.signin.watchlist } : {}) }));
      },
    },
  });
  if (options.signin) client.signin();
  return client;
}

/** Waits until the client is connected; returns its socket id. */
export async function connected(client: Pusher, timeoutMs = 10_000): Promise<string> {
  await until(() => client.connection.state === "connected", { timeoutMs, what: "pusher-js to connect" });
  return client.connection.socket_id;
}

/**
 * A webhook receiver's check, by the server SDK's own `webhook(request).isValid()`:
 * the app's key and secret (or `secret`), and `Content-Type: application/json`.
 */
export function pusherWebhookCheck(secret: string = APP.secret): (request: { headers: Record<string, unknown>; rawBody: string }) => boolean {
  const sdk = new PusherServer({ appId: APP.id, key: APP.key, secret, host: "127.0.0.1" });
  return (request) => sdk.webhook({ headers: request.headers, rawBody: request.rawBody }).isValid();
}

/** Every event a channel saw, in order, with its data. */
export class Recorder {
  readonly events: { event: string; data: unknown }[] = [];

  constructor(channel: Channel) {
    channel.bind_global((event: string, data: unknown) => {
      this.events.push({ event, data });
    });
  }

  of(event: string): unknown[] {
    return this.events.filter((e) => e.event === event).map((e) => e.data);
  }

  async waitFor(event: string, count = 1, timeoutMs = 10_000): Promise<unknown[]> {
    await until(() => this.of(event).length >= count, { timeoutMs, what: `${count} ${event} event(s)` });
    return this.of(event);
  }
}

/** Subscribes `client` to `name` and records what the channel sees. */
export function record(client: Pusher, name: string): Recorder {
  return new Recorder(client.subscribe(name));
}

/** A Pusher event as a raw client reads it: `data` decoded once more when it is a JSON string (Pusher's double encoding). */
export interface RawPusherEvent {
  event: string;
  channel?: string;
  data: unknown;
  user_id?: string;
  /** The frame's `data` as it came, before that decoding. */
  rawData: unknown;
}

/**
 * A raw Pusher connection, for what stock clients never do: frames out of
 * protocol, pongs nobody asked for, a reader that stops reading. It answers
 * the server's pings unless told not to.
 */
export class PusherSocket {
  readonly ws: WebSocket;
  readonly events: RawPusherEvent[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  closeCode: number | null = null;
  answerPings = true;

  private constructor(ws: WebSocket) {
    this.ws = ws;
    this.closed = new Promise((resolve) => ws.on("close", (code, reason) => {
      this.closeCode = code;
      resolve({ code, reason: reason.toString() });
    }));
    ws.on("message", (raw) => {
      const frame = JSON.parse(raw.toString()) as { event: string; channel?: string; data?: unknown; user_id?: string };
      let data = frame.data;
      if (typeof data === "string") {
        try {
          data = JSON.parse(data) as unknown;
        } catch {
          // A plain string stays one.
        }
      }
      this.events.push({ event: frame.event, data, rawData: frame.data, ...(frame.channel === undefined ? {} : { channel: frame.channel }), ...(frame.user_id === undefined ? {} : { user_id: frame.user_id }) });
      if (frame.event === "pusher:ping" && this.answerPings) this.send({ event: "pusher:pong", data: {} });
    });
  }

  /** Opens `/app/{key}` on `server` (query as given, `protocol=7` by default). */
  static async open(server: LocalServer, options: { key?: string; query?: string } = {}): Promise<PusherSocket> {
    const ws = new WebSocket(`${server.wsUrl}/app/${options.key ?? APP.key}?${options.query ?? "protocol=7&client=raw&version=1.0"}`);
    const socket = new PusherSocket(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    return socket;
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === "string" ? frame : JSON.stringify(frame));
  }

  subscribe(channel: string, extra: Record<string, unknown> = {}): void {
    this.send({ event: "pusher:subscribe", data: { channel, ...extra } });
  }

  of(event: string, channel?: string): RawPusherEvent[] {
    return this.events.filter((e) => e.event === event && (channel === undefined || e.channel === channel));
  }

  async waitFor(event: string, count = 1, timeoutMs = 10_000, channel?: string): Promise<RawPusherEvent[]> {
    await until(() => this.of(event, channel).length >= count || this.closeCode !== null, { timeoutMs, what: `${count} ${event} event(s)` });
    return this.of(event, channel);
  }

  /** The socket id of `pusher:connection_established`. */
  async socketId(): Promise<string> {
    const [established] = await this.waitFor("pusher:connection_established");
    return (established?.data as { socket_id: string }).socket_id;
  }

  /** Stops reading: the server's frames pile up in the kernel's buffers, and pings go unanswered. */
  pauseReading(): void {
    (this.ws as unknown as { _socket: { pause(): void } })._socket.pause();
  }

  close(): void {
    this.ws.close();
  }
}
