import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Connection, type ConnectionOptions } from "../../client-sdk/src/connection";
import type { ConnectionState, StateCause } from "../../client-sdk/src/events";
import type { WebSocketConstructor, WebSocketLike } from "../../client-sdk/src/transport";
import { CLOSE_CODES, CloseCode, PING, PONG } from "../../protocol";
import { sleep } from "../helpers/wait";

/**
 * Connection, the part of the client that keeps one socket up, as a state
 * machine: its sockets are in memory and the test plays the server (opens
 * them, sends frames, closes them), with fake timers, so every deadline and
 * backoff delay is checked to the millisecond. The same behaviour through
 * real sockets is in sdk-protocol.test.ts (the in-process server) and
 * sdk-client.test.ts (the local server).
 */

const URL = "ws://room.test/rooms/lobby/ws";

/** A WebSocket in memory: what the connection does to it is recorded, and the test makes it open, receive and close. */
class MemorySocket implements WebSocketLike {
  readyState = 0;
  onopen: WebSocketLike["onopen"] = null;
  onmessage: WebSocketLike["onmessage"] = null;
  onclose: WebSocketLike["onclose"] = null;
  onerror: WebSocketLike["onerror"] = null;
  readonly sent: string[] = [];
  closedWith: { code: number | undefined; reason: string | undefined } | null = null;

  constructor(
    readonly url: string,
    readonly protocols: string | string[] | undefined,
  ) {}

  send(data: string): void {
    if (this.readyState !== 1) throw new Error("not open");
    this.sent.push(data);
  }

  close(code?: number, reason?: string): void {
    this.closedWith = { code, reason };
    this.readyState = 3;
  }

  // The server's side.
  open(): void {
    this.readyState = 1;
    this.onopen?.({});
  }

  receive(text: string): void {
    this.onmessage?.({ data: text });
  }

  error(message: string): void {
    this.onerror?.({ message });
  }

  serverClose(code: number, reason = ""): void {
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }
}

interface Change {
  state: ConnectionState;
  previous: ConnectionState;
  cause: StateCause;
  code: number | undefined;
  reason: string | undefined;
}

/** A started connection with everything it reports recorded. */
function connect(options: Partial<ConnectionOptions> = {}) {
  const sockets: MemorySocket[] = [];
  const changes: Change[] = [];
  const errors: string[] = [];
  const frames: string[] = [];
  const log: string[] = [];
  const WebSocket: WebSocketConstructor = class extends MemorySocket {
    constructor(url: string, protocols?: string | string[]) {
      super(url, protocols);
      log.push(`socket ${JSON.stringify(protocols ?? null)}`);
      sockets.push(this);
    }
  };
  const connection = new Connection(
    {
      WebSocket,
      backoff: { initialDelayMs: 1000, maxDelayMs: 30_000, factor: 2 },
      stableAfterMs: 5000,
      pingIntervalMs: 25_000,
      pongTimeoutMs: 10_000,
      connectTimeoutMs: 10_000,
      token: undefined,
      tokenIn: "subprotocol",
      ...options,
    },
    {
      url: () => URL,
      frame: (text) => frames.push(text),
      error: (code, message) => errors.push(`${code}: ${message}`),
      state: (state, previous, cause, code, reason) => changes.push({ state, previous, cause, code, reason }),
      ended: () => {},
    },
  );
  connection.start();
  const last = (): MemorySocket => sockets.at(-1)!;
  /** What the client does with the room's welcome: the socket opens, the welcome arrives, the connection is established. */
  const welcome = (socket = last()): void => {
    socket.open();
    socket.receive('{"type":"welcome"}');
    connection.established();
  };
  return { connection, sockets, changes, errors, frames, log, last, welcome };
}

beforeEach(() => {
  vi.useFakeTimers();
  // Full jitter draws a delay in [0, ceiling): at 0.5 each delay is half its ceiling, exactly.
  vi.spyOn(Math, "random").mockReturnValue(0.5);
});
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

/** Advances fake time, running the promise callbacks in between (a token function is asked in one). */
const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);

