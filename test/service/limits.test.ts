import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CloseCode } from "../../protocol";
import { startServer, type LocalServer } from "../helpers/server";
import { publish, refusedUpgrade, roomStats, TestSocket } from "../helpers/socket";
import { sleep } from "../helpers/wait";

let server: LocalServer;

beforeAll(async () => {
  server = await startServer({ vars: { MAX_SOCKETS_PER_ROOM: "3", CLIENT_FRAMES_PER_SECOND: "5", CLIENT_FRAME_BURST: "10" } });
});

afterAll(async () => {
  await server?.stop();
});

describe("abuse limits", () => {
  it("refuses a socket over the room's maximum with 503 room_full, and serves the others", async () => {
    const room = "full";
    const held = await Promise.all([1, 2, 3].map(() => TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`)));
    const refused = await refusedUpgrade(`${server.wsUrl}/rooms/${room}/ws`);
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.body)).toMatchObject({ error: "room_full" });
    const answer = await publish(server.url, room, "still served");
    expect(answer.body.recipients).toBe(3);
    // A place frees up when a socket leaves.
    held[0]?.close();
    await held[0]?.closed;
    await sleep(200);
    const again = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    expect((await roomStats(server.url, room)).refusals.room_full).toBe(1);
    for (const s of [...held.slice(1), again]) s.close();
  });

  it("closes a socket that sends frames over its rate with 4009; heartbeats and acks that release frames do not count", async () => {
    const room = "rate";
    const calm = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    for (let i = 0; i < 50; i++) calm.send("ping");
    // Acks are flow control: a client acking each of 100 frames (20x its budget) is not limited.
    const acking = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    for (let i = 0; i < 100; i++) await publish(server.url, room, i);
    await acking.waitForMessages(100);
    const noisy = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    // An ack that releases nothing (here: one from before this connection) costs like any frame.
    for (let i = 0; i < 30; i++) noisy.send({ type: "ack", seq: 0, tag: 0 });
    expect((await noisy.closed).code).toBe(CloseCode.RATE_LIMITED);
    await calm.waitFor((s) => s.frames.filter((f) => f === "pong").length === 50, 5000, "50 pongs");
    expect(calm.closeInfo).toBeNull();
    expect(acking.closeInfo).toBeNull();
    expect((await roomStats(server.url, room)).refusals.rate_limited).toBe(1);
    calm.close();
    acking.close();
  });
});
