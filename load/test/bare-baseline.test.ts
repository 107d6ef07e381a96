/**
 * The bare workerd baseline (load/baselines/bare-workerd) and the PartyServer
 * baseline (load/baselines/partyserver) speak enough of the wire protocol for
 * the load tool's clients: run on workerd as the load tool runs them
 * (load/dist/bare-server.js, load/dist/partyserver-server.js), each on a
 * loopback port of its own.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { freePort } from "../../test/helpers/server";
import { parseServerFrame, type ServerEvent } from "../../protocol";
import { Server, stopAllServers } from "../src/kit/server";
import { parseLoadOptions, targetLabels } from "../src/options";

const root = fileURLToPath(new URL("../../", import.meta.url));

/** A baseline as every benchmark starts it (the kit's server start), on a free port of its own. */
async function startBaseline(kind: "bare" | "bare-durable" | "partyserver"): Promise<Server> {
  return Server.start({ kind, port: await freePort() });
}

async function startBare(durable: boolean): Promise<Server> {
  return startBaseline(durable ? "bare-durable" : "bare");
}

/** Opens a socket and collects every event it receives. */
async function subscribe(bare: Server, room: string): Promise<{ ws: WebSocket; events: ServerEvent[]; texts: string[] }> {
  const ws = new WebSocket(`${bare.wsUrl}/rooms/${room}/ws`, { perMessageDeflate: false });
  const events: ServerEvent[] = [];
  const texts: string[] = [];
  ws.on("message", (data) => {
    const text = String(data);
    texts.push(text);
    const parsed = parseServerFrame(text);
    if (parsed.ok) events.push(...parsed.value);
  });
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  await until(() => events.length > 0);
  return { ws, events, texts };
}

async function until(condition: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function publish(bare: Server, room: string, body: string): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`${bare.url}/rooms/${room}/publish`, { method: "POST", body, headers: { "content-type": "application/json" } });
  return { status: res.status, json: await res.json() };
}

beforeAll(() => {
  execFileSync(process.execPath, ["load/build.mjs"], { cwd: root, stdio: "inherit" });
}, 60_000);
afterAll(() => stopAllServers());

describe("the bare workerd baseline", () => {
  it("welcomes a socket, sends each publish to it as a message event and answers the publisher with seq and recipients", async () => {
    const bare = await startBare(false);
    try {
      const { ws, events } = await subscribe(bare, "lobby");
      const welcome = events[0];
      expect(welcome).toMatchObject({ type: "welcome", room: "lobby", seq: 0, window: 1_048_576, rate: { perSecond: 0, burst: 0 } });
      expect(typeof (welcome as { epoch: unknown }).epoch).toBe("string");

      expect(await publish(bare, "lobby", '{"n":1}')).toEqual({ status: 200, json: { room: "lobby", seq: 1, recipients: 1 } });
      expect(await publish(bare, "lobby", "plain text")).toEqual({ status: 200, json: { room: "lobby", seq: 2, recipients: 1 } });
      await until(() => events.length === 3);
      const [first, second] = events.slice(1) as Array<{ type: string; seq: number; data: unknown; ts: number; tag: number }>;
      expect(first).toMatchObject({ type: "message", seq: 1, data: { n: 1 } });
      expect(second).toMatchObject({ type: "message", seq: 2, data: "plain text" });
      expect(Number.isInteger(first?.tag)).toBe(true);
      expect(Math.abs(Date.now() - (first?.ts ?? 0))).toBeLessThan(60_000);

      // An ack is accepted and changes nothing; a text ping is answered by the runtime.
      ws.send(JSON.stringify({ type: "ack", seq: 2, tag: second?.tag }));
      const pong = new Promise<string>((resolve) => ws.once("message", (data) => resolve(String(data))));
      ws.send("ping");
      expect(await pong).toBe("pong");
      expect(await publish(bare, "other-room", "{}")).toEqual({ status: 200, json: { room: "other-room", seq: 1, recipients: 0 } });
      ws.close();
    } finally {
      await bare.stop();
    }
  }, 60_000);

  it("holds a multiplexed connection in its Worker: a subscribed event per room from the room's welcome, then each room's messages naming it", async () => {
    const bare = await startBare(false);
    try {
      await publish(bare, "mx-b", "0");
      const ws = new WebSocket(`${bare.wsUrl}/ws`, { perMessageDeflate: false });
      const events: Array<Record<string, unknown>> = [];
      ws.on("message", (data) => {
        const parsed = parseServerFrame(String(data));
        if (parsed.ok) events.push(...(parsed.value as unknown as Array<Record<string, unknown>>));
      });
      await new Promise<void>((resolve, reject) => {
        ws.once("open", () => resolve());
        ws.once("error", reject);
      });
      await until(() => events.length === 1);
      expect(events[0]).toMatchObject({ type: "welcome", window: 1_048_576 });
      ws.send(JSON.stringify({ type: "subscribe", room: "mx-a" }));
      ws.send(JSON.stringify({ type: "subscribe", room: "mx-b" }));
      await until(() => events.filter((e) => e.type === "subscribed").length === 2);
      expect(events.find((e) => e.type === "subscribed" && e.room === "mx-b")).toMatchObject({ seq: 1 });
      await publish(bare, "mx-a", '{"a":1}');
      await publish(bare, "mx-b", '{"b":2}');
      await until(() => events.filter((e) => e.type === "message").length === 2);
      const messages = events.filter((e) => e.type === "message");
      expect(messages).toEqual([
        expect.objectContaining({ room: "mx-a", seq: 1, data: { a: 1 } }),
        expect.objectContaining({ room: "mx-b", seq: 2, data: { b: 2 } }),
      ]);
      const pong = new Promise<string>((resolve) => ws.once("message", (data) => resolve(String(data))));
      ws.send("ping");
      expect(await pong).toBe("pong");
      ws.close();
    } finally {
      await bare.stop();
    }
  }, 60_000);

  it("answers every message of a batched publish with its own room's seq", async () => {
    const bare = await startBare(false);
    try {
      await publish(bare, "a", "1");
      const res = await fetch(`${bare.url}/publish`, { method: "POST", body: JSON.stringify({ messages: [{ room: "a", data: 2 }, { room: "b", data: 1 }, { room: "a", data: 3 }] }) });
      const body = (await res.json()) as { results: Array<{ room: string; seq: number }> };
      expect(res.status).toBe(200);
      expect(body.results.map((r) => r.room)).toEqual(["a", "b", "a"]);
      expect(body.results.filter((r) => r.room === "a").map((r) => r.seq).sort()).toEqual([2, 3]);
      expect(body.results.find((r) => r.room === "b")?.seq).toBe(1);
    } finally {
      await bare.stop();
    }
  }, 60_000);

  it("keeps a durable room's seq across a restart on the same data directory (the kit's restart), and only the durable one", async () => {
    for (const durable of [true, false]) {
      const bare = await startBare(durable);
      try {
        await publish(bare, "kept", "1");
        await publish(bare, "kept", "2");
        await bare.restart();
        const { events } = await subscribe(bare, "kept");
        expect(events[0]).toMatchObject({ type: "welcome", seq: durable ? 2 : 0 });
        expect((await publish(bare, "kept", "3")).json).toMatchObject({ seq: durable ? 3 : 1 });
      } finally {
        await bare.stop();
      }
    }
  }, 90_000);
});

