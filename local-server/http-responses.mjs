// Follows workerd's answers on one relayed connection, to tell the accept gate
// which answer ends which request: when a request that asked to switch
// protocols got its 101 (the connection is a WebSocket from the next byte) or
// a refusal (it is still HTTP), and when nothing is owed any more (the gate may
// then answer the client itself). The bytes themselves are relayed as they
// are; this only reads their framing, and never buffers more than a head.
//
// workerd writes every answer with Content-Length or chunked framing, CRLF
// line ends and no trailers; anything else is reported as broken, and the
// relay then ends the connection rather than guess.

const MAX_HEAD_BYTES = 128 * 1024;
const MAX_CHUNK_LINE = 18;

/**
 * @typedef {{ method: string; switching: boolean }} Asked a request forwarded to workerd
 * @typedef {{ type: "switched"; request: Asked }} SwitchedEvent
 *   a 101 to a switching request: the rest of this chunk, and everything after, is WebSocket
 * @typedef {{ type: "refused"; request: Asked; status: number }} RefusedEvent a switching request answered without a switch
 * @typedef {{ type: "answered"; request: Asked }} AnsweredEvent an answer is complete
 * @typedef {{ type: "broken"; reason: string }} BrokenEvent framing this cannot follow
 * @typedef {SwitchedEvent | RefusedEvent | AnsweredEvent | BrokenEvent} ResponseEvent
 */

export function createResponseReader() {
  /** @type {Asked[]} */
  const asked = [];
  /** Unfinished head or chunk-size line. */
  let partial = Buffer.alloc(0);
  /** @type {"head" | "length" | "chunk-line" | "chunk-data" | "chunk-crlf" | "trailer" | "until-close" | "switched" | "broken"} */
  let state = "head";
  let left = 0;

  /**
   * Reads one head at the start of `bytes`; returns how many bytes it took, or -1 if incomplete.
   * @param {Buffer} bytes @param {ResponseEvent[]} events
   */
  const readHead = (bytes, events) => {
    const end = bytes.indexOf("\r\n\r\n", 0, "latin1");
    if (end === -1) return -1;
    const text = bytes.toString("latin1", 0, end);
    const status = Number(/^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(text)?.[1] ?? NaN);
    const request = asked[0];
    if (!request || Number.isNaN(status)) {
      state = "broken";
      events.push({ type: "broken", reason: request ? "malformed status line" : "an answer to no request" });
      return end + 4;
    }
    /** @param {string} name */
    const field = (name) => new RegExp(`\\r\\n${name}:[ \\t]*([^\\r]*?)[ \\t]*(?=\\r\\n|$)`, "i").exec(text)?.[1];
    if (status === 101) {
      if (!request.switching) {
        state = "broken";
        events.push({ type: "broken", reason: "a switch nobody asked for" });
        return end + 4;
      }
      asked.shift();
      state = "switched";
      events.push({ type: "switched", request });
      return end + 4;
    }
    // Interim answers (100 Continue, 103) precede the real one.
    if (status < 200) return end + 4;
    if (request.switching) events.push({ type: "refused", request, status });
    const coding = field("transfer-encoding");
    const declared = field("content-length");
    if (request.method === "HEAD" || status === 204 || status === 304) {
      complete(events);
    } else if (coding !== undefined) {
      if (coding.toLowerCase() !== "chunked") {
        state = "broken";
        events.push({ type: "broken", reason: "a transfer coding other than chunked" });
      } else state = "chunk-line";
    } else if (declared !== undefined && /^\d{1,15}$/.test(declared)) {
      left = Number(declared);
      if (left === 0) complete(events);
      else state = "length";
    } else {
      state = "until-close";
    }
    return end + 4;
  };

  /** @param {ResponseEvent[]} events */
  const complete = (events) => {
    const request = /** @type {Asked} */ (asked.shift());
    state = "head";
    events.push({ type: "answered", request });
  };

  return {
    /** A request was forwarded; its answer comes after those of the requests before it. @param {Asked} request */
    expect(request) {
      asked.push(request);
    },
    /** Answers still owed. */
    owed: () => asked.length,
    /**
     * Reads the framing of `chunk` (relayed by the caller, untouched).
     * @param {Buffer} chunk
     * @returns {ResponseEvent[]}
     */
    observe(chunk) {
      /** @type {ResponseEvent[]} */
      const events = [];
      let bytes = partial.length === 0 ? chunk : Buffer.concat([partial, chunk]);
      partial = Buffer.alloc(0);
      let i = 0;
      while (i < bytes.length) {
        if (state === "switched" || state === "until-close" || state === "broken") break;
        if (state === "head") {
          const took = readHead(bytes.subarray(i), events);
          if (took === -1) {
            if (bytes.length - i > MAX_HEAD_BYTES) {
              state = "broken";
              events.push({ type: "broken", reason: "an answer head too large" });
            } else partial = Buffer.from(bytes.subarray(i));
            break;
          }
          i += took;
        } else if (state === "length" || state === "chunk-data") {
          const n = Math.min(left, bytes.length - i);
          left -= n;
          i += n;
          if (left === 0) {
            if (state === "length") complete(events);
            else state = "chunk-crlf";
          }
        } else if (state === "chunk-line" || state === "chunk-crlf" || state === "trailer") {
          const end = bytes.indexOf("\r\n", i, "latin1");
          if (end === -1) {
            if (bytes.length - i > MAX_CHUNK_LINE) {
              state = "broken";
              events.push({ type: "broken", reason: "malformed chunk" });
            } else partial = Buffer.from(bytes.subarray(i));
            break;
          }
          const line = bytes.toString("latin1", i, end);
          i = end + 2;
          if (state === "chunk-crlf") {
            if (line !== "") {
              state = "broken";
              events.push({ type: "broken", reason: "malformed chunk" });
            } else state = "chunk-line";
          } else if (state === "trailer") {
            if (line === "") complete(events);
          } else {
            const size = /^[0-9A-Fa-f]{1,13}(?:;.*)?$/.test(line) ? parseInt(line, 16) : NaN;
            if (Number.isNaN(size)) {
              state = "broken";
              events.push({ type: "broken", reason: "malformed chunk" });
            } else if (size === 0) state = "trailer";
            else {
              left = size;
              state = "chunk-data";
            }
          }
        }
      }
      return events;
    },
  };
}
