import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CloseCode, type ServerError, type WelcomeEvent } from "../../protocol";
import { DEFAULTS } from "../../common/settings";
import { startServer, type LocalServer } from "../helpers/server";
import { roomStats, TestSocket } from "../helpers/socket";

/**
 * A publish over MAX_MESSAGE_BYTES is refused with `too_large` (naming the
 * publish's id) and the socket stays: the frame limit leaves room for the
 * largest message in any honest encoding, so a message just over its limit
 * never closes a client for good. Only a frame far beyond that is closed with
 * 1009, a code that means "reconnect".
 */
let server: LocalServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server?.stop();
});

const LIMIT = DEFAULTS.MAX_MESSAGE_BYTES;

/** A string whose JSON text (quotes included) is exactly `bytes` bytes. */
const dataOfSize = (bytes: number): string => "x".repeat(bytes - 2);

async function publishOver(s: TestSocket, id: string, frame: string): Promise<ServerError | number> {
  s.ws.send(frame);
  await s.waitFor((x) => x.events.some((e) => (e.type === "published" || e.type === "error") && "id" in e && e.id === id) || x.closeInfo !== null);
  const answer = s.events.find((e) => (e.type === "published" || e.type === "error") && "id" in e && e.id === id);
  if (!answer) throw new Error(`no answer to ${id}; closed with ${s.closeInfo?.code}`);
  return answer.type === "published" ? answer.seq : (answer as ServerError);
}

describe("a socket publish and the message limit", () => {
  it("announces the limit in the welcome", async () => {
    const s = await TestSocket.open(`${server.wsUrl}/rooms/size-welcome/ws`);
    await s.waitFor((x) => x.events.length > 0);
    expect((s.events[0] as WelcomeEvent).maxMessageBytes).toBe(LIMIT);
    s.close();
  });

  it("publishes at the limit, refuses one byte over and far over with too_large and the publish's id, and keeps the socket", async () => {
    const room = "size-limit";
    const s = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    expect(await publishOver(s, "at", JSON.stringify({ type: "publish", id: "at", data: dataOfSize(LIMIT) }))).toBe(1);
    const over = await publishOver(s, "over", JSON.stringify({ type: "publish", id: "over", data: dataOfSize(LIMIT + 1) }));
    expect(over).toMatchObject({ type: "error", code: "too_large", id: "over" });
    // As a client that escapes every non-ASCII character sends it: twice the bytes on the wire.
    const escaped = `{"type":"publish","id":"escaped","data":"${"\\u00e9".repeat(Math.floor(LIMIT / 2))}"}`;
    expect(await publishOver(s, "escaped", escaped)).toMatchObject({ code: "too_large", id: "escaped" });
    const far = await publishOver(s, "far", JSON.stringify({ type: "publish", id: "far", data: dataOfSize(Math.floor(LIMIT * 2.9)) }));
    expect(far).toMatchObject({ code: "too_large", id: "far" });
    expect(s.closeInfo).toBeNull();
    expect(await publishOver(s, "after", JSON.stringify({ type: "publish", id: "after", data: "still here" }))).toBe(2);
    expect((await roomStats(server.url, room)).seq).toBe(2);
    s.close();
  });

  it("closes a frame beyond MAX_FRAME_BYTES with 1009, which means reconnect, and the room keeps what it had", async () => {
    const room = "size-frame";
    const s = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`);
    s.ws.send(JSON.stringify({ type: "publish", id: "huge", data: dataOfSize(DEFAULTS.MAX_FRAME_BYTES + 10) }));
    expect((await s.closed).code).toBe(CloseCode.MESSAGE_TOO_BIG);
    const again = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?since=0`);
    await again.waitFor((x) => x.events.length > 0);
    expect((again.events[0] as WelcomeEvent).seq).toBe(0);
    again.close();
  });
});
