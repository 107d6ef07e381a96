/**
 * The few workerd APIs the bare room uses, declared here because the load
 * tool is type-checked with Node's and the DOM's types (tsconfig.node.json),
 * not Cloudflare's. Only what this baseline calls; see @cloudflare/workers-types
 * for the full shapes.
 */

/** `ctx.storage.sql`: synchronous SQLite of a Durable Object. */
export interface SqlStorage {
  exec(query: string, ...bindings: unknown[]): { toArray(): Array<Record<string, unknown>> };
}

/** The object's state handed to its constructor. */
export interface DurableObjectState {
  acceptWebSocket(ws: WebSocket): void;
  getWebSockets(): WebSocket[];
  setWebSocketAutoResponse(pair: unknown): void;
  storage: { sql: SqlStorage };
}

/** A stub: `fetch`, plus the object's public methods as RPC (`Methods`). */
export type DurableObjectStub<Methods> = Methods & { fetch(request: Request): Promise<Response> };

export interface DurableObjectNamespace<Methods> {
  idFromName(name: string): unknown;
  get(id: unknown): DurableObjectStub<Methods>;
}

/** What a 101 answer carries besides the usual init: the server end of the pair. */
export interface UpgradeInit extends ResponseInit {
  webSocket: WebSocket;
}

/** workerd's globals (no import: they exist in every worker). */
declare const WebSocketPair: new () => { 0: WebSocket; 1: WebSocket };
declare const WebSocketRequestResponsePair: new (request: string, response: string) => unknown;

/** A connected pair: `client` goes back in the 101, `server` stays with the object. */
export function webSocketPair(): { client: WebSocket; server: WebSocket } {
  const pair = new WebSocketPair();
  return { client: pair[0], server: pair[1] };
}

/** The runtime answers `request` with `response` on every socket, without waking the object. */
export function autoResponse(request: string, response: string): unknown {
  return new WebSocketRequestResponsePair(request, response);
}
