// The accept gate: used when the descriptor limit is one a connection storm can
// exhaust (limits.mjs). The launcher accepts every connection and
// relays it to workerd over a Unix socket, so workerd only ever holds as many
// connections as the gate lets through, and an accept() in workerd never meets
// EMFILE. Node survives EMFILE itself: libuv then accepts and drops connections
// with a descriptor it keeps in reserve.
//
// - A connection waits for its first bytes before it is relayed; one that sends
//   nothing within `firstByteMs` is closed. Waiting connections take what the
//   descriptor budget leaves (two per relayed connection, one per waiting one);
//   past it, new connections are closed as they arrive. Idle connections never
//   reach workerd.
// - At `maxConnections` relayed connections, a new one is answered 503
//   over_capacity (Retry-After) and closed. WebSocket upgrades stop
//   `reservedForHttp` earlier, so a full house of sockets still leaves room
//   for publishing and stats.
// - Relayed connections are piped both ways with backpressure, untouched,
//   except that a WebSocket client's frame headers are followed: a message
//   over `maxMessageBytes` closes the connection with 1009 before workerd
//   buffers it (frame-guard.mjs).

import { connect } from "node:net";
import { createFrameGuard, tooBigCloseFrame } from "./frame-guard.mjs";

const REFUSAL_BODY = JSON.stringify({ error: "over_capacity", message: "the server is at its connection limit; retry later" });
const REFUSAL =
  "HTTP/1.1 503 Service Unavailable\r\n" +
  "Content-Type: application/json\r\n" +
  "Retry-After: 5\r\n" +
  "Connection: close\r\n" +
  `Content-Length: ${Buffer.byteLength(REFUSAL_BODY)}\r\n\r\n${REFUSAL_BODY}`;
/** A WebSocket handshake names itself in its request head, which arrives in the first read. */
const UPGRADE = /\r\nupgrade:[ \t]*websocket/i;
/** @param {Buffer} first */
const isUpgrade = (first) => {
  const head = first.subarray(0, 8192).toString("latin1");
  const end = head.indexOf("\r\n\r\n");
  return UPGRADE.test(end === -1 ? head : head.slice(0, end));
};
/** A refused client that does not close its end is closed for it. */
const REFUSED_LINGER_MS = 1000;
const REPORT_INTERVAL_MS = 5000;

/**
 * Starts relaying the connections `server` accepts.
 * @param {import("node:net").Server} server listening on the public address
 * @param {{ upstreamPath: string; descriptors: number; maxConnections: number; reservedForHttp: number;
 *   firstByteMs: number; maxMessageBytes: number; report: (line: Record<string, number>) => void }} options
 */
export function startGate(server, options) {
  const maxUpgrades = Math.max(1, options.maxConnections - options.reservedForHttp);
  let relayed = 0;
  let pending = 0;
  const counts = { refused: 0, idleClosed: 0, dropped: 0, tooBig: 0, acceptErrors: 0, upstreamErrors: 0 };
  let reported = { ...counts };

  /**
   * Client to workerd for a WebSocket: as a pipe, through the frame guard. A
   * refused message is answered with a close frame while the rest of what the
   * client sends is read and dropped, so that the close frame is read rather
   * than lost to a connection reset; workerd's side is closed at once.
   * @param {import("node:net").Socket} client @param {import("node:net").Socket} upstream
   * @param {Buffer} first @param {() => void} detach stops the upstream's close from closing the client
   */
  const guarded = (client, upstream, first, detach) => {
    const guard = createFrameGuard(options.maxMessageBytes);
    let refused = false;
    const forward = (chunk) => {
      if (refused) return;
      if (!guard.feed(chunk)) {
        refused = true;
        counts.tooBig += 1;
        detach();
        upstream.destroy();
        client.resume();
        client.end(tooBigCloseFrame(options.maxMessageBytes));
        setTimeout(() => client.destroy(), REFUSED_LINGER_MS).unref();
        return;
      }
      if (!upstream.write(chunk)) client.pause();
    };
    upstream.on("drain", () => client.resume());
    client.once("end", () => upstream.end());
    client.on("data", forward);
    forward(first);
    client.resume();
  };

  /** @param {import("node:net").Socket} client @param {Buffer} first */
  const relay = (client, first) => {
    relayed += 1;
    client.pause();
    const upstream = connect({ path: options.upstreamPath, allowHalfOpen: true });
    let done = false;
    let attached = true;
    const finish = () => {
      if (done) return;
      done = true;
      relayed -= 1;
      client.destroy();
      upstream.destroy();
    };
    upstream.on("error", () => {
      counts.upstreamErrors += 1;
      if (attached) finish();
    });
    client.once("close", finish);
    upstream.once("close", () => {
      if (attached) finish();
    });
    if (isUpgrade(first)) {
      guarded(client, upstream, first, () => (attached = false));
    } else {
      upstream.write(first);
      client.pipe(upstream);
    }
    upstream.pipe(client);
  };

  server.on("connection", (client) => {
    // Resets and broken pipes from clients are routine; each socket's own close handler cleans up.
    client.on("error", () => undefined);
    if (2 * relayed + pending >= options.descriptors) {
      counts.dropped += 1;
      client.destroy();
      return;
    }
    pending += 1;
    let waiting = true;
    const stopWaiting = () => {
      if (waiting) {
        waiting = false;
        pending -= 1;
      }
    };
    const timer = setTimeout(() => {
      counts.idleClosed += 1;
      client.destroy();
    }, options.firstByteMs);
    client.once("close", () => {
      clearTimeout(timer);
      stopWaiting();
    });
    client.once("data", (first) => {
      clearTimeout(timer);
      if (relayed >= (isUpgrade(first) ? maxUpgrades : options.maxConnections)) {
        // Counted as waiting until it closes: it still holds a descriptor.
        counts.refused += 1;
        client.end(REFUSAL);
        setTimeout(() => client.destroy(), REFUSED_LINGER_MS).unref();
        return;
      }
      stopWaiting();
      relay(client, first);
    });
  });
  // accept() failures (EMFILE after libuv dropped the connection): keep serving.
  server.on("error", () => {
    counts.acceptErrors += 1;
  });

  const reporter = setInterval(() => {
    const changed = Object.keys(counts).some((k) => counts[k] !== reported[k]);
    if (!changed) return;
    const delta = Object.fromEntries(Object.keys(counts).map((k) => [k, counts[k] - reported[k]]));
    reported = { ...counts };
    options.report({ ...delta, relayed, pending });
  }, REPORT_INTERVAL_MS);
  reporter.unref();

  return {
    stats: () => ({ relayed, pending, ...counts }),
    /** Stops accepting; relayed connections end with the process. */
    close: () => {
      clearInterval(reporter);
      server.close();
    },
  };
}
