// The public listening socket. The launcher binds it, not workerd: a port that
// is taken is then reported before anything starts, and a socket this process
// bound cannot be answered by anyone else (such as a workerd left over from an
// earlier run).

import { createServer } from "node:net";

/** Bound by someone else, or not bindable at all: the message says which. */
export class PortError extends Error {}

/**
 * Binds host:port and resolves with the listening server.
 * @param {string} host
 * @param {number} port
 * @param {(socket: import("node:net").Socket) => void} onConnection
 */
export function listenPublic(host, port, onConnection) {
  return new Promise((resolve, reject) => {
    // allowHalfOpen: a relayed client that half-closes still gets its answer (gate.mjs).
    const server = createServer({ noDelay: true, allowHalfOpen: true }, onConnection);
    server.once("error", (error) => {
      const code = /** @type {NodeJS.ErrnoException} */ (error).code;
      if (code === "EADDRINUSE") {
        reject(new PortError(`${host}:${port} is already in use (another server, or one left running); stop it or set PORT`));
      } else if (code === "EACCES") {
        reject(new PortError(`${host}:${port} may not be bound by this user; set PORT above 1023`));
      } else {
        reject(new PortError(`cannot listen on ${host}:${port}: ${code ?? error}`));
      }
    });
    // exclusive: never share the handle with cluster workers.
    server.listen({ host, port, exclusive: true, backlog: 511 }, () => resolve(server));
  });
}

/** Binds and releases host:port, to fail fast before the slow part of a start. */
export async function assertPortFree(host, port) {
  if (port === 0) return;
  const server = await listenPublic(host, port, (socket) => socket.destroy());
  await new Promise((resolve) => server.close(resolve));
}
