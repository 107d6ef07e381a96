// A chunked request body that never ends, as a hostile client sends it: written
// as fast as the connection takes it, whatever comes back, until the connection
// ends. Used by load/bench/storm.mjs (--endless-uploads) and by
// test/node/hardening-bodies.test.ts, which hold the server to refusing it within
// the drain docs/security.md documents.
import { connect } from "node:net";

/**
 * Uploads to `path` on 127.0.0.1:`port` until the connection ends (or `timeoutMs`).
 * Resolves with the answer's status (null when none arrived), whether the
 * connection ended, how, and the bytes the kernel took from this writer by then.
 * @param {{ port: number; path?: string; timeoutMs?: number }} options
 * @returns {Promise<{ status: string | null; ended: boolean; how: string; taken: number }>}
 */
export function endlessUpload({ port, path = "/rooms/endless/publish", timeoutMs = 30_000 }) {
  return new Promise((resolve) => {
    const socket = connect({ port, host: "127.0.0.1", allowHalfOpen: true });
    const data = Buffer.alloc(65_536, 0x61);
    const chunk = Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from("\r\n")]);
    let answer = "";
    let done = false;
    /** @param {string} how @param {boolean} ended */
    const finish = (how, ended) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      // Written, less what still waits in Node's own buffer.
      const taken = socket.bytesWritten - socket.writableLength;
      socket.destroy();
      resolve({ status: /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? null, ended, how, taken });
    };
    const timer = setTimeout(() => finish(`still open after ${timeoutMs} ms`, false), timeoutMs);
    const pump = () => {
      while (!done) {
        if (!socket.write(chunk)) return void socket.once("drain", pump);
      }
    };
    socket.on("connect", () => {
      socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n`);
      pump();
    });
    socket.on("data", (bytes) => (answer += bytes.toString("latin1")));
    socket.on("error", (error) => finish(/** @type {NodeJS.ErrnoException} */ (error).code ?? "error", true));
    socket.on("close", () => finish("closed", true));
  });
}
