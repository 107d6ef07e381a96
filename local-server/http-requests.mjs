// Follows the HTTP/1.1 requests a client sends on one connection, so that the
// accept gate judges each request by its complete head: a connection may carry
// several requests (keep-alive, pipelining), a head may arrive in any number of
// reads, and any of the requests may be a WebSocket upgrade.
//
// The gate must never see a request start where workerd does not. workerd's
// parser (kj/compat/http.c++) is lenient: it takes a bare LF for CRLF, folds
// continuation lines, allows whitespace before a header's colon, skips missing
// line breaks after chunks and reads whatever follows a last chunk as the next
// request. So this reader accepts only the strict grammar, which both read the
// same way, and refuses the rest: a head it cannot read strictly is answered
// here and never forwarded; in a body, it hands on the bytes it could follow
// and stops, so nothing after them can reach workerd as a request.
//
// Bodies are counted, never buffered; only an unfinished head (and the few
// bytes of a chunk-size line) is kept between reads.

/** Field names and methods are tokens (RFC 9110 5.6.2). */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const REQUEST_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) ([^ \t]+) HTTP\/1\.[01]$/;
const FIELD = /^([^:]*):[ \t]*(.*?)[ \t]*$/;
/** Anything but tab, printable ASCII and obs-text; CR and LF are checked as pairs. */
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f]/;
/** A chunk size this long is past any body the service takes (and past what a double holds exactly). */
const MAX_CHUNK_SIZE_DIGITS = 13;
const MAX_CHUNK_LINE = MAX_CHUNK_SIZE_DIGITS + 2;

/**
 * @typedef {{ type: "head"; bytes: Buffer; method: string; switching: boolean }} HeadEvent
 *   a complete request head, to be forwarded; `switching` when it asks to switch
 *   protocols (any Upgrade header): nothing after it is read until `resume()` or `rest()`
 * @typedef {{ type: "body"; bytes: Buffer }} BodyEvent body bytes (chunk framing included) of the request last headed
 * @typedef {{ type: "refuse"; status: number; error: string; message: string }} RefuseEvent
 *   a head that is not forwarded; the connection carries nothing more
 * @typedef {{ type: "unframeable" }} UnframeableEvent body framing that cannot be followed strictly; nothing more may be forwarded
 * @typedef {HeadEvent | BodyEvent | RefuseEvent | UnframeableEvent} RequestEvent
 */

/**
 * @param {{ maxHeadBytes: number }} limits
 */
