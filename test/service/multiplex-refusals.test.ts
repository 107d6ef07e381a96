import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CloseCode } from "../../protocol";
import { MuxSocket } from "../helpers/multiplex";
import { rssMb, startServer, type LocalServer } from "../helpers/server";
import { publish } from "../helpers/socket";
import { sleep } from "../helpers/wait";

/**
 * Refused subscribes on a multiplexed connection cost what any other frame
 * costs: a refusal takes a frame token (a storm of them is closed with 4009),
 * and the answers a connection has not read count against its window (one
 * that sends refused frames within its rate and never reads is closed with
 * 4008 once they fill it). So a client that never reads holds a bounded part
 * of the server's memory, however many refusals it asks for.
 */
const WINDOW = 16 * 1024;
/** The answers a connection may leave unread: its window, and at least 64 KiB (docs/protocol.md). */
const ANSWER_ALLOWANCE = 64 * 1024;
const FRAMES_PER_SECOND = 200;
let server: LocalServer;
beforeAll(async () => {
  server = await startServer({
    vars: { WINDOW_BYTES: String(WINDOW), CLIENT_FRAMES_PER_SECOND: String(FRAMES_PER_SECOND), CLIENT_FRAME_BURST: String(FRAMES_PER_SECOND) },
  });
});
afterAll(async () => {
  await server?.stop();
});

const wsUrl = () => `${server.wsUrl}/ws`;

/** Sends `count` frames as fast as the socket drains them, without ever buffering more than ~1 MB on the client. */
async function flood(mux: MuxSocket, count: number, frame: (i: number) => unknown): Promise<void> {
  for (let i = 0; i < count; i++) {
    if (mux.ws.readyState !== mux.ws.OPEN) return;
    mux.send(frame(i));
    if (mux.ws.bufferedAmount > 1 << 20) while (mux.ws.bufferedAmount > 1 << 18 && mux.ws.readyState === mux.ws.OPEN) await sleep(5);
  }
}

/** Bytes of the `error` events a connection received. */
const errorBytes = (mux: MuxSocket) => mux.of("error").reduce((sum, e) => sum + JSON.stringify(e).length, 0);

describe("refused subscribes", () => {
  it("in a storm from a client that never reads end the connection with 4009, and the server's memory stays bounded", async () => {
    const reader = await MuxSocket.open(wsUrl());
    reader.subscribe("rf-live");
    await reader.waitFor((s) => s.of("subscribed", "rf-live").length === 1, 10_000, "the reader subscribed");
    const storm = await MuxSocket.open(wsUrl(), { autoAck: false });
    storm.subscribe("rf-storm");
    await storm.waitFor((s) => s.of("subscribed").length === 1, 10_000, "the storm's first room");
    storm.pauseReading();
    // The first refusals warm the runtime up (its heap grows to handle frames at this rate, whatever it answers).
    await flood(storm, 20_000, () => ({ type: "subscribe", room: "rf-storm" }));
    await sleep(1000);
    const before = rssMb(server.workerdPid);
    // Already followed, then over the subscribe budget: every one of these is refused.
    await flood(storm, 100_000, () => ({ type: "subscribe", room: "rf-storm" }));
    await sleep(2000);
    const grown = rssMb(server.workerdPid) - before;
    // The honest reader on the same server is still served.
    await publish(server.url, "rf-live", "still here");
    await reader.waitForMessages("rf-live", 1);
    storm.resumeReading();
    await storm.waitFor((s) => s.closeInfo !== null, 20_000, "the storm's close");
    expect(storm.closeInfo?.code).toBe(CloseCode.RATE_LIMITED);
    // It was answered no more than its frame budget allows, not 100,000 times.
    expect(storm.of("error").length).toBeLessThanOrEqual(2 * FRAMES_PER_SECOND);
    // Answered 100,000 times, it held over 100 MB; what is left is the runtime handling frames it drops.
    expect(grown).toBeLessThan(48);
    expect(reader.closeInfo).toBeNull();
    reader.close();
  });

  it("within the frame rate, from a client that never reads, end the connection with 4008 once its unread answers fill the allowance", async () => {
    const mux = await MuxSocket.open(wsUrl(), { autoAck: false });
    mux.subscribe("rf-drip");
    await mux.waitFor((s) => s.of("subscribed").length === 1, 10_000, "subscribed");
    mux.pauseReading();
    // Three quarters of the frame rate, for up to 15 s: every one refused (already followed, or over the subscribe budget).
    const started = Date.now();
    let sent = 0;
    while (mux.ws.readyState === mux.ws.OPEN && Date.now() - started < 15_000) {
      mux.subscribe("rf-drip");
      sent += 1;
      await sleep(Math.max(0, started + (sent * 1000) / (0.75 * FRAMES_PER_SECOND) - Date.now()));
      if (sent % 200 === 0) {
        // The close frame waits behind what it was not reading: look for it now and then.
        mux.resumeReading();
        await sleep(20);
        mux.pauseReading();
      }
    }
    mux.resumeReading();
    await mux.waitFor((s) => s.closeInfo !== null, 10_000, "the close");
    expect(mux.closeInfo?.code).toBe(CloseCode.SLOW_CONSUMER);
    // What it was sent and never acknowledged is at most the allowance and one answer.
    expect(errorBytes(mux)).toBeLessThanOrEqual(ANSWER_ALLOWANCE + 1024);
  });

  it("from a client that reads and acknowledges cost it nothing but tokens: the connection and its rooms stay", async () => {
    const mux = await MuxSocket.open(wsUrl());
    mux.subscribe("rf-honest");
    await mux.waitFor((s) => s.of("subscribed").length === 1, 10_000, "subscribed");
    // Refused subscribes in between messages it reads and acknowledges, within the frame rate, past the allowance in all.
    for (let round = 0; round < 8; round++) {
      for (let i = 0; i < 100; i++) mux.subscribe("rf-honest");
      await publish(server.url, "rf-honest", { round });
      await mux.waitForMessages("rf-honest", round + 1);
      await sleep(600);
    }
    expect(errorBytes(mux)).toBeGreaterThan(ANSWER_ALLOWANCE);
    expect(mux.closeInfo).toBeNull();
    mux.close();
  });
});
