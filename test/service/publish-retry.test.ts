import { afterEach, describe, expect, it } from "vitest";
import type { HistoryPage, ServerMessage } from "../../protocol";
import { startServer, type LocalServer } from "../helpers/server";
import { TestSocket } from "../helpers/socket";
import { sleep, until } from "../helpers/wait";

/**
 * Publishes retried with their Idempotency-Key against the local server:
 * through a kill -9 of workerd after the commit and before the answer, and
 * under concurrent retries. Every message once in history and on every socket.
 */

const servers: LocalServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop("SIGKILL")));
});

async function serve(options: Parameters<typeof startServer>[0]): Promise<LocalServer> {
  const server = await startServer(options);
  servers.push(server);
  return server;
}

function keyedPublish(server: LocalServer, room: string, key: string, data: unknown): Promise<Response> {
  return fetch(`${server.url}/rooms/${room}/publish`, {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify(data),
  });
}

/** Every message history holds, oldest first, page by page. */
async function allHistory(server: LocalServer, room: string): Promise<HistoryPage["messages"]> {
  const messages: HistoryPage["messages"] = [];
  let query = "?after=0&limit=1000";
  for (;;) {
    const page = (await (await fetch(`${server.url}/rooms/${room}/messages${query}`)).json()) as HistoryPage;
    messages.push(...page.messages);
    if (page.cursor === null) return messages;
    query = `?cursor=${encodeURIComponent(page.cursor)}&limit=1000`;
  }
}

function waitForOutput(server: LocalServer, pattern: RegExp, timeoutMs: number): Promise<void> {
  return until(() => pattern.test(server.output()), { timeoutMs, everyMs: 20, what: `${pattern} in the server's output`, detail: () => server.output().slice(-2000) });
}

describe("publishes retried with an Idempotency-Key", () => {
  it("after kill -9 of workerd between the commit and the answer: the retry gets the first seq, and the message is in history and on every socket once", async () => {
    const vars = { HISTORY_MAX_MESSAGES: "1000" };
    // The room logs fault_hold once the row is durable and holds the answer (durable-objects/room/fault-hold.ts).
    const first = await serve({ vars: { ...vars, FAULT_HOLD_PUBLISH_ANSWER_MS: "60000" } });
    const room = "retry-kill";
    const before = await TestSocket.open(`${first.wsUrl}/rooms/${room}/ws`);
    await before.waitFor((s) => s.events.some((e) => e.type === "welcome"), 10_000, "the welcome");
    const epoch = (before.events[0] as { epoch: string }).epoch;

    const body = { order: 42, item: "tea" };
    const answer = keyedPublish(first, room, "order-42", body).then(
      (res) => ({ status: res.status }),
      (error: unknown) => ({ error: String(error) }),
    );
    await waitForOutput(first, /"event":"fault_hold","room":"retry-kill","seq":1/, 20_000);
    await first.stop("SIGKILL");
    // The publisher never heard back: its connection died with workerd.
    expect(await answer).toHaveProperty("error");

    const second = await serve({ vars, dataDir: first.dataDir, port: first.port });
    const resumed = await TestSocket.open(`${second.wsUrl}/rooms/${room}/ws?since=${before.readSeq}&epoch=${epoch}`);
    const fresh = await TestSocket.open(`${second.wsUrl}/rooms/${room}/ws?since=0`);
    const retry = await keyedPublish(second, room, "order-42", body);
    expect(retry.status).toBe(200);
    expect(await retry.json()).toEqual({ room, seq: 1, recipients: 0, duplicate: true });
    // A later message shows the sockets are level: anything sent twice would have come before it.
    const later = await keyedPublish(second, room, "order-43", { order: 43 });
    expect(((await later.json()) as { seq: number }).seq).toBe(2);
    for (const socket of [resumed, fresh]) await socket.waitFor((s) => s.messages.some((m) => m.seq === 2), 20_000, "seq 2");
    const seen = [...before.messages, ...resumed.messages].map((m) => [m.seq, m.data]);
    expect(seen).toEqual([[1, body], [2, { order: 43 }]]);
    expect(fresh.messages.map((m) => [m.seq, m.data])).toEqual([[1, body], [2, { order: 43 }]]);
    expect((await allHistory(second, room)).map((m) => [m.seq, m.data])).toEqual([[1, body], [2, { order: 43 }]]);
    resumed.close();
    fresh.close();
  }, 120_000);

  it("1,000 publishes each retried 3 times at once: 1,000 messages in history and on every socket, and every answer carries the first seq", async () => {
    const server = await serve({ vars: { HISTORY_MAX_MESSAGES: "5000" } });
    const room = "retry-storm";
    const sockets = await Promise.all(Array.from({ length: 3 }, () => TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`)));
    const answers = new Map<number, { seq: number; duplicate?: true }[]>();
    let next = 0;
    const COUNT = 1000;
    // 25 publishers; each sends a message and its 3 retries at the same moment.
    await Promise.all(
      Array.from({ length: 25 }, async () => {
        while (next < COUNT) {
          const n = next++;
          const four = await Promise.all(Array.from({ length: 4 }, () => keyedPublish(server, room, `msg-${n}`, { n })));
          answers.set(n, await Promise.all(four.map(async (res) => {
            expect(res.status).toBe(200);
            return (await res.json()) as { seq: number; duplicate?: true };
          })));
        }
      }),
    );
    for (const [n, four] of answers) {
      expect(new Set(four.map((a) => a.seq)).size, `message ${n}`).toBe(1);
      expect(four.filter((a) => a.duplicate !== true), `message ${n}`).toHaveLength(1);
    }
    const seqs = [...answers.values()].map((four) => (four[0] as { seq: number }).seq).sort((a, b) => a - b);
    expect(seqs).toEqual(Array.from({ length: COUNT }, (_, i) => i + 1));
    const history = await allHistory(server, room);
    expect(history).toHaveLength(COUNT);
    expect(new Set(history.map((m) => (m.data as { n: number }).n)).size).toBe(COUNT);
    for (const socket of sockets) {
      await socket.waitForMessages(COUNT, 30_000);
      await sleep(200);
      const got: ServerMessage[] = socket.messages;
      expect(got.map((m) => m.seq)).toEqual(Array.from({ length: COUNT }, (_, i) => i + 1));
      socket.close();
    }
  }, 180_000);
});
