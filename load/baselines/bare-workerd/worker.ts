/**
 * The bare workerd baseline's worker: routes a room's upgrade and publish to
 * its object, answers /healthz, nothing else. No authentication, no body
 * checks, no registry: the runtime's own cost of carrying a request to an
 * object and back.
 */
import type { PublishAnswer } from "../../../protocol";
import type { BarePublished } from "./room";
import type { DurableObjectNamespace } from "./runtime";
export { BareRoom } from "./room";

interface Env {
  ROOMS: DurableObjectNamespace<{ publish(body: string): Promise<BarePublished> }>;
}

const ROOM_ROUTE = /^\/rooms\/([^/]+)\/(ws|publish)$/;

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/healthz") return Response.json({ ok: true, server: "bare-workerd" });
    const match = ROOM_ROUTE.exec(url.pathname);
    if (!match) return new Response("not found", { status: 404 });
    const upgrade = match[2] === "ws";
    if (upgrade !== (request.headers.get("upgrade")?.toLowerCase() === "websocket")) return new Response("upgrade required", { status: 426 });
    if (!upgrade && request.method !== "POST") return new Response("method not allowed", { status: 405 });
    const room = decodeURIComponent(match[1] as string);
    const stub = env.ROOMS.get(env.ROOMS.idFromName(room));
    if (upgrade) return stub.fetch(request);
    const { seq, recipients } = await stub.publish(await request.text());
    const answer: PublishAnswer = { room, seq, recipients };
    return Response.json(answer);
  },
};
