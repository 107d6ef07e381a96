/**
 * A chunked request body that never ends, as a hostile client sends it: written
 * as fast as the connection takes it, whatever comes back, until the connection
 * ends. The endless-upload benchmark measures it; test/service/hardening-bodies.test.ts
 * holds the server to refusing it within the drain docs/security.md documents.
 */
import { connect } from "node:net";

export interface EndlessUploadOptions {
  port: number;
  path?: string;
  /** Given up after this long, the connection still open (a finding: the server never refused it). */
  timeoutMs?: number;
}

export interface EndlessUploadEnd {
  /** The answer's status, or null when none arrived. */
  status: string | null;
  /** Whether the connection ended (false: still open at the timeout). */
  ended: boolean;
  /** How it ended: "closed", an error code, or the timeout. */
  how: string;
  /** Bytes the kernel took from this writer by then (written, less what still waits in Node's buffer). */
  taken: number;
}

/** Uploads to `path` on 127.0.0.1:`port` until the connection ends (or `timeoutMs`). */
export function endlessUpload({ port, path = "/rooms/endless/publish", timeoutMs = 30_000 }: EndlessUploadOptions): Promise<EndlessUploadEnd> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: "127.0.0.1", allowHalfOpen: true });
    const data = Buffer.alloc(65_536, 0x61);
    const chunk = Buffer.concat([Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from("\r\n")]);
    let answer = "";
    let done = false;
    const finish = (how: string, ended: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      const taken = socket.bytesWritten - socket.writableLength;
      socket.destroy();
      resolve({ status: /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? null, ended, how, taken });
    };
    const timer = setTimeout(() => finish(`still open after ${timeoutMs} ms`, false), timeoutMs);
    const pump = (): void => {
      while (!done) {
        if (!socket.write(chunk)) return void socket.once("drain", pump);
      }
    };
    socket.on("connect", () => {
      socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n`);
      pump();
    });
    socket.on("data", (bytes: Buffer) => (answer += bytes.toString("latin1")));
    socket.on("error", (error: NodeJS.ErrnoException) => finish(error.code ?? "error", true));
    socket.on("close", () => finish("closed", true));
  });
}
