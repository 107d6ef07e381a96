// The accept gate: used when the descriptor limit is one a connection storm can
// exhaust (limits.mjs). The launcher accepts every connection and
// relays it to workerd over a Unix socket, so workerd only ever holds as many
// connections as the gate lets through, and an accept() in workerd never meets
// EMFILE. Node survives EMFILE itself: libuv then accepts and drops connections
// with a descriptor it keeps in reserve.
//
// - A connection is relayed once its first request head is complete; one that
//   has not sent it within `headMs` is closed (answered 408 if it sent part of
//   one). Waiting connections take what the descriptor budget leaves (two per
//   relayed connection, one per waiting one); past it, new connections are
//   closed as they arrive. Idle connections never reach workerd.
// - At `maxConnections` relayed connections, a new one is answered 503
//   over_capacity (Retry-After) and closed. WebSocket upgrades are judged by
//   their own request head, whichever request of the connection they are, and
//   stop `reservedForHttp` earlier, so a full house of sockets still leaves
//   room for publishing and stats.
// - Requests and answers are relayed untouched; a WebSocket client's frame
//   headers are followed, and a message over `maxMessageBytes` closes the
//   connection with 1009 before workerd buffers it (relay.mjs,
//   frame-guard.mjs). A connection is released when either side is done, after
//   a bounded wait for the other.

import { relayConnection } from "./relay.mjs";

const REPORT_INTERVAL_MS = 5000;

/**
 * Starts relaying the connections `server` accepts.
 * @param {import("node:net").Server} server listening on the public address, with allowHalfOpen
 * @param {{ upstreamPath: string; descriptors: number; maxConnections: number; reservedForHttp: number;
 *   headMs: number; maxHeadBytes: number; headBytesBudget: number; maxMessageBytes: number;
 *   report: (line: Record<string, number>) => void }} options
 */
export function startGate(server, options) {
  const maxSockets = Math.max(1, options.maxConnections - options.reservedForHttp);
  let relayed = 0;
  let pending = 0;
  let sockets = 0;
  let headBytes = 0;
  const counts = { refused: 0, idleClosed: 0, badRequests: 0, dropped: 0, tooBig: 0, abandoned: 0, acceptErrors: 0, upstreamErrors: 0 };
  let reported = { ...counts };
  let reportedLevels = "0/0/0";

  /** @type {import("./relay.mjs").GateLease} */
  const lease = {
    upstreamPath: options.upstreamPath,
    maxHeadBytes: options.maxHeadBytes,
    headMs: options.headMs,
    maxMessageBytes: options.maxMessageBytes,
    admit(switching) {
      if (relayed >= options.maxConnections || (switching && sockets >= maxSockets)) return false;
      pending -= 1;
      relayed += 1;
      if (switching) sockets += 1;
      return true;
    },
    admitSocket() {
      if (sockets >= maxSockets) return false;
      sockets += 1;
      return true;
    },
    releaseSocket() {
      sockets -= 1;
    },
    upstreamDone(socket) {
      relayed -= 1;
      pending += 1;
      if (socket) sockets -= 1;
    },
    holdHeadBytes(delta) {
      headBytes += delta;
      // Only a connection that asks for more is turned away.
      return delta <= 0 || headBytes <= options.headBytesBudget;
    },
    count(name) {
      counts[name] += 1;
    },
    released(slots) {
      if (slots.relayed) relayed -= 1;
      else pending -= 1;
      if (slots.socket) sockets -= 1;
    },
  };

  server.on("connection", (client) => {
    if (2 * relayed + pending >= options.descriptors) {
      counts.dropped += 1;
      client.on("error", () => undefined);
      client.destroy();
      return;
    }
    pending += 1;
    relayConnection(client, lease);
  });
  // accept() failures (EMFILE after libuv dropped the connection): keep serving.
  server.on("error", () => {
    counts.acceptErrors += 1;
  });

  // A line when something was counted or the levels moved, so that the last
  // line always shows where the levels settled.
  const reporter = setInterval(() => {
    const levels = `${relayed}/${sockets}/${pending}`;
    const changed = levels !== reportedLevels || Object.keys(counts).some((k) => counts[k] !== reported[k]);
    if (!changed) return;
    reportedLevels = levels;
    const delta = Object.fromEntries(Object.keys(counts).map((k) => [k, counts[k] - reported[k]]));
    reported = { ...counts };
    options.report({ ...delta, relayed, sockets, pending });
  }, REPORT_INTERVAL_MS);
  reporter.unref();

  return {
    stats: () => ({ relayed, sockets, pending, headBytes, ...counts }),
    /** Stops accepting; relayed connections end with the process. */
    close: () => {
      clearInterval(reporter);
      server.close();
    },
  };
}
