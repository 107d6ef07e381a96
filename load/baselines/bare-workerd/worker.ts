/**
 * The bare workerd baseline's worker: routes a room's upgrade and publish to
 * its object, answers /healthz, nothing else. No authentication, no body
 * checks, no registry: the runtime's own cost of carrying a request to an
 * object and back.
 *
 * `GET /ws` is a multiplexed connection held by the Worker itself, with an
 * internal socket per subscribed room into the room's object (relay.ts).
 *
 * `POST /publish` takes messages for several rooms in one request
 * (`{"messages":[{"room","data"}]}`) and answers each with its own seq
 * (`{"results":[{"room","seq","recipients"}]}`): one RPC per room, in
 * parallel, one HTTP request for all. It measures what a publisher feeding
 * many small rooms would save per message with such an endpoint.
 */
import type { PublishAnswer } from "../../../protocol";
import type { BarePublished } from "./room";
import { relayConnection } from "./relay";
import type { DurableObjectNamespace } from "./runtime";
export { BareRoom } from "./room";

interface Env {
  ROOMS: DurableObjectNamespace<{ publish(body: string): Promise<BarePublished> }>;
}

const ROOM_ROUTE = /^\/rooms\/([^/]+)\/(ws|publish)$/;
/** Messages one batched request may carry. */
const MAX_BATCH = 100;

type RoomStub = ReturnType<Env["ROOMS"]["get"]>;
const roomStub = (env: Env, room: string): RoomStub => env.ROOMS.get(env.ROOMS.idFromName(room));

async function publishBatch(request: Request, env: Env): Promise<Response> {
  let messages: unknown;
  try {
    messages = ((await request.json()) as { messages?: unknown }).messages;
  } catch {
    return new Response("body must be JSON", { status: 400 });
  }
  if (!Array.isArray(messages) || messages.length === 0 || messages.length > MAX_BATCH) return new Response(`messages: 1 to ${MAX_BATCH}`, { status: 400 });
  const batch = messages as Array<{ room?: unknown; data?: unknown }>;
  if (!batch.every((m) => typeof m.room === "string")) return new Response("every message names its room", { status: 400 });
  const results: PublishAnswer[] = await Promise.all(
    batch.map(async ({ room, data }) => {
      const name = room as string;
      const { seq, recipients } = await roomStub(env, name).publish(JSON.stringify(data ?? null));
      return { room: name, seq, recipients };
    }),
  );
  return Response.json({ results });
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/healthz") return Response.json({ ok: true, server: "bare-workerd" });
    if (url.pathname === "/publish" && request.method === "POST") return publishBatch(request, env);
    // A multiplexed connection the Worker holds itself, an internal socket per room (relay.ts).
    if (url.pathname === "/ws" && request.headers.get("upgrade")?.toLowerCase() === "websocket") {
      return relayConnection(async (room) => {
        const answer = await roomStub(env, room).fetch(new Request(`http://bare/rooms/${encodeURIComponent(room)}/ws`, { headers: { Upgrade: "websocket" } }));
        return (answer as Response & { webSocket?: WebSocket & { accept(): void } }).webSocket ?? null;
      });
    }
    const match = ROOM_ROUTE.exec(url.pathname);
    if (!match) return new Response("not found", { status: 404 });
    const upgrade = match[2] === "ws";
    if (upgrade !== (request.headers.get("upgrade")?.toLowerCase() === "websocket")) return new Response("upgrade required", { status: 426 });
    if (!upgrade && request.method !== "POST") return new Response("method not allowed", { status: 405 });
    const room = decodeURIComponent(match[1] as string);
    const stub = roomStub(env, room);
    if (upgrade) return stub.fetch(request);
    const { seq, recipients } = await stub.publish(await request.text());
    const answer: PublishAnswer = { room, seq, recipients };
    return Response.json(answer);
  },
};
