/**
 * The stock Pusher libraries as the suite uses them against a deployment:
 * pusher-js as an app's front end would configure it for a custom host, and
 * the `pusher` server SDK as its back end (signing channel authorizations and
 * sign-ins, calling the HTTP API). The suite speaks no Pusher of its own: a
 * deployment that these two cannot use fails, whatever it answers to a
 * hand-written client.
 */
import Pusher from "pusher-js";
import PusherServer from "pusher";

/** A Pusher app of the deployment: `--pusher-app-id`, `--pusher-key`, `--pusher-secret`. */
export interface PusherCredentials {
  appId: string;
  key: string;
  secret: string;
}

/** The app's back end: the stock server SDK pointed at the service (`secret` overrides the app's, to forge). */
export function pusherBackEnd(baseUrl: string, app: PusherCredentials, secret: string = app.secret): PusherServer {
  const url = new URL(baseUrl);
  const tls = url.protocol === "https:";
  return new PusherServer({ appId: app.appId, key: app.key, secret, host: url.hostname, port: url.port || (tls ? "443" : "80"), useTLS: tls });
}

export interface PusherClientOptions {
  /** The presence member it is: `user_id` and `user_info`, signed by the back end. */
  user?: { id: string; info?: Record<string, unknown> };
  /** Sign authorizations with another secret: every private and presence subscribe must be refused. */
  forged?: boolean;
}

/** A pusher-js client of the app on the service, authorized by the stock SDK. */
export function pusherClient(baseUrl: string, app: PusherCredentials, options: PusherClientOptions = {}): Pusher {
  const url = new URL(baseUrl);
  const tls = url.protocol === "https:";
  const port = Number(url.port || (tls ? 443 : 80));
  const signer = pusherBackEnd(baseUrl, app, options.forged ? `${app.secret}-forged` : app.secret);
  return new Pusher(app.key, {
    cluster: "conformance",
    wsHost: url.hostname,
    wsPort: port,
    wssPort: port,
    forceTLS: tls,
    enabledTransports: tls ? ["wss"] : ["ws"],
    disableStats: true,
    channelAuthorization: {
      endpoint: "/unused",
      transport: "ajax",
      customHandler: ({ socketId, channelName }, callback) => {
        const member = { user_id: options.user?.id ?? "conformance", ...(options.user?.info ? { user_info: options.user.info } : {}) };
        callback(null, channelName.startsWith("presence-") ? signer.authorizeChannel(socketId, channelName, member) : signer.authorizeChannel(socketId, channelName));
      },
    },
  });
}
