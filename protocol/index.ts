/**
 * The contract between the service and everyone who talks to it: the wire
 * protocol (events, frames, close codes and what each means for
 * reconnecting), the HTTP API's bodies and the error codes. The worker, the
 * objects, the client SDK and the load tool import these; nothing here
 * imports anything, holds a server default or knows a server internal, so
 * every runtime can bundle it. The server's limits are its own
 * (common/settings.ts) and reach clients in the welcome event.
 *
 * Human-readable version: docs/protocol.md.
 */
export * from "./connection.js";
export * from "./events.js";
export * from "./frames.js";
export * from "./close-codes.js";
export * from "./errors.js";
export * from "./http.js";
export * from "./rooms.js";
export * from "./multiplex.js";
export * from "./json.js";
export * from "./webhooks.js";
