// One connection through the accept gate (gate.mjs), from its first byte to
// its release.
//
// Each request is judged by its complete head (http-requests.mjs): the first
// one decides whether the connection is relayed at all, and any later one on
// the same keep-alive connection that asks to switch protocols needs a socket
// slot of its own. After such a request nothing more is read from the client
// until workerd answers it (http-responses.mjs): a 101 makes the connection a
// WebSocket from the next byte, every client frame header followed by the
// frame guard; a refusal leaves it HTTP.
//
// A connection is released, both descriptors closed, as soon as both sides
// are done, and at most a bounded time after the first one is: a peer that
// never closes its half cannot keep a slot.

import { connect } from "node:net";
import { createFrameGuard, tooBigCloseFrame } from "./frame-guard.mjs";
import { createRequestReader } from "./http-requests.mjs";
import { createResponseReader } from "./http-responses.mjs";

/** Once the client's side is ended: time for what is still queued for it to leave (a slow reader's last answer). */
const FLUSH_MS = 10_000;
/** Once all of that has left: time for the client to end its own side, so that it reads the end rather than a reset. */
const CLIENT_LINGER_MS = 1000;
/** After the client ends its side: time for workerd to answer what it was asked (or send its close frame). */
const UPSTREAM_LINGER_MS = 10_000;

const STATUS_TEXT = {
  400: "Bad Request",
  408: "Request Timeout",
  431: "Request Header Fields Too Large",
  501: "Not Implemented",
  503: "Service Unavailable",
};

/**
 * An answer from the gate itself: JSON like the service's own refusals, and the connection closes after it.
 * @param {keyof typeof STATUS_TEXT} status @param {string} error @param {string} message
 */