export function createRequestReader(limits) {
  /** Bytes not yet consumed: `buffer` from `offset`. @type {Buffer} */
  let buffer = Buffer.alloc(0);
  let offset = 0;
  /** @type {"head" | "length" | "chunk-line" | "chunk-data" | "chunk-crlf" | "last-crlf" | "switching" | "done"} */
  let state = "head";
  /** Body bytes left of a Content-Length body or of the current chunk. */
  let left = 0;

  const available = () => buffer.length - offset;
  /** @param {number} n */
  const take = (n) => {
    const bytes = buffer.subarray(offset, offset + n);
    offset += n;
    return bytes;
  };
  /** @param {number} status @param {string} error @param {string} message @returns {RefuseEvent} */
  const refuse = (status, error, message) => {
    state = "done";
    return { type: "refuse", status, error, message };
  };

  /** @returns {RequestEvent | null} */
  const readHead = () => {
    const end = buffer.indexOf("\r\n\r\n", offset, "latin1");
    if (end === -1) {
      if (available() > limits.maxHeadBytes) return refuse(431, "too_large", `request head over ${limits.maxHeadBytes} bytes`);
      return null;
    }
    const length = end + 4 - offset;
    if (length > limits.maxHeadBytes) return refuse(431, "too_large", `request head over ${limits.maxHeadBytes} bytes`);
    const text = buffer.toString("latin1", offset, end);
    // Every CR is followed by LF and every LF preceded by CR; no other control characters.
    if (CONTROL.test(text.replaceAll("\r\n", ""))) return refuse(400, "bad_request", "request head with a bare CR, LF or control character");
    const [requestLine = "", ...fieldLines] = text.split("\r\n");
    const request = REQUEST_LINE.exec(requestLine);
    if (!request) return refuse(400, "bad_request", "malformed request line");
    const method = /** @type {string} */ (request[1]);
    if (method === "CONNECT") return refuse(501, "bad_request", "CONNECT is not supported");
    /** @type {Map<string, string>} */
    const fields = new Map();
    for (const line of fieldLines) {
      const field = FIELD.exec(line);
      // A leading space is a folded line; a space before the colon makes another name for another parser.
      if (!field || !TOKEN.test(/** @type {string} */ (field[1]))) return refuse(400, "bad_request", "malformed header field");
      const name = /** @type {string} */ (field[1]).toLowerCase();
      if ((name === "content-length" || name === "transfer-encoding" || name === "upgrade") && fields.has(name)) {
        return refuse(400, "bad_request", `more than one ${name} header`);
      }
      fields.set(name, /** @type {string} */ (field[2]));
    }
    const declared = fields.get("content-length");
    const coding = fields.get("transfer-encoding");
    if (declared !== undefined && coding !== undefined) return refuse(400, "bad_request", "both Content-Length and Transfer-Encoding");
    if (declared !== undefined && !/^\d{1,15}$/.test(declared)) return refuse(400, "bad_request", "malformed Content-Length");
    if (coding !== undefined && coding.toLowerCase() !== "chunked") return refuse(501, "bad_request", "the only transfer coding taken is chunked");
    const switching = fields.has("upgrade");
    const hasBody = coding !== undefined || (declared !== undefined && Number(declared) > 0);
    if (switching && hasBody) return refuse(400, "bad_request", "a request to switch protocols carries no body");
    const bytes = take(length);
    if (switching) state = "switching";
    else if (coding !== undefined) state = "chunk-line";
    else if (hasBody) {
      state = "length";
      left = Number(declared);
    } else state = "head";
    return { type: "head", bytes, method, switching };
  };

  /** @returns {RequestEvent | null} */
  const readChunkLine = () => {
    const scan = buffer.subarray(offset, offset + MAX_CHUNK_LINE);
    const end = scan.indexOf("\r\n", 0, "latin1");
    if (end === -1) return scan.length >= MAX_CHUNK_LINE ? unframeable() : null;
    const digits = scan.toString("latin1", 0, end);
    if (!/^[0-9A-Fa-f]+$/.test(digits) || digits.length > MAX_CHUNK_SIZE_DIGITS) return unframeable();
    left = parseInt(digits, 16);
    state = left === 0 ? "last-crlf" : "chunk-data";
    return { type: "body", bytes: take(end + 2) };
  };

  /** @returns {UnframeableEvent} */
  const unframeable = () => {
    state = "done";
    return { type: "unframeable" };
  };

  /**
   * Exactly CRLF next (after a chunk's data, and ending the body after the last chunk: no trailers).
   * @param {"chunk-line" | "head"} after
   * @returns {RequestEvent | null}
   */
  const readCrlf = (after) => {
    if (available() < 2) return available() === 1 && buffer[offset] !== 0x0d ? unframeable() : null;
    if (buffer[offset] !== 0x0d || buffer[offset + 1] !== 0x0a) return unframeable();
    state = after;
    return { type: "body", bytes: take(2) };
  };

  return {
    /** @param {Buffer} chunk */
    push(chunk) {
      if (state === "done") return;
      if (offset === buffer.length) buffer = chunk;
      else buffer = Buffer.concat([buffer.subarray(offset), chunk]);
      offset = 0;
    },
    /**
     * The next thing the bytes pushed so far say, or null until more arrive
     * (or while a switching request waits for its answer).
     * @returns {RequestEvent | null}
     */
    next() {
      if (available() === 0) return null;
      switch (state) {
        case "head":
          return readHead();
        case "length": {
          const n = Math.min(left, available());
          left -= n;
          if (left === 0) state = "head";
          return { type: "body", bytes: take(n) };
        }
        case "chunk-line":
          return readChunkLine();
        case "chunk-data": {
          const n = Math.min(left, available());
          left -= n;
          if (left === 0) state = "chunk-crlf";
          return { type: "body", bytes: take(n) };
        }
        case "chunk-crlf":
          return readCrlf("chunk-line");
        case "last-crlf":
          return readCrlf("head");
        default:
          return null;
      }
    },
    /** Bytes of an unfinished head held here (0 between requests and inside bodies). */
    headBytes: () => (state === "head" ? available() : 0),
    /** The switching request was answered without a switch: read on. */
    resume() {
      if (state === "switching") state = "head";
    },
    /** The switching request was answered with a switch: what the client sent after it, and nothing more is read. */
    rest() {
      const bytes = buffer.subarray(offset);
      state = "done";
      buffer = Buffer.alloc(0);
      offset = 0;
      return bytes;
    },
  };
}
