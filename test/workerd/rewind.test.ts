import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { ServerEvent } from "../../protocol";
import { sleep, until } from "../helpers/wait";

/** `GET /rooms/{room}/ws?rewind=N`: a new socket starts N messages back without knowing a seq. */

type Entry = { fetch(input: string, init?: RequestInit): Promise<Response> };
const worker = (exports as unknown as { default: Entry }).default;

async function publishEach(room: string, count: number): Promise<void> {
  for (let n = 1; n <= count; n++) {
    const res = await worker.fetch(`http://edge.test/rooms/${room}/publish`, { method: "POST", body: String(n), headers: { "content-type": "application/json" } });
    expect(res.status).toBe(200);
  }
}

async function open(room: string, query: string): Promise<{ ws: WebSocket; events: ServerEvent[] }> {
  const res = await worker.fetch(`http://edge.test/rooms/${room}/ws${query}`, { headers: { Upgrade: "websocket" } });
  expect(res.status).toBe(101);
  const ws = res.webSocket as WebSocket;
  const events: ServerEvent[] = [];
  ws.addEventListener("message", (e) => events.push(...([] as ServerEvent[]).concat(JSON.parse(e.data as string) as ServerEvent)));
  ws.accept();
  return { ws, events };
}

/** The socket's events as [type, seq]: what it was told, in order, up to its presence sync. */
function story(events: ServerEvent[]): (string | number)[][] {
  return events.filter((e) => e.type !== "presence").map((e) => (e.type === "message" ? ["message", e.seq] : e.type === "lost" ? ["lost", e.from, e.to] : [e.type]));
}

describe("?rewind=N", () => {
  it("starts a socket N messages back, or at the first message when the room has fewer, with no lost event", async () => {
    const room = "rewind-basic";
    await publishEach(room, 20);
    const five = await open(room, "?rewind=5");
    await until(() => five.events.filter((e) => e.type === "message").length === 5);
    expect(story(five.events)).toEqual([["welcome"], ["message", 16], ["message", 17], ["message", 18], ["message", 19], ["message", 20]]);
    // The welcome says where its messages start, so each follows the one before (as the SDK checks).
    expect(five.events[0]).toMatchObject({ type: "welcome", seq: 15 });
    const all = await open(room, "?rewind=100");
    await until(() => all.events.filter((e) => e.type === "message").length === 20);
    expect(all.events.some((e) => e.type === "lost")).toBe(false);
    const none = await open(room, "?rewind=0");
    await until(() => none.events.some((e) => e.type === "presence"));
    expect(story(none.events)).toEqual([["welcome"]]);
    expect(none.events[0]).toMatchObject({ type: "welcome", seq: 20 });
    for (const s of [five, all, none]) s.ws.close(1000);
  });

  it("is ignored beside since: a socket that resumes knows where it is", async () => {
    const room = "rewind-since";
    await publishEach(room, 10);
    const resumed = await open(room, "?since=8&rewind=5");
    await until(() => resumed.events.filter((e) => e.type === "message").length === 2);
    await sleep(50);
    expect(story(resumed.events)).toEqual([["welcome"], ["message", 9], ["message", 10]]);
    resumed.ws.close(1000);
  });

  it("refuses a rewind that is not a count, or reaches back further than the room's history can hold, with 400", async () => {
    for (const query of ["?rewind=-1", "?rewind=ten", "?rewind=1.5", "?rewind=1001", "?rewind=1234567"]) {
      const res = await worker.fetch(`http://edge.test/rooms/rewind-bad/ws${query}`, { headers: { Upgrade: "websocket" } });
      expect(res.status, query).toBe(400);
      expect(await res.json(), query).toMatchObject({ error: "bad_request" });
    }
    // With since, rewind is not looked at, whatever it holds (a reconnecting SDK keeps it in its URL).
    for (const query of ["?since=0&rewind=1001", "?since=38&rewind=-1", "?rewind=ten&since=0"]) {
      const res = await worker.fetch(`http://edge.test/rooms/rewind-bad/ws${query}`, { headers: { Upgrade: "websocket" } });
      expect(res.status, query).toBe(101);
      res.webSocket?.accept();
      res.webSocket?.close(1000);
    }
  });
});
