import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CloseCode, MAX_ECHOED_ROOM_LENGTH, type ConnectionWelcomeEvent } from "../../protocol";
import { MuxSocket } from "../helpers/multiplex";
import { startServer, type LocalServer } from "../helpers/server";
import { publish, roomStats, TestSocket } from "../helpers/socket";
import { sleep } from "../helpers/wait";

/**
 * The multiplexed connection (`GET /ws`) against the local server: one socket
 * following several rooms, each room's messages in order and once, refusals
 * per room with the connection open, resume of every subscription.
 */
let server: LocalServer;
beforeAll(async () => {
  server = await startServer({ vars: { MAX_ROOMS_PER_CONNECTION: "3" } });
});
afterAll(async () => {
  await server?.stop();
});

const wsUrl = () => `${server.wsUrl}/ws`;

describe("a multiplexed connection", () => {
  it("follows several rooms: each room's messages in order, once, each event naming its room", async () => {
    const mux = await MuxSocket.open(wsUrl());
    await mux.waitFor((s) => s.events.length > 0);
    expect(mux.events[0]).toMatchObject({ type: "welcome", maxRooms: 3 } satisfies Partial<ConnectionWelcomeEvent>);
    for (const room of ["mx-a", "mx-b"]) mux.subscribe(room);
    await mux.waitFor((s) => s.of("subscribed").length === 2, 10_000, "both subscribed");
    for (let i = 1; i <= 5; i++) {
      await publish(server.url, "mx-a", { a: i });
      await publish(server.url, "mx-b", { b: i });
    }
    await mux.waitForMessages("mx-a", 5);
    await mux.waitForMessages("mx-b", 5);
    expect(mux.messages("mx-a").map((m) => m.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(mux.messages("mx-b").map((m) => m.data)).toEqual([1, 2, 3, 4, 5].map((b) => ({ b })));
    // The room counts its multiplexed subscribers with its sockets.
    const stats = await roomStats(server.url, "mx-a");
    expect(stats.connections).toBe(1);
    mux.close();
  });

  it("answers a refused subscribe with an error for that room and keeps the connection and its other rooms", async () => {
    const mux = await MuxSocket.open(wsUrl());
    for (const room of ["mx-c1", "mx-c2", "mx-c3", "mx-c4"]) mux.subscribe(room);
    await mux.waitFor((s) => s.of("subscribed").length === 3 && s.of("error").length === 1, 10_000, "three subscribed, one refused");
    expect(mux.of("error")[0]).toMatchObject({ room: "mx-c4", code: "too_many_rooms" });
    mux.subscribe("mx-c1");
    await mux.waitFor((s) => s.of("error").length === 2);
    expect(mux.of("error")[1]).toMatchObject({ room: "mx-c1", code: "bad_request" });
    await publish(server.url, "mx-c2", "still here");
    await mux.waitForMessages("mx-c2", 1);
    expect(mux.closeInfo).toBeNull();
    mux.close();
  });

  it("refuses a subscribe to a string that is not a room name for that room, and keeps the connection", async () => {
    const mux = await MuxSocket.open(wsUrl());
    const long = "x".repeat(MAX_ECHOED_ROOM_LENGTH + 1);
    mux.send({ type: "subscribe", room: "no spaces!", id: "s1" });
    mux.send({ type: "subscribe", room: "", id: "s2" });
    mux.send({ type: "subscribe", room: long, id: "s3" });
    mux.subscribe("mx-after-bad");
    await mux.waitFor((s) => s.of("error").length === 3 && s.of("subscribed").length === 1, 10_000, "three refused, one subscribed");
    expect(mux.of("error")).toEqual([
      expect.objectContaining({ room: "no spaces!", code: "bad_room", id: "s1" }),
      expect.objectContaining({ room: "", code: "bad_room", id: "s2" }),
      expect.objectContaining({ code: "bad_room", id: "s3" }),
    ]);
    // A name too long to be one is not repeated back.
    expect(mux.of("error")[2]).not.toHaveProperty("room");
    await publish(server.url, "mx-after-bad", "still here");
    await mux.waitForMessages("mx-after-bad", 1);
    expect(mux.closeInfo).toBeNull();
    // A room that is not a string is no subscribe at all: not protocol, 4000.
    mux.send({ type: "subscribe", room: 7 });
    expect((await mux.closed).code).toBe(CloseCode.BAD_FRAME);
  });

  it("publishes into a subscribed room, refuses one it does not follow, and unsubscribes", async () => {
    const mux = await MuxSocket.open(wsUrl());
    mux.subscribe("mx-p");
    await mux.waitFor((s) => s.of("subscribed").length === 1);
    mux.send({ type: "publish", room: "mx-p", data: "hi", id: "p1" });
    mux.send({ type: "publish", room: "mx-other", data: "no", id: "p2" });
    await mux.waitFor((s) => s.of("published").length === 1 && s.of("error").length === 1);
    expect(mux.of("published")[0]).toMatchObject({ room: "mx-p", id: "p1", seq: 1 });
    expect(mux.of("error")[0]).toMatchObject({ room: "mx-other", code: "not_subscribed", id: "p2" });
    await mux.waitForMessages("mx-p", 1);
    mux.send({ type: "unsubscribe", room: "mx-p" });
    await mux.waitFor((s) => s.of("unsubscribed").length === 1);
    await publish(server.url, "mx-p", "after");
    await sleep(300);
    expect(mux.messages("mx-p")).toHaveLength(1);
    mux.close();
  });

  it("resumes every subscription from its own position after a reconnect, with no gap and no duplicate", async () => {
    const first = await MuxSocket.open(wsUrl());
    for (const room of ["mx-r1", "mx-r2"]) first.subscribe(room);
    await first.waitFor((s) => s.of("subscribed").length === 2);
    await publish(server.url, "mx-r1", 1);
    await publish(server.url, "mx-r2", 1);
    await first.waitForMessages("mx-r1", 1);
    await first.waitForMessages("mx-r2", 1);
    first.close();
    await first.closed;
    for (let i = 2; i <= 4; i++) await publish(server.url, "mx-r1", i);
    await publish(server.url, "mx-r2", 2);
    const second = await MuxSocket.open(wsUrl());
    first.resumeAll(second);
    await second.waitForMessages("mx-r1", 3);
    await second.waitForMessages("mx-r2", 1);
    expect(second.messages("mx-r1").map((m) => m.data)).toEqual([2, 3, 4]);
    expect(second.messages("mx-r2").map((m) => m.data)).toEqual([2]);
    second.close();
  });

  it("shares presence with the room's own sockets: a member is one member however it is connected", async () => {
    const room = "mx-presence";
    const plain = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?member=ann`);
    const mux = await MuxSocket.open(`${wsUrl()}?member=bob`);
    mux.subscribe(room);
    await mux.waitFor((s) => s.of("presence", room).some((e) => e.count === 2), 10_000, "two members");
    await plain.waitFor((s) => s.presence.some((e) => e.action === "join" && e.member.id === "bob"), 10_000, "bob joins");
    mux.close();
    await plain.waitFor((s) => s.presence.some((e) => e.action === "leave" && e.member.id === "bob"), 15_000, "bob leaves");
    plain.close();
  });
});
