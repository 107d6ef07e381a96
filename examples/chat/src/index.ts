/**
 * A worker a team already had, with real-time fan-out added: its own routes
 * stay as they were, the fan-out app is mounted at /realtime, and the room
 * class is ChatRoom (src/chat-room.ts), bound as ROOMS in wrangler.toml.
 */
import { Hono } from "hono";
import { createFanoutApp } from "edge-fanout";
import type { Env } from "./chat-room";

// The classes the bindings name must be exports of the worker.
export { Coordinator, RoomHub } from "edge-fanout";
export { ChatRoom } from "./chat-room";

const app = new Hono<{ Bindings: Env }>();

// The team's own routes.
app.get("/", (c) =>
  c.html(`<!doctype html>
<meta charset="utf-8">
<title>Chat</title>
<form id="say"><input id="text" placeholder="say something" autocomplete="off"> <button>Send</button></form>
<ul id="log"></ul>
<script type="module">
  import { RoomClient } from "/realtime/sdk.js";
  const name = new URLSearchParams(location.search).get("name") || "guest";
  const room = new RoomClient({ url: new URL("/realtime/rooms/lobby/ws?name=" + encodeURIComponent(name), location.href).href });
  const log = document.getElementById("log");
  room.addEventListener("message", (e) => log.append(Object.assign(document.createElement("li"), { textContent: e.data.from + ": " + e.data.text })));
  room.addEventListener("state", (e) => e.state === "closed" && e.code && log.append("closed: " + e.reason));
  document.getElementById("say").addEventListener("submit", (e) => {
    e.preventDefault();
    const input = document.getElementById("text");
    room.publish({ text: input.value }).catch((error) => log.append("refused: " + error.message));
    input.value = "";
  });
</script>`),
);
app.get("/api/health", (c) => c.json({ ok: true }));

// Fan-out under a path of its own: /realtime/rooms/{room}/ws, /realtime/rooms/{room}/publish, ...
app.route("/realtime", createFanoutApp({ demo: false }));

export default app;
