import type { ErrorCode } from "../protocol";

export type BodyRead =
  | { ok: true; bytes: Uint8Array }
  | { ok: false; status: 400 | 408 | 413; error: ErrorCode; message: string };

export interface BodyLimits {
  /** Largest body accepted. */
  maxBytes: number;
  /** Bytes past `maxBytes` read and thrown away before answering 413 (see readBody). */
  drainBytes: number;
  /** Time the whole body has to arrive in. */
  deadlineMs: number;
}

/** What an oversize upload may cost before the 413 goes out regardless: bounded, so draining is no amplifier. */
export const DRAIN_BYTES = 16 * 1024 * 1024;
/** A body that trickles in holds a connection (and, locally, a descriptor); ten seconds is plenty on any link that can publish. */
export const BODY_DEADLINE_MS = 10_000;

export function bodyLimits(maxBytes: number): BodyLimits {
  return { maxBytes, drainBytes: DRAIN_BYTES, deadlineMs: BODY_DEADLINE_MS };
}

const tooLarge = (limits: BodyLimits): BodyRead => ({
  ok: false,
  status: 413,
  error: "too_large",
  message: `request body over ${limits.maxBytes} bytes`,
});

/**
 * Reads a request body of at most `limits.maxBytes` bytes.
 *
 * An oversize body is read to its end and discarded (up to `drainBytes` past the
 * limit) before the 413 is sent. Answering while the client is still uploading
 * makes the runtime close the connection under the upload (workerd waits 1 s or
 * 64 KiB for an unread body), and the client then sees a connection reset
 * instead of the answer. A body declared longer than the drain bound is refused
 * at once: its sender cannot be helped.
 *
 * A body the runtime cannot read (malformed chunked framing, a connection that
 * broke) is a 400, not an internal error; one that has not arrived within
 * `deadlineMs` is a 408.
 */
export async function readBody(request: Request, limits: BodyLimits): Promise<BodyRead> {
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > limits.maxBytes + limits.drainBytes) return tooLarge(limits);
  const body = request.body;
  if (body === null) return { ok: true, bytes: new Uint8Array(0) };
  // A body declared within the limit (every publish through an HTTP client library) is read in
  // one native call: no chunk loop, one race against the deadline.
  if (declared !== null && /^\d+$/.test(declared) && Number(declared) <= limits.maxBytes) return await readDeclared(request, limits);

  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  const deadline = bodyDeadline(limits);
  try {
    for (;;) {
      const next = await Promise.race([reader.read(), deadline.timedOut]);
      if (next === "timeout") {
        void reader.cancel().catch(() => undefined);
        return timedOutRead(limits);
      }
      if (next.done) break;
      total += next.value.byteLength;
      if (total > limits.maxBytes + limits.drainBytes) {
        void reader.cancel().catch(() => undefined);
        return tooLarge(limits);
      }
      // Past the limit nothing more is kept: the rest is only read so the answer can be.
      if (total <= limits.maxBytes) chunks.push(next.value);
    }
  } catch {
    return { ok: false, status: 400, error: "bad_request", message: "the request body could not be read (malformed framing or a broken upload)" };
  } finally {
    deadline.clear();
  }
  if (total > limits.maxBytes) return tooLarge(limits);
  if (chunks.length === 1) return { ok: true, bytes: chunks[0] as Uint8Array };
  const bytes = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return { ok: true, bytes };
}

/** A body whose Content-Length is within the limit: the runtime enforces that length, so it cannot grow past it. */
async function readDeclared(request: Request, limits: BodyLimits): Promise<BodyRead> {
  const deadline = bodyDeadline(limits);
  try {
    const read = await Promise.race([request.arrayBuffer(), deadline.timedOut]);
    if (read === "timeout") {
      void request.body?.cancel().catch(() => undefined);
      return timedOutRead(limits);
    }
    if (read.byteLength > limits.maxBytes) return tooLarge(limits);
    return { ok: true, bytes: new Uint8Array(read) };
  } catch {
    return { ok: false, status: 400, error: "bad_request", message: "the request body could not be read (malformed framing or a broken upload)" };
  } finally {
    deadline.clear();
  }
}

/** The whole body's deadline: one timer per request, raced against each read. */
function bodyDeadline(limits: BodyLimits): { timedOut: Promise<"timeout">; clear: () => void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), limits.deadlineMs);
  });
  return {
    timedOut,
    clear: () => {
      if (timer !== undefined) clearTimeout(timer);
    },
  };
}

const timedOutRead = (limits: BodyLimits): BodyRead => ({
  ok: false,
  status: 408,
  error: "bad_request",
  message: `the request body did not arrive within ${limits.deadlineMs / 1000} s`,
});
