import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type LocalServer } from "../helpers/server";
import { expectSeqs, publish, roomStats, TestSocket } from "../helpers/socket";
import { sleep } from "../helpers/wait";

let interval: LocalServer;

beforeAll(async () => {
  interval = await startServer({ vars: { FLUSH_DELAY_MS: "1000" } });
});

afterAll(async () => {
  await interval?.stop();
});

describe("history rows", () => {
  it("with a persist interval, writes at most one row per interval and answers each publish once it is stored", async () => {
    const room = "rows-interval";
    const s = await TestSocket.open(`${interval.wsUrl}/rooms/${room}/ws`);
    const answers: Promise<{ status: number; ms: number }>[] = [];
    const started = Date.now();
    // 5 messages a second for 4 seconds.
    for (let i = 0; i < 20; i++) {
      const at = Date.now();
      answers.push(publish(interval.url, room, { i }).then((r) => ({ status: r.status, ms: Date.now() - at })));
      await sleep(200);
    }
    const done = await Promise.all(answers);
    expect(done.every((d) => d.status === 200)).toBe(true);
    await s.waitForMessages(20);
    expectSeqs(s.messages, 1, 20);
    const stats = await roomStats(interval.url, room);
    const seconds = (Date.now() - started) / 1000;
    expect(stats.historyRowsWritten).toBeLessThanOrEqual(Math.ceil(seconds) + 1);
    // The trade: a publish waits for its interval to end before it is answered.
    expect(Math.max(...done.map((d) => d.ms))).toBeGreaterThan(500);
    s.close();
  });
});