describe("backoff", () => {
  it("waits longer after each failure in a row, and starts over after a connection that stayed up stableAfterMs", async () => {
    const c = connect();
    /** The next attempt comes exactly `delay` ms after the last failure. */
    const attemptAfter = async (delay: number) => {
      const before = c.sockets.length;
      await advance(delay - 1);
      expect(c.sockets).toHaveLength(before);
      await advance(1);
      expect(c.sockets).toHaveLength(before + 1);
    };

    c.last().serverClose(1006);
    await attemptAfter(500); // half of 1000
    c.last().serverClose(1006);
    await attemptAfter(1000); // half of 2000

    // Welcomed, but closed before it was stable: still the same streak.
    c.welcome();
    await advance(4999);
    c.last().serverClose(CloseCode.SERVICE_RESTART);
    await attemptAfter(2000); // half of 4000

    // Up for stableAfterMs: the next delay is the first one again.
    c.welcome();
    await advance(5000);
    c.last().serverClose(CloseCode.SERVICE_RESTART);
    await attemptAfter(500);
  });

  it("retries at once when the browser reports the network back, starting the backoff over", async () => {
    const page = new EventTarget();
    const g = globalThis as unknown as Partial<Pick<EventTarget, "addEventListener" | "removeEventListener">>;
    g.addEventListener = page.addEventListener.bind(page);
    g.removeEventListener = page.removeEventListener.bind(page);
    try {
      const c = connect({ backoff: { initialDelayMs: 600_000, maxDelayMs: 600_000, factor: 2 } });
      c.last().serverClose(1006);
      await advance(1000);
      expect(c.sockets).toHaveLength(1);
      page.dispatchEvent(new Event("online"));
      expect(c.sockets).toHaveLength(2);
      // Only the state change to reconnecting: the retry itself is no change.
      expect(c.changes.map((x) => [x.state, x.cause])).toEqual([["reconnecting", "network"]]);
    } finally {
      delete g.addEventListener;
      delete g.removeEventListener;
    }
  });
});

describe("tokens", () => {
  it("asks a token function before every attempt, then offers what it gave beside fanout.v1", async () => {
    let calls = 0;
    const c = connect({
      token: async () => {
        c.log.push("token");
        await sleep(100); // an endpoint that takes its time
        return `t${++calls}`;
      },
    });
    await advance(99);
    expect(c.sockets).toHaveLength(0); // no socket before the token
    await advance(1);
    c.last().serverClose(CloseCode.SERVICE_RESTART);
    await advance(500 + 100);
    c.welcome();
    c.last().serverClose(CloseCode.UNAUTHORIZED, "the token has expired");
    await advance(1000 + 100);
    expect(c.log).toEqual([
      "token",
      'socket ["fanout.v1","token.t1"]',
      "token",
      'socket ["fanout.v1","token.t2"]',
      "token",
      'socket ["fanout.v1","token.t3"]',
    ]);
    expect(c.sockets.map((s) => s.url)).toEqual([URL, URL, URL]);
  });

  it("offers a fixed token on every attempt, or puts it in the URL with tokenIn query; no token, no offer", async () => {
    const fixed = connect({ token: "abc.def.ghi" });
    fixed.last().serverClose(1006);
    await advance(500);
    expect(fixed.sockets.map((s) => [s.url, s.protocols])).toEqual([
      [URL, ["fanout.v1", "token.abc.def.ghi"]],
      [URL, ["fanout.v1", "token.abc.def.ghi"]],
    ]);
    const query = connect({ token: "abc.def.ghi", tokenIn: "query" });
    expect([query.last().url, query.last().protocols]).toEqual([`${URL}?token=abc.def.ghi`, undefined]);
    const none = connect();
    expect([none.last().url, none.last().protocols]).toEqual([URL, undefined]);
  });

  it("stops at the third 4001 in a row without a welcome when a token function gives the tokens, and at the first with a fixed token", async () => {
    let calls = 0;
    const c = connect({ token: () => `t${++calls}` });
    await advance(0);
    const refuse = async (delay: number) => {
      c.last().serverClose(CloseCode.UNAUTHORIZED, "the token has expired");
      await advance(delay);
    };
    await refuse(500);
    await refuse(1000);
    // A welcome in between: the streak starts over.
    c.welcome();
    await refuse(2000);
    await refuse(4000);
    expect(c.connection.state).toBe("reconnecting");
    expect(c.sockets).toHaveLength(5);
    await refuse(600_000);
    expect(c.sockets).toHaveLength(5);
    expect(calls).toBe(5);
    expect(c.changes.map((x) => [x.state, x.cause, x.code, x.reason])).toEqual([
      ["reconnecting", "auth_refused", 4001, "the token has expired"],
      ["open", "welcome", undefined, undefined],
      ["reconnecting", "auth_refused", 4001, "the token has expired"],
      ["closed", "auth_refused", 4001, "the token has expired"],
    ]);

    const fixed = connect({ token: "fixed" });
    fixed.last().serverClose(CloseCode.UNAUTHORIZED);
    await advance(600_000);
    expect(fixed.sockets).toHaveLength(1);
    expect(fixed.changes.map((x) => [x.state, x.cause, x.code])).toEqual([["closed", "auth_refused", 4001]]);
  });

  it("takes an HTTP 401 or 403 to the upgrade (reported by ws only in its error text) as the close code it stands for", async () => {
    const c = connect();
    c.last().error("Unexpected server response: 403");
    c.last().serverClose(1006);
    expect(c.changes.map((x) => [x.state, x.cause, x.code])).toEqual([["closed", "auth_refused", 4003]]);
  });

  it("fails an attempt whose token function throws, gives nothing, or gives what a subprotocol cannot carry, before any socket", async () => {
    const answers: Array<() => string> = [
      () => {
        throw new Error("endpoint down");
      },
      () => "",
      () => "with space",
      () => "good",
    ];
    const c = connect({ token: () => answers.shift()!() });
    await advance(0 + 500 + 1000 + 2000);
    expect(c.sockets.map((s) => s.protocols)).toEqual([["fanout.v1", "token.good"]]);
    expect(c.errors).toEqual([
      "token: endpoint down",
      "token: the token function gave no token",
      'token: the token has characters a subprotocol cannot carry: use tokenIn "query"',
    ]);
    expect(c.changes.map((x) => [x.state, x.cause])).toEqual([["reconnecting", "token_failed"]]);
    expect(() => connect({ token: "with space" })).toThrow(TypeError);
  });
});

