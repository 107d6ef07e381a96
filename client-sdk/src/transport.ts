// A method's parameter is checked bivariantly, so both the DOM WebSocket and
// `ws` (whose handlers take their own event classes) fit these slots.
type Handler<E> = { bivarianceHack(event: E): void }["bivarianceHack"];

/** The parts of a WebSocket the client uses; the browser's and the `ws` package's both fit. */
export interface WebSocketLike {
  /** 0 connecting, 1 open, 2 closing, 3 closed. */
  readonly readyState: number;
  /** Called once the socket is open. */
  onopen: Handler<unknown> | null;
  /** Called with each frame the server sent (`data` is its text). */
  onmessage: Handler<{ data: unknown }> | null;
  /** Called once the socket closed, with its close code and reason. */
  onclose: Handler<{ code: number; reason: string }> | null;
  /** Called when the socket failed. */
  onerror: Handler<unknown> | null;
  /** Sends one text frame. */
  send(data: string): void;
  /** Starts the closing handshake. */
  close(code?: number, reason?: string): void;
  /** `ws` only: drop the connection without a closing handshake. */
  terminate?(): void;
}

/**
 * A WebSocket class: the global one in browsers, `ws` on Node 20. The client
 * passes `protocols` when a token travels in `Sec-WebSocket-Protocol`.
 *
 * @see client-sdk/README.md#node-20
 */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

/** `readyState` of an open WebSocket. */
export const OPEN = 1;

/** The text of an error, or of an error event (`ws` puts the Error in `error`). */
export function describe(value: unknown): string {
  if (value instanceof Error) return value.message;
  if (typeof value === "object" && value !== null) {
    const { message, error } = value as { message?: unknown; error?: unknown };
    if (typeof message === "string" && message) return message;
    if (error instanceof Error) return error.message;
  }
  return "WebSocket error";
}
