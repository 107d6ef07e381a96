import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { DEFAULTS } from "../../common/settings";
import { CloseCode } from "../../protocol";
import { startServer, type LocalServer } from "../helpers/server";
import { until } from "../helpers/wait";

// workerd buffers a client message whole (up to 32 MiB) before the room can
// refuse it. Behind the accept gate an oversized message is refused at its
// frame header instead; without the gate the room still refuses it, after the
// runtime has buffered it (docs/security.md gives the figure).

let gated: LocalServer;
let direct: LocalServer;

beforeAll(async () => {
  [gated, direct] = await Promise.all([startServer({ gate: "on" }), startServer({ gate: "off" })]);
});

afterAll(async () => {
  await Promise.all([gated?.stop(), direct?.stop()]);
});

const MAX_FRAME = DEFAULTS.MAX_FRAME_BYTES;

function rssMb(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
}

interface Client {
  ws: WebSocket;
  events: Record<string, unknown>[];
  closed: Promise<number>;
}

function open(server: LocalServer, room: string): Promise<Client> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${server.wsUrl}/rooms/${room}/ws`, { perMessageDeflate: false });
    const events: Record<string, unknown>[] = [];
    ws.on("message", (data) => {
      const text = data.toString();
      if (text !== "pong") events.push(...([JSON.parse(text)].flat() as Record<string, unknown>[]));
    });
    const closed = new Promise<number>((settle) => {
      ws.on("close", (code) => settle(code));
      ws.once("open", () => (ws as unknown as { _receiver?: NodeJS.EventEmitter })._receiver?.on("conclude", (code: number) => settle(code)));
    });
    ws.once("open", () => resolve({ ws, events, closed }));
    ws.once("error", reject);
  });
}

/** The first event `client` received that `predicate` accepts, once one has come. */
async function eventOf(client: Client, predicate: (e: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  await until(() => client.events.some(predicate), { timeoutMs: 10_000, what: "the event", everyMs: 20 });
  return client.events.find(predicate)!;
}

describe("oversized client messages", () => {
  it("behind the gate are refused with 1009 at their header, before workerd buffers them", async () => {
    const room = "big-gated";
    const bystander = await open(gated, room);
    const senders = await Promise.all(Array.from({ length: 8 }, () => open(gated, room)));
    const before = rssMb(gated.workerdPid);
    const frame = "x".repeat(8 * 1024 * 1024);
    for (const s of senders) s.ws.send(frame);
    const codes = await Promise.all(senders.map((s) => s.closed));
    expect(codes).toEqual(Array(8).fill(CloseCode.MESSAGE_TOO_BIG));
    // 64 MB sent; workerd saw none of it (the room would have, and needs ~1x each frame).
    expect(rssMb(gated.workerdPid) - before).toBeLessThan(16);
    // The room's other sockets are served as before.
    bystander.ws.send(JSON.stringify({ type: "publish", data: "still here", id: "b1" }));
    expect(await eventOf(bystander, (e) => e.type === "published")).toMatchObject({ id: "b1", seq: 1 });
    bystander.ws.close();
  });

  it("behind the gate are counted across fragments, and messages within the limit pass whole or fragmented", async () => {
    const room = "fragments";
    const client = await open(gated, room);
    // Exactly the limit: a publish frame of MAX_FRAME bytes passes the gate, and the room answers it
    // (its data is over the message limit: too_large, and the socket stays).
    const envelope = JSON.stringify({ type: "publish", data: "", id: "edge" });
    const exact = JSON.stringify({ type: "publish", data: "y".repeat(MAX_FRAME - envelope.length), id: "edge" });
    expect(Buffer.byteLength(exact)).toBe(MAX_FRAME);
    client.ws.send(exact);
    expect(await eventOf(client, (e) => e.type === "error" && e.id === "edge")).toMatchObject({ code: "too_large" });
    // A message in two fragments, 40 KB in all.
    const whole = JSON.stringify({ type: "publish", data: "z".repeat(40_000), id: "frag" });
    client.ws.send(whole.slice(0, 20_000), { fin: false });
    client.ws.send(whole.slice(20_000), { fin: true });
    expect(await eventOf(client, (e) => e.type === "published" && e.id === "frag")).toMatchObject({ seq: 1 });
    // Two fragments each within the limit, the message not.
    const half = Math.ceil((MAX_FRAME + 1) / 2);
    client.ws.send("a".repeat(half), { fin: false });
    client.ws.send("a".repeat(half), { fin: true });
    expect(await client.closed).toBe(CloseCode.MESSAGE_TOO_BIG);
  });

  it("behind the gate do not include control frames: a ping or a close with a payload that reads like a huge frame header passes", async () => {
    // With an all-zero mask the payload travels as written: these bytes would announce a 2^62-byte frame
    // if the gate read them as a header rather than skipping them.
    const lookalike = Buffer.from([0x82, 0x7f, 0x3f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    const zeroMask = (mask: Buffer) => mask.fill(0);
    const ws = new WebSocket(`${gated.wsUrl}/rooms/control-frames/ws`, { perMessageDeflate: false, generateMask: zeroMask });
    const events: Record<string, unknown>[] = [];
    ws.on("message", (data) => events.push(...([JSON.parse(data.toString())].flat() as Record<string, unknown>[])));
    await new Promise((resolve, reject) => {
      ws.once("open", resolve);
      ws.once("error", reject);
    });
    const client: Client = { ws, events, closed: new Promise((settle) => ws.on("close", (code) => settle(code))) };
    // A ping between the two fragments of a message, then the rest of the message.
    const whole = JSON.stringify({ type: "publish", data: "p".repeat(1000), id: "around-ping" });
    ws.send(whole.slice(0, 500), { fin: false });
    ws.ping(lookalike);
    ws.send(whole.slice(500), { fin: true });
    expect(await eventOf(client, (e) => e.type === "published" && e.id === "around-ping")).toMatchObject({ seq: 1 });
    // A close whose reason holds the same bytes: the client reads the room's answer to it, not a 1009 from the gate.
    ws.close(4000, lookalike.toString("latin1"));
    expect(await client.closed).toBe(4000);
  });

  it("without the gate are refused by the room with 1009, after the runtime buffered them", async () => {
    const room = "big-direct";
    const bystander = await open(direct, room);
    const sender = await open(direct, room);
    sender.ws.send("x".repeat(2 * 1024 * 1024));
    expect(await sender.closed).toBe(CloseCode.MESSAGE_TOO_BIG);
    bystander.ws.send(JSON.stringify({ type: "publish", data: "still here", id: "d1" }));
    expect(await eventOf(bystander, (e) => e.type === "published")).toMatchObject({ id: "d1" });
    bystander.ws.close();
  });
});