describe("deadlines", () => {
  it("gives up on an attempt not welcomed within connectTimeoutMs, and ignores what its socket does later", async () => {
    const c = connect();
    const first = c.last();
    first.open();
    await advance(9999);
    expect(c.connection.state).toBe("connecting");
    await advance(1);
    expect(c.changes.map((x) => [x.state, x.cause])).toEqual([["reconnecting", "no_welcome"]]);
    expect(first.closedWith).toEqual({ code: 1000, reason: "no_welcome" });
    first.receive("late");
    first.serverClose(CloseCode.NORMAL);
    expect(c.frames).toEqual([]);
    expect(c.connection.state).toBe("reconnecting");

    // Welcomed just in time: the deadline is gone.
    await advance(500);
    c.last().open();
    await advance(9999);
    c.welcome();
    await advance(20_000); // past the deadline, before the first heartbeat
    expect(c.connection.state).toBe("open");
  });

  it("counts a token function that never answers as a failed attempt at the connect deadline", async () => {
    const c = connect({ token: () => new Promise<string>(() => {}) });
    await advance(10_000);
    expect(c.sockets).toHaveLength(0);
    expect(c.changes.map((x) => [x.state, x.cause])).toEqual([["reconnecting", "token_failed"]]);
    expect(c.errors).toEqual(["token: the token function did not answer within connectTimeoutMs"]);
  });

  it("pings every pingIntervalMs, takes any frame as the answer, and drops a connection silent for pongTimeoutMs after a ping", async () => {
    const c = connect();
    c.welcome();
    const socket = c.last();
    await advance(25_000);
    expect(socket.sent).toEqual([PING]);
    await advance(9999);
    socket.receive(PONG); // answered in time; the heartbeat's answer is no frame for the client
    await advance(15_001);
    expect(socket.sent).toEqual([PING, PING]);
    await advance(5000);
    socket.receive('{"type":"message"}'); // a message answers as well as a pong
    await advance(20_000);
    expect(socket.sent).toEqual([PING, PING, PING]);
    expect(c.connection.state).toBe("open");
    await advance(9999);
    expect(c.connection.state).toBe("open");
    await advance(1);
    expect(c.changes.map((x) => [x.state, x.cause])).toEqual([
      ["open", "welcome"],
      ["reconnecting", "no_pong"],
    ]);
    expect(socket.closedWith).toEqual({ code: 1000, reason: "no_pong" });
    expect(c.frames).toEqual(['{"type":"welcome"}', '{"type":"message"}']);
  });
});

describe("close codes", () => {
  it("stops or reconnects after each close code as the table in protocol/close-codes.ts says, and after codes it does not know as their range says", async () => {
    const known = Object.entries(CLOSE_CODES).map(([code, info]) => [Number(code), info.reconnect] as const);
    const unknown = [[1005, true], [1006, true], [3000, true], [3500, false], [4499, true], [4500, false], [4999, false]] as const;
    for (const [code, reconnect] of [...known, ...unknown] as const) {
      const c = connect();
      c.welcome();
      c.last().serverClose(code, "why");
      await advance(500); // the first retry's delay
      if (!reconnect) await advance(600_000);
      const cause = code === 4001 || code === 4003 ? "auth_refused" : code === 1006 ? "network" : "server_closed";
      expect([code, c.changes.at(1)], `close code ${code}`).toEqual([
        code,
        { state: reconnect ? "reconnecting" : "closed", previous: "open", cause, code, reason: "why" },
      ]);
      expect([code, c.sockets.length], `attempts after close code ${code}`).toEqual([code, reconnect ? 2 : 1]);
      c.connection.close(CloseCode.NORMAL, "");
    }
  });

  it("closes for good on close(): no reconnect, and a code browsers refuse to send goes out as 1000", async () => {
    const a = connect();
    a.welcome();
    a.connection.close(4321, "bye");
    await advance(600_000);
    expect(a.last().closedWith).toEqual({ code: 4321, reason: "bye" });
    expect(a.changes.at(-1)).toEqual({ state: "closed", previous: "open", cause: "client_closed", code: 4321, reason: "bye" });
    expect(a.sockets).toHaveLength(1);

    const b = connect();
    b.connection.close(CloseCode.GOING_AWAY, "leaving");
    expect(b.last().closedWith).toEqual({ code: 1000, reason: "leaving" });
    expect(b.changes).toEqual([{ state: "closed", previous: "connecting", cause: "client_closed", code: 1001, reason: "leaving" }]);
  });
});
