import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { HistoryPage, RoomStats } from "../../protocol";
import { fetchHistory, HistoryError, historyPages } from "../../client-sdk/src/history";
import { startServer, type LocalServer } from "../helpers/server";
import { TestSocket } from "../helpers/socket";
import { sleep } from "../helpers/wait";

/**
 * History over HTTP and retention rules against the local server: the publish
 * key guards the pages, the SDK's back-end helper reads them, HISTORY_RULES
 * bounds rooms by name (bad rules refused and logged), a bound changed on a
 * live room keeps its seq, and a rewinding socket starts no further back than
 * history holds.
 */

const PUBLISH_KEY = "history-test-key-31f9";
const RULES = [
  { prefix: "short:", maxMessages: 5 },
  { prefix: "brief:", maxAgeSeconds: 1 },
  { prefix: "bad rule", maxMessages: 5 },
];
const auth = { authorization: `Bearer ${PUBLISH_KEY}` };
let server: LocalServer;

async function publishEach(room: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const res = await fetch(`${server.url}/rooms/${room}/publish`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ i }) });
    expect(res.status).toBe(200);
  }
}

async function stats(room: string): Promise<RoomStats> {
  return (await (await fetch(`${server.url}/rooms/${room}`, { headers: auth })).json()) as RoomStats;
}

beforeAll(async () => {
  server = await startServer({ vars: { HISTORY_RULES: JSON.stringify(RULES) }, env: { PUBLISH_KEY } });
});

afterAll(async () => {
  await server?.stop();
});

describe("GET /rooms/{room}/messages", () => {
  it("asks for the publish key, like the other read routes", async () => {
    await publishEach("guarded", 3);
    const without = await fetch(`${server.url}/rooms/guarded/messages`);
    expect(without.status).toBe(401);
    expect(await without.json()).toMatchObject({ error: "unauthorized" });
    const wrong = await fetch(`${server.url}/rooms/guarded/messages`, { headers: { authorization: "Bearer nope" } });
    expect(wrong.status).toBe(401);
    const page = (await (await fetch(`${server.url}/rooms/guarded/messages`, { headers: auth })).json()) as HistoryPage;
    expect(page.messages.map((m) => m.seq)).toEqual([3, 2, 1]);
  });

  it("is read from a back end with the SDK's fetchHistory and historyPages", async () => {
    const room = "sdk-pages";
    await publishEach(room, 250);
    const newest = await fetchHistory<{ i: number }>(server.url, room, { limit: 50, publishKey: PUBLISH_KEY });
    expect(newest.messages.map((m) => m.seq)).toEqual(Array.from({ length: 50 }, (_, i) => 250 - i));
    expect(newest.messages[0]?.data).toEqual({ i: 249 });
    const earlier = await fetchHistory(server.url, room, { before: 201, limit: 10, publishKey: PUBLISH_KEY });
    expect(earlier.messages.map((m) => m.seq)).toEqual(Array.from({ length: 10 }, (_, i) => 200 - i));
    const seen: number[] = [];
    for await (const page of historyPages(server.url, room, { after: 0, limit: 40, publishKey: PUBLISH_KEY })) seen.push(...page.messages.map((m) => m.seq));
    expect(seen).toEqual(Array.from({ length: 250 }, (_, i) => i + 1));
    const refused = await fetchHistory(server.url, room, { publishKey: "wrong" }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(HistoryError);
    expect(refused).toMatchObject({ status: 401, code: "unauthorized" });
    await expect(fetchHistory(server.url, "never-used", { publishKey: PUBLISH_KEY })).rejects.toMatchObject({ status: 404, code: "not_found" });
  });
});

describe("HISTORY_RULES", () => {
  it("bounds a room by the rule of its name's prefix, and logs the rule it refused", async () => {
    expect(server.output()).toMatch(/"event":"bad_config","var":"HISTORY_RULES","index":2/);
    await publishEach("short:a", 12);
    await publishEach("plain", 12);
    expect((await stats("short:a")).retention).toEqual({ maxMessages: 5, maxAgeSeconds: 120, store: true, rule: "short:" });
    expect((await stats("plain")).retention).toEqual({ maxMessages: 1000, maxAgeSeconds: 120, store: true, rule: null });
    const page = (await (await fetch(`${server.url}/rooms/short:a/messages`, { headers: auth })).json()) as HistoryPage;
    expect(page.messages.map((m) => m.seq)).toEqual([12, 11, 10, 9, 8]);
    expect(page.lost).toEqual({ from: 1, to: 7 });
    const resumed = await TestSocket.open(`${server.wsUrl}/rooms/short:a/ws?since=0`);
    await resumed.waitForMessages(5);
    expect(resumed.events.find((e) => e.type === "lost")).toMatchObject({ from: 1, to: 7 });
    resumed.close();
  });

  it("bounds rewind by the room's rule, and starts a rewinding socket no further back than history holds", async () => {
    await expect(TestSocket.open(`${server.wsUrl}/rooms/short:b/ws?rewind=6`)).rejects.toThrow(/HTTP 400/);
    (await TestSocket.open(`${server.wsUrl}/rooms/short:b/ws?rewind=5`)).close();
    // brief: keeps a second: ten messages, then two more after they aged out.
    await publishEach("brief:a", 10);
    await sleep(1500);
    await publishEach("brief:a", 2);
    const rewound = await TestSocket.open(`${server.wsUrl}/rooms/brief:a/ws?rewind=5`);
    await rewound.waitForMessages(2);
    await sleep(100);
    expect(rewound.events[0]).toMatchObject({ type: "welcome", seq: 10 });
    expect(rewound.events.some((e) => e.type === "lost")).toBe(false);
    expect(rewound.messages.map((m) => m.seq)).toEqual([11, 12]);
    rewound.close();
  });

  it("keeps a live room's seq and the messages within its new bound when its rule changes", async () => {
    const room = "short:live";
    await publishEach(room, 9);
    const epoch = (await stats(room)).epoch;
    await server.stop();
    server = await startServer({
      vars: { HISTORY_RULES: JSON.stringify([{ prefix: "short:", maxMessages: 8 }]) },
      env: { PUBLISH_KEY },
      dataDir: server.dataDir,
      port: server.port,
    });
    const after = await stats(room);
    expect(after).toMatchObject({ seq: 9, epoch, retention: { maxMessages: 8, rule: "short:" } });
    const page = (await (await fetch(`${server.url}/rooms/${room}/messages?after=0`, { headers: auth })).json()) as HistoryPage;
    expect(page.messages.map((m) => m.seq)).toEqual([5, 6, 7, 8, 9]);
    await publishEach(room, 1);
    expect((await stats(room)).seq).toBe(10);
  });
});
