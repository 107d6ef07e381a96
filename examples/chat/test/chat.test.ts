/**
 * The example worker inside workerd, as its wrangler.toml binds it: the
 * team's own routes, the fan-out app at /realtime, and ChatRoom's two hooks
 * through real sockets and HTTP publishes.
 */
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { ChatMessage } from "../src/chat-room";

type Entry = { fetch(input: string, init?: RequestInit): Promise<Response> };
const worker = (exports as unknown as { default: Entry }).default;
const BASE = "http://chat.test/realtime";

/** The wire events this test reads (docs/protocol.md). */
type Event = { type: string; seq?: number; data?: unknown; id?: string; code?: string; message?: string };

interface Socket {
  ws: WebSocket;
  events: Event[];
  closed: Promise<{ code: number; reason: string }>;
  messages(): ChatMessage[];
}

async function join(room: string, query: string): Promise<Socket> {
  const res = await worker.fetch(`${BASE}/rooms/${room}/ws${query}`, { headers: { Upgrade: "websocket" } });
  expect(res.status).toBe(101);
  const ws = res.webSocket as WebSocket;
  const events: Event[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.addEventListener("close", (e) => resolve({ code: e.code, reason: e.reason })));
  ws.addEventListener("message", (e) => {
    const parsed: unknown = JSON.parse(e.data as string);
    events.push(...((Array.isArray(parsed) ? parsed : [parsed]) as Event[]));
  });
  ws.accept();
  return { ws, events, closed, messages: () => events.filter((e) => e.type === "message").map((e) => e.data as ChatMessage) };
}

async function until(check: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function post(room: string, body: unknown): Promise<{ status: number; body: unknown }> {
  const res = await worker.fetch(`${BASE}/rooms/${room}/publish`, {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" },
  });
  return { status: res.status, body: await res.json() };
}

describe("the example worker", () => {
  it("keeps its own routes beside the fan-out app", async () => {
    expect(await (await worker.fetch("http://chat.test/api/health")).json()).toEqual({ ok: true });
    const page = await (await worker.fetch("http://chat.test/")).text();
    expect(page).toContain('import { RoomClient } from "/realtime/sdk.js"');
    expect((await worker.fetch(`${BASE}/sdk.js`)).status).toBe(200);
    // The demo page is switched off in createFanoutApp({ demo: false }).
    expect((await worker.fetch(`${BASE}/demo`)).status).toBe(404);
  });

  it("admits a socket only with a name that is not banned (onConnect)", async () => {
    const nameless = await join("lobby", "");
    expect(await nameless.closed).toEqual({ code: 4003, reason: "join with a display name: ?name= (1-32 letters, digits, spaces, _ . -)" });
    const banned = await join("lobby", "?name=Mallory");
    expect(await banned.closed).toEqual({ code: 4003, reason: "this name may not join" });
    const refused = await worker.fetch(`${BASE}/rooms/lobby/ws?name=${"x".repeat(40)}`, { headers: { Upgrade: "websocket", "X-Refusal": "http" } });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ error: "forbidden" });
    const alice = await join("lobby", "?name=Alice");
    await until(() => alice.events.some((e) => e.type === "welcome"));
    alice.ws.close(1000);
  });

  it("signs every socket message with its speaker's name, and refuses what is not a chat message (beforePublish)", async () => {
    const alice = await join("signed", "?name=Alice");
    const bob = await join("signed", "?name=Bob");
    await until(() => alice.events.some((e) => e.type === "welcome") && bob.events.some((e) => e.type === "welcome"));
    // Alice tries to speak as Bob: the room signs with the name her socket joined with.
    alice.ws.send(JSON.stringify({ type: "publish", data: { text: "  hi Bob  ", from: "Bob" }, id: "a1" }));
    await until(() => bob.messages().length === 1);
    expect(bob.messages()[0]).toEqual({ text: "hi Bob", from: "Alice", verified: false });

    alice.ws.send(JSON.stringify({ type: "publish", data: "not an object", id: "a2" }));
    alice.ws.send(JSON.stringify({ type: "publish", data: { text: "y".repeat(501) }, id: "a3" }));
    await until(() => alice.events.filter((e) => e.type === "error").length === 2);
    const errors = alice.events.filter((e) => e.type === "error").sort((x, y) => String(x.id).localeCompare(String(y.id)));
    expect(errors).toEqual([
      { type: "error", code: "bad_request", message: 'a chat message is {"text": "..."}', id: "a2" },
      { type: "error", code: "bad_request", message: "a chat message is at most 500 characters", id: "a3" },
    ]);
    // Refusals take no seq: the next message follows the first.
    bob.ws.send(JSON.stringify({ type: "publish", data: { text: "hello Alice" }, id: "b1" }));
    await until(() => alice.messages().length === 2);
    expect(alice.events.filter((e) => e.type === "message").map((e) => e.seq)).toEqual([1, 2]);
    expect(alice.messages()[1]).toEqual({ text: "hello Alice", from: "Bob", verified: false });
    alice.ws.close(1000);
    bob.ws.close(1000);
  });

  it("opens multiplexed connections (HUBS is bound), and a subscribe to a ChatRoom is refused for that room: its onConnect needs its own sockets", async () => {
    const res = await worker.fetch(`${BASE}/ws`, { headers: { Upgrade: "websocket" } });
    expect(res.status).toBe(101);
    const ws = res.webSocket as WebSocket;
    const events: Event[] = [];
    ws.addEventListener("message", (e) => events.push(...([] as Event[]).concat(JSON.parse(e.data as string) as Event | Event[])));
    ws.accept();
    ws.send(JSON.stringify({ type: "subscribe", room: "lobby", id: "s1" }));
    await until(() => events.some((e) => e.type === "error"));
    expect(events[0]?.type).toBe("welcome");
    expect(events.find((e) => e.type === "error")).toMatchObject({ code: "forbidden", id: "s1", message: expect.stringContaining("/rooms/{room}/ws") });
    ws.close(1000);
  });

  it("lets the team's backend speak as the system over HTTP, with the same rules", async () => {
    const carol = await join("backend", "?name=Carol");
    expect(await post("backend", { text: "maintenance at 5" })).toEqual({ status: 200, body: { room: "backend", seq: 1, recipients: 1 } });
    await until(() => carol.messages().length === 1);
    expect(carol.messages()[0]).toEqual({ text: "maintenance at 5", from: "system", verified: true });
    expect(await post("backend", { body: "no text" })).toEqual({ status: 400, body: { error: "bad_request", message: 'a chat message is {"text": "..."}' } });
    carol.ws.close(1000);
  });
});