export function gateAnswer(status, error, message) {
  const body = JSON.stringify({ error, message });
  return (
    `HTTP/1.1 ${status} ${STATUS_TEXT[status]}\r\n` +
    "Content-Type: application/json\r\n" +
    (status === 503 ? "Retry-After: 5\r\n" : "") +
    "Connection: close\r\n" +
    `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}
const OVER_CAPACITY = gateAnswer(503, "over_capacity", "the server is at its connection limit; retry later");

/**
 * What the gate lends a connection: its limits, its slots and its counters.
 * @typedef {{
 *   upstreamPath: string; maxHeadBytes: number; headMs: number; maxMessageBytes: number;
 *   admit(switching: boolean): boolean; admitSocket(): boolean; releaseSocket(): void;
 *   upstreamDone(socket: boolean): void;
 *   holdHeadBytes(delta: number): boolean;
 *   count(name: "refused" | "idleClosed" | "badRequests" | "tooBig" | "upstreamErrors" | "abandoned"): void;
 *   released(slots: { relayed: boolean; socket: boolean }): void;
 * }} GateLease
 */

/**
 * Follows `client` until it is released. The gate has counted it as waiting.
 * @param {import("node:net").Socket} client accepted with allowHalfOpen
 * @param {GateLease} gate
 */
export function relayConnection(client, gate) {
  const requests = createRequestReader({ maxHeadBytes: gate.maxHeadBytes });
  const responses = createResponseReader();
  /** @type {import("node:net").Socket | null} */
  let upstream = null;
  /**
   * http: requests are read; switching: a request to switch protocols awaits
   * its answer; websocket: frames pass the guard; closing: the client's bytes
   * are read and dropped while the connection winds down.
   * @type {"http" | "switching" | "websocket" | "closing"}
   */
  let mode = "http";
  /** @type {ReturnType<typeof createFrameGuard> | null} */
  let guard = null;
  let holdsSocket = false;
  let heldHeadBytes = 0;
  let sawBytes = false;
  let upstreamFull = false;
  /** An answer of the gate's own, written once workerd owes nothing more. @type {string | null} */
  let pendingAnswer = null;
  let clientEnded = false;
  let clientEnding = false;
  let clientFinished = false;
  let upstreamEnded = false;
  let upstreamReleased = false;
  let released = false;
  /** @type {NodeJS.Timeout | null} */
  let headTimer = setTimeout(headTimedOut, gate.headMs);
  /** @type {NodeJS.Timeout | null} */
  let lingerTimer = null;
  let lingerDeadline = Infinity;

  client.on("data", fromClient);
  client.on("end", clientEnd);
  client.on("finish", () => {
    clientFinished = true;
    linger(CLIENT_LINGER_MS);
    releaseIfDone();
  });
  client.on("drain", () => upstream?.resume());
  // Resets and broken pipes from clients are routine.
  client.on("error", release);
  client.on("close", release);

  function release() {
    if (released) return;
    released = true;
    if (headTimer) clearTimeout(headTimer);
    if (lingerTimer) clearTimeout(lingerTimer);
    gate.holdHeadBytes(-heldHeadBytes);
    heldHeadBytes = 0;
    // The slots go back here, once: the close of the upstream destroyed below
    // must not give them back again (releaseUpstream).
    const slots = { relayed: upstream !== null && !upstreamReleased, socket: holdsSocket };
    upstreamReleased = true;
    holdsSocket = false;
    client.destroy();
    upstream?.destroy();
    gate.released(slots);
  }

  function releaseIfDone() {
    if (clientEnded && clientFinished && (upstream === null || upstreamEnded)) release();
  }

  /**
   * workerd is done with the connection: its descriptor and slots go back at
   * once, while the client's side winds down (it counts as waiting until then).
   */
  function releaseUpstream() {
    if (upstream === null || upstreamReleased) return;
    upstreamReleased = true;
    upstream.destroy();
    gate.upstreamDone(holdsSocket);
    holdsSocket = false;
  }

  /** Releases the connection by `ms` from now at the latest. @param {number} ms */
  function linger(ms) {
    const deadline = Date.now() + ms;
    if (released || deadline >= lingerDeadline) return;
    lingerDeadline = deadline;
    if (lingerTimer) clearTimeout(lingerTimer);
    lingerTimer = setTimeout(() => {
      gate.count("abandoned");
      release();
    }, ms);
    lingerTimer.unref();
  }

  function resumeClient() {
    if (!released && !upstreamFull && mode !== "switching") client.resume();
  }

  /** Ends the client's side after what was written, with `last` if given; its further bytes are dropped. @param {string | Buffer} [last] */
  function endClient(last) {
    mode = "closing";
    client.resume();
    if (clientEnding) return;
    clientEnding = true;
    if (last === undefined) client.end();
    else client.end(last);
    linger(FLUSH_MS);
  }

  /** Stops reading requests and answers `text` after whatever workerd still owes. @param {string} text */
  function answerAndClose(text) {
    stopHeadTimer();
    gate.holdHeadBytes(-heldHeadBytes);
    heldHeadBytes = 0;
    mode = "closing";
    client.resume();
    if (upstream === null || responses.owed() === 0) {
      endClient(text);
    } else {
      pendingAnswer = text;
      linger(UPSTREAM_LINGER_MS);
    }
    // workerd answers what it was asked, then closes its side.
    upstream?.end();
  }

  function stopHeadTimer() {
    if (headTimer) clearTimeout(headTimer);
    headTimer = null;
  }

  function headTimedOut() {
    headTimer = null;
    if (mode !== "http") return;
    if (!sawBytes && upstream === null) {
      // Silent since it connected: nothing to answer.
      gate.count("idleClosed");
      release();
      return;
    }
    gate.count("badRequests");
    answerAndClose(gateAnswer(408, "bad_request", `the request head did not arrive within ${gate.headMs / 1000} s`));
  }

  /** @param {Buffer} bytes */
  function toUpstream(bytes) {
    if (upstream && !upstream.write(bytes)) {
      upstreamFull = true;
      client.pause();
    }
  }

  function openUpstream() {
    const socket = connect({ path: gate.upstreamPath, allowHalfOpen: true });
    upstream = socket;
    socket.on("data", fromUpstream);
    socket.on("end", upstreamEnd);
    socket.on("drain", () => {
      upstreamFull = false;
      resumeClient();
    });
    socket.on("error", () => {
      // As good as an end: what was relayed still reaches the client.
      gate.count("upstreamErrors");
      upstreamEnd();
    });
    socket.on("close", () => {
      // Closed without an end seen here (or destroyed after a refused message): nothing more will come.
      if (!upstreamEnded) upstreamEnd();
      releaseIfDone();
    });
  }

  /** @param {import("./http-requests.mjs").HeadEvent} head */
  function onHead(head) {
    if (upstream === null) {
      stopHeadTimer();
      if (!gate.admit(head.switching)) {
        gate.count("refused");
        answerAndClose(OVER_CAPACITY);
        return;
      }
      holdsSocket = head.switching;
      openUpstream();
    } else if (head.switching) {
      if (!gate.admitSocket()) {
        gate.count("refused");
        answerAndClose(OVER_CAPACITY);
        return;
      }
      holdsSocket = true;
    }
    responses.expect({ method: head.method, switching: head.switching });
    toUpstream(head.bytes);
    if (head.switching) {
      mode = "switching";
      client.pause();
    }
  }

  /** Reads as many requests as the bytes received allow. */
  function readRequests() {
    while (mode === "http") {
      const event = requests.next();
      if (event === null) break;
      if (event.type === "head") onHead(event);
      else if (event.type === "body") toUpstream(event.bytes);
      else if (event.type === "refuse") {
        gate.count("badRequests");
        answerAndClose(gateAnswer(/** @type {keyof typeof STATUS_TEXT} */ (event.status), event.error, event.message));
      } else {
        // Framing that cannot be followed: workerd gets what could be, answers it (or not), and closes.
        mode = "closing";
        client.resume();
        upstream?.end();
        linger(UPSTREAM_LINGER_MS);
      }
    }
    const headBytes = mode === "http" ? requests.headBytes() : 0;
    const withinBudget = gate.holdHeadBytes(headBytes - heldHeadBytes);
    heldHeadBytes = headBytes;
    if (!withinBudget) {
      gate.count("refused");
      answerAndClose(OVER_CAPACITY);
      return;
    }
    if (mode !== "http") return;
    // The first head has had its timer since the connection opened; later ones from their first byte.
    if (upstream !== null) {
      if (headBytes === 0) stopHeadTimer();
      else if (headTimer === null) headTimer = setTimeout(headTimedOut, gate.headMs);
    }
  }

  /** @param {Buffer} chunk */
  function fromClient(chunk) {
    if (mode === "closing") return;
    sawBytes = true;
    if (mode === "websocket") {
      forwardFrames(chunk);
      return;
    }
    requests.push(chunk);
    readRequests();
  }

  /**
   * A refused message is answered with a close frame while the rest of what
   * the client sends is read and dropped, so that the close frame is read
   * rather than lost to a reset; workerd's side is closed at once.
   * @param {Buffer} chunk
   */
  function forwardFrames(chunk) {
    if (/** @type {ReturnType<typeof createFrameGuard>} */ (guard).feed(chunk)) {
      toUpstream(chunk);
      return;
    }
    gate.count("tooBig");
    upstreamEnded = true;
    releaseUpstream();
    endClient(tooBigCloseFrame(gate.maxMessageBytes));
  }

  function becomeWebSocket() {
    mode = "websocket";
    guard = createFrameGuard(gate.maxMessageBytes);
    const rest = requests.rest();
    if (rest.length > 0) forwardFrames(rest);
    resumeClient();
  }

  /** @param {Buffer} chunk */
  function fromUpstream(chunk) {
    if (clientEnding) return;
    if (mode === "websocket") {
      if (!client.write(chunk)) upstream?.pause();
      return;
    }
    const events = responses.observe(chunk);
    if (events.some((e) => e.type === "broken")) {
      gate.count("upstreamErrors");
      release();
      return;
    }
    if (!client.write(chunk)) upstream?.pause();
    for (const event of events) {
      if (event.type === "switched") {
        if (mode === "switching") becomeWebSocket();
      } else if (event.type === "refused") {
        holdsSocket = false;
        gate.releaseSocket();
        if (mode === "switching") {
          mode = "http";
          requests.resume();
          resumeClient();
          readRequests();
        }
      }
    }
    if (pendingAnswer !== null && responses.owed() === 0) {
      const text = pendingAnswer;
      pendingAnswer = null;
      endClient(text);
    }
  }

  function upstreamEnd() {
    if (upstreamEnded) return;
    upstreamEnded = true;
    // workerd is done (it closes the whole connection): what it sent goes out, then the client's side is ended too.
    if (pendingAnswer !== null && responses.owed() === 0) {
      const text = pendingAnswer;
      pendingAnswer = null;
      endClient(text);
    } else {
      endClient();
    }
    releaseUpstream();
    releaseIfDone();
  }

  function clientEnd() {
    clientEnded = true;
    if (mode !== "closing") {
      // Everything the client sent that could be relayed was; an unfinished head is dropped.
      stopHeadTimer();
      mode = "closing";
      if (upstream === null) {
        release();
        return;
      }
      upstream.end();
      linger(UPSTREAM_LINGER_MS);
    }
    releaseIfDone();
  }
}