describe("the PartyServer baseline", () => {
  it("is a PartyServer room: welcomes a socket, broadcasts each publish as a message event with the room's next seq, and ignores acks and pings", async () => {
    const party = await startBaseline("partyserver");
    try {
      expect(await (await fetch(`${party.url}/healthz`)).json()).toEqual({ ok: true, server: "partyserver" });
      const a = await subscribe(party, "lobby");
      const b = await subscribe(party, "lobby");
      expect(a.events[0]).toMatchObject({ type: "welcome", room: "lobby", seq: 0, window: 1_048_576 });
      expect(await publish(party, "lobby", '{"n":1}')).toEqual({ status: 200, json: { room: "lobby", seq: 1 } });
      expect(await publish(party, "lobby", "plain text")).toEqual({ status: 200, json: { room: "lobby", seq: 2 } });
      for (const s of [a, b]) {
        await until(() => s.events.length === 3);
        expect(s.events.slice(1)).toEqual([expect.objectContaining({ type: "message", seq: 1, data: { n: 1 } }), expect.objectContaining({ type: "message", seq: 2, data: "plain text" })]);
      }
      // The load client's acks and pings reach onMessage, which answers nothing.
      a.ws.send(JSON.stringify({ type: "ack", seq: 2, tag: 1 }));
      a.ws.send("ping");
      expect(await publish(party, "lobby", "3")).toMatchObject({ json: { seq: 3 } });
      await until(() => a.events.length === 4);
      expect(a.texts.includes("pong")).toBe(false);
      // Another room is another server; a GET is not a publish.
      expect((await publish(party, "other", "1")).json).toEqual({ room: "other", seq: 1 });
      expect((await fetch(`${party.url}/rooms/lobby/publish`)).status).toBe(405);
      for (const s of [a, b]) s.ws.close();
    } finally {
      await party.stop();
    }
  }, 60_000);
});

describe("choosing the bare baselines on the command line", () => {
  it("runs ours, then each baseline named, in order; --baseline-only leaves ours out and the Node baseline unless named", () => {
    const labels = (...args: string[]) => targetLabels(parseLoadOptions(["fanout", ...args]));
    expect(labels("--baseline-bare", "--baseline-bare-durable")).toEqual(["ours", "bare", "bare-durable"]);
    expect(labels("--baseline", "--baseline-bare")).toEqual(["ours", "baseline", "bare"]);
    expect(labels("--baseline-only", "--baseline-bare-durable")).toEqual(["bare-durable"]);
    expect(labels("--baseline-only", "--baseline", "--baseline-bare")).toEqual(["baseline", "bare"]);
    expect(labels("--baseline-only")).toEqual(["baseline"]);
    expect(labels("--baseline-bare", "--baseline-partyserver")).toEqual(["ours", "bare", "partyserver"]);
    expect(labels("--baseline-only", "--baseline-partyserver")).toEqual(["partyserver"]);
    expect(labels()).toEqual(["ours"]);
  });
});
