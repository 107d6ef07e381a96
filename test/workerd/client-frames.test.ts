/**
 * What a socket's frames do (engine/client-frames.ts), through a real
 * Delivery and real sockets: each socket is a WebSocketPair, the test reads
 * its client end. The object around ClientFrames (FrameHost: where publishes
 * go, the application's hooks) is the test's own, so every answer a client
 * gets can be traced to the rule in docs/protocol.md that gives it.
 */
import { describe, expect, it } from "vitest";
import { CloseCode, type PublishedEvent, type ServerError } from "../../protocol";
import { ACTIVITY_PERSIST_MS, type SocketAttachment } from "../../durable-objects/engine/attachment";
import { ClientFrames, type FrameHost, type FrameLimits } from "../../durable-objects/engine/client-frames";
import type { Cursor } from "../../durable-objects/engine/cursor";
import { NO_FRAME_HOOKS, type FrameHooks } from "../../durable-objects/engine/frame-hooks";
import type { PublishOutcome } from "../../durable-objects/engine/publish-outcome";
import type { SocketState } from "../../durable-objects/engine/socket-state";
import { HookRunner, type RoomHookSet } from "../../durable-objects/room/hook-runner";
import { attachmentOf, DeliveryRig, type CloseSeen, type Peer } from "../helpers/workerd/sockets";

/** The object ClientFrames runs in: publishes are numbered in arrival order unless `outcome` says otherwise. */
class RecordingHost implements FrameHost {
  hooks: FrameHooks = NO_FRAME_HOOKS;
  readonly published: string[] = [];
  readonly persisted: SocketAttachment[] = [];
  outcome: (dataJson: string) => Promise<PublishOutcome> = async () => ({ seq: this.published.length, recipients: 1, duplicate: false });

  async publishFrom(_cursor: Cursor, dataJson: string): Promise<PublishOutcome> {
    this.published.push(dataJson);
    return this.outcome(dataJson);
  }

  persistAttachment(socket: SocketState): void {
    this.persisted.push({ ...socket.attachment });
  }

  name(): string {
    return "client-frames";
  }
}

const LIMITS: FrameLimits = { maxFrameBytes: 2048, maxMessageBytes: 512, rate: { perSecond: 1, burst: 100 } };

/** One socket in a room, and ClientFrames with `limits` in front of it. */
function setup(limits: Partial<FrameLimits> = {}, attachment: SocketAttachment = attachmentOf()) {
  const rig = new DeliveryRig();
  const host = new RecordingHost();
  const frames = new ClientFrames(rig.delivery, rig.counters, { ...LIMITS, ...limits }, host);
  const { socket, peer } = rig.connect(attachment);
  return {
    rig,
    host,
    frames,
    socket,
    peer,
    /** Hands ClientFrames one frame from the socket, as the runtime's webSocketMessage does. */
    send: (frame: unknown) => frames.handle(socket, typeof frame === "string" || frame instanceof ArrayBuffer ? frame : JSON.stringify(frame)),
    /** Whether the object still holds the socket. */
    open: () => rig.delivery.get(socket.ws) === socket,
  };
}

/** How the client end saw the socket close. */
const closeOf = (peer: Peer): Promise<CloseSeen> => peer.closing();

/** The `error` events of the client end, once it has `count`. */
async function errorsOf(peer: Peer, count: number): Promise<ServerError[]> {
  await peer.waitFor((p) => p.of("error").length >= count, `${count} error event(s)`);
  return peer.of("error");
}

/** The `published` answers of the client end, once it has `count`. */
async function answersOf(peer: Peer, count: number): Promise<PublishedEvent[]> {
  await peer.waitFor((p) => p.of("published").length >= count, `${count} published answer(s)`);
  return peer.of("published");
}

describe("acks", () => {
  it("releases the window for an ack naming a frame's last message and its tag, without spending a frame token", async () => {
    // One token: any frame that costs one beyond the first publish closes the socket.
    const t = setup({ rate: { perSecond: 1, burst: 1 } });
    for (let i = 0; i < 5; i++) {
      const { message, sentTo } = t.rig.publish({ i });
      expect(sentTo).toBe(1);
      expect(t.socket.window.inFlight).toBe(message.bytes);
      await t.send({ type: "ack", seq: message.seq, tag: message.tag });
      expect(t.socket.window.inFlight).toBe(0);
    }
    expect(t.rig.released).toHaveLength(5);
    expect(t.open()).toBe(true);
    // The token is still there for a publish; the next costly frame is over the rate.
    await t.send({ type: "publish", data: "spent", id: "p1" });
    await answersOf(t.peer, 1);
    await t.send({ type: "publish", data: "over", id: "p2" });
    expect((await closeOf(t.peer)).code).toBe(CloseCode.RATE_LIMITED);
    expect(t.host.published).toEqual(['"spent"']);
  });

  it("takes a token for an ack that releases nothing, and closes with 4009 past the burst", async () => {
    const t = setup({ rate: { perSecond: 1, burst: 3 } });
    const { message } = t.rig.publish("x");
    await t.send({ type: "ack", seq: message.seq, tag: message.tag });
    // Acknowledged already (twice), and a seq from before any frame: stale, not lies.
    await t.send({ type: "ack", seq: message.seq, tag: message.tag });
    await t.send({ type: "ack", seq: message.seq, tag: message.tag });
    await t.send({ type: "ack", seq: 0, tag: 12345 });
    expect(t.open()).toBe(true);
    await t.send({ type: "ack", seq: message.seq, tag: message.tag });
    expect(t.open()).toBe(false);
    expect(await closeOf(t.peer)).toEqual({ code: CloseCode.RATE_LIMITED, reason: "over 1 frames per second" });
    expect(t.rig.counters.values.refusals).toEqual({ rate_limited: 1 });
    expect(t.rig.left.map((l) => l.cause)).toEqual([{ code: CloseCode.RATE_LIMITED, reason: "over 1 frames per second", by: "room" }]);
  });

  it("counts stale acks and publishes against the same bucket", async () => {
    const t = setup({ rate: { perSecond: 1, burst: 2 } });
    await t.send({ type: "ack", seq: 0, tag: 1 });
    await t.send({ type: "publish", data: 1 });
    expect(t.open()).toBe(true);
    await t.send({ type: "publish", data: 2 });
    expect((await closeOf(t.peer)).code).toBe(CloseCode.RATE_LIMITED);
    expect(t.host.published).toEqual(["1"]);
  });

  it("closes with 4000 for an ack of a message the socket was never sent", async () => {
    const t = setup();
    const { message } = t.rig.publish("x");
    await t.send({ type: "ack", seq: message.seq + 1, tag: message.tag });
    expect(await closeOf(t.peer)).toEqual({ code: CloseCode.BAD_FRAME, reason: "ack for a message this socket was not sent, or with the wrong tag" });
    expect(t.rig.counters.values.refusals).toEqual({ bad_ack: 1 });
  });

  it("closes with 4000 for an ack with the wrong tag, and releases nothing", async () => {
    const t = setup();
    const { message } = t.rig.publish("x");
    await t.send({ type: "ack", seq: message.seq, tag: (message.tag + 1) % 2 ** 32 });
    expect(t.socket.window.inFlight).toBe(message.bytes);
    expect((await closeOf(t.peer)).code).toBe(CloseCode.BAD_FRAME);
    expect(t.rig.counters.values.refusals).toEqual({ bad_ack: 1 });
  });

  it("takes an ack naming a message inside a frame as stale whatever its tag: only a frame's last tag is kept, and it releases nothing", async () => {
    const t = setup({ rate: { perSecond: 1, burst: 2 } });
    const { messages, frame } = t.rig.publishTogether(["a", "b", "c"]);
    expect(frame.lastSeq).toBe(3);
    const inner = messages[1]!;
    await t.send({ type: "ack", seq: inner.seq, tag: inner.tag });
    await t.send({ type: "ack", seq: inner.seq, tag: (inner.tag + 1) % 2 ** 32 });
    expect(t.open()).toBe(true);
    expect(t.socket.window.inFlight).toBe(frame.bytes);
    expect(t.rig.counters.values.refusals).toEqual({});
    // Each cost a token: the third costly frame is over the burst.
    await t.send({ type: "ack", seq: inner.seq, tag: 7 });
    expect((await closeOf(t.peer)).code).toBe(CloseCode.RATE_LIMITED);
  });
});

describe("publishes", () => {
  it("publishes through the host and answers `published` with the id and seq", async () => {
    const t = setup();
    await t.send({ type: "publish", data: { hello: "world" }, id: "a" });
    await t.send({ type: "publish", data: [1, 2] });
    expect(t.host.published).toEqual(['{"hello":"world"}', "[1,2]"]);
    expect(await answersOf(t.peer, 2)).toEqual([
      { type: "published", id: "a", seq: 1 },
      { type: "published", seq: 2 },
    ]);
  });

  it("refuses data over MAX_MESSAGE_BYTES as UTF-8 JSON with `too_large` and its id, and the socket stays", async () => {
    const t = setup({ maxMessageBytes: 100 });
    // 98 characters in quotes: exactly the limit.
    await t.send({ type: "publish", data: "x".repeat(98), id: "fits" });
    // 52 characters, 102 bytes: over the limit in UTF-8 though not in UTF-16.
    await t.send({ type: "publish", data: "é".repeat(50), id: "accented" });
    await t.send({ type: "publish", data: "x".repeat(200), id: "big" });
    const errors = await errorsOf(t.peer, 2);
    expect(errors.map((e) => [e.code, e.id])).toEqual([
      ["too_large", "accented"],
      ["too_large", "big"],
    ]);
    expect(errors[1]?.message).toBe("the message is 202 bytes as JSON, over the limit of 100");
    expect(t.host.published).toHaveLength(1);
    expect(t.open()).toBe(true);
    await t.send({ type: "publish", data: "small", id: "after" });
    expect((await answersOf(t.peer, 2)).map((p) => p.id)).toEqual(["fits", "after"]);
    expect(t.rig.counters.values.refusals).toEqual({ too_large: 2 });
  });

  it("answers a listen-only socket's publish with `forbidden` and keeps the socket", async () => {
    const t = setup({}, attachmentOf({ canPublish: false }));
    await t.send({ type: "publish", data: "no", id: "p" });
    const [error] = await errorsOf(t.peer, 1);
    expect(error).toEqual({ type: "error", code: "forbidden", message: "this socket may not publish", id: "p" });
    expect(t.host.published).toEqual([]);
    // It still reads and acknowledges.
    const { message } = t.rig.publish("for you");
    await t.send({ type: "ack", seq: message.seq, tag: message.tag });
    expect(t.socket.window.inFlight).toBe(0);
    expect(t.open()).toBe(true);
  });

  it("passes on a refusal from the room's publish path, and answers `internal` when it fails, keeping the socket", async () => {
    const t = setup();
    t.host.outcome = async () => ({ refused: { error: "forbidden", message: "not in this room" } });
    await t.send({ type: "publish", data: 1, id: "r" });
    t.host.outcome = async () => {
      throw new Error("storage is gone");
    };
    await t.send({ type: "publish", data: 2, id: "f" });
    expect(await errorsOf(t.peer, 2)).toEqual([
      { type: "error", code: "forbidden", message: "not in this room", id: "r" },
      { type: "error", code: "internal", message: "the message could not be stored", id: "f" },
    ]);
    expect(t.open()).toBe(true);
  });
});

describe("frames that are not protocol", () => {
  it("closes with 1009 for a frame over MAX_FRAME_BYTES, counted in UTF-8, and takes one of exactly the limit", async () => {
    const limit = 300;
    const envelope = (data: string) => JSON.stringify({ type: "publish", data });
    const exact = envelope("x".repeat(limit - envelope("").length));
    expect(exact.length).toBe(limit);
    const t = setup({ maxFrameBytes: limit, maxMessageBytes: limit });
    await t.send(exact);
    expect(t.host.published).toHaveLength(1);
    expect(t.open()).toBe(true);

    // Short in UTF-16 (the quick length check passes it), over the limit in UTF-8.
    const emoji = envelope("😀".repeat(70));
    expect(emoji.length).toBeLessThanOrEqual(limit);
    const u = setup({ maxFrameBytes: limit, maxMessageBytes: limit });
    await u.send(emoji);
    expect(await closeOf(u.peer)).toEqual({ code: CloseCode.MESSAGE_TOO_BIG, reason: `frame over ${limit} bytes` });
    expect(u.host.published).toEqual([]);
    expect(u.rig.counters.values.refusals).toEqual({ too_big: 1 });

    const v = setup({ maxFrameBytes: limit, maxMessageBytes: limit });
    await v.send(`${exact} `);
    expect((await closeOf(v.peer)).code).toBe(CloseCode.MESSAGE_TOO_BIG);
  });

  it("closes with 4000 for binary, malformed and unknown frames, and for a custom frame in a room without the hook", async () => {
    const cases: Array<[frame: string | ArrayBuffer, reason: string]> = [
      [new TextEncoder().encode('{"type":"publish","data":1}').buffer as ArrayBuffer, "binary frames are not supported"],
      ["{oops", "frame is not JSON"],
      ["[1,2]", "frame must be a JSON object"],
      ['{"type":"subscribe","room":"x"}', 'unknown frame type "subscribe"'],
      ['{"type":"ack","seq":1,"tag":-1}', "ack.tag must be the tag of the message named by seq"],
      ['{"type":"publish"}', "publish.data is required"],
      ['{"type":"x-typing","id":"t"}', 'unknown frame type "x-typing"'],
    ];
    for (const [frame, reason] of cases) {
      const t = setup();
      await t.send(frame);
      expect(await closeOf(t.peer)).toEqual({ code: CloseCode.BAD_FRAME, reason });
      expect(t.open()).toBe(false);
      expect(t.host.published).toEqual([]);
      expect(t.rig.counters.values.refusals).toEqual({ bad_frame: 1 });
    }
  });

  it("answers a heartbeat that reaches it with `pong`", async () => {
    const t = setup({ rate: { perSecond: 1, burst: 1 } });
    for (let i = 0; i < 3; i++) await t.send("ping");
    await t.peer.waitFor((p) => p.frames.length === 3);
    expect(t.peer.frames).toEqual(["pong", "pong", "pong"]);
    // Heartbeats are free: the one token is still there.
    await t.send({ type: "publish", data: 1 });
    expect(t.open()).toBe(true);
  });
});

describe("the socket's token and activity", () => {
  it("closes with 4001 at the first frame after the token expired", async () => {
    const live = setup({}, attachmentOf({ expiresAt: Date.now() + 60_000 }));
    await live.send({ type: "publish", data: 1 });
    expect(live.open()).toBe(true);

    const t = setup({}, attachmentOf({ expiresAt: Date.now() - 1 }));
    await t.send("ping");
    expect(await closeOf(t.peer)).toEqual({ code: CloseCode.UNAUTHORIZED, reason: "token expired" });
    expect(t.rig.counters.values.refusals).toEqual({ token_expired: 1 });
    expect(t.peer.frames).toEqual([]);
  });

  it("rewrites the attachment's activity time at most every ACTIVITY_PERSIST_MS", async () => {
    const connectedAt = Date.now() - ACTIVITY_PERSIST_MS - 1;
    const t = setup({}, attachmentOf({ connectedAt }));
    const before = Date.now();
    await t.send("ping");
    await t.send("ping");
    expect(t.host.persisted).toHaveLength(1);
    expect(t.host.persisted[0]?.activeAt).toBeGreaterThanOrEqual(before);
    expect(t.socket.lastActivity).toBeGreaterThanOrEqual(before);
  });
});

describe("frames through the room's hooks", () => {
  function hooked(hooks: RoomHookSet, limits: Partial<FrameLimits> = {}) {
    const t = setup(limits);
    t.host.hooks = new HookRunner(hooks, { delivery: t.rig.delivery, roomName: () => "rig", maxEventBytes: 1024 }, { maxMessageBytes: 512, count: () => {} });
    return t;
  }

  it("hands a custom frame to onClientFrame, at the cost of a token, and answers `internal` with its id when the hook fails", async () => {
    const seen: string[] = [];
    const t = hooked(
      {
        onClientFrame: (connection, frame) => {
          if (frame.type === "x-fail") throw new Error("broken hook");
          seen.push(frame.type);
          connection.send({ type: "x-echo", of: frame.type });
        },
      },
      { rate: { perSecond: 1, burst: 3 } },
    );
    await t.send({ type: "x-typing" });
    await t.send({ type: "x-fail", id: "f1" });
    expect(seen).toEqual(["x-typing"]);
    expect(await errorsOf(t.peer, 1)).toEqual([{ type: "error", code: "internal", message: "the room could not handle x-fail", id: "f1" }]);
    // Sent before the error, so it arrived first.
    expect(t.peer.events.filter((e) => e.type === "x-echo")).toEqual([{ type: "x-echo", of: "x-typing" }]);
    await t.send({ type: "x-typing" });
    expect(t.open()).toBe(true);
    await t.send({ type: "x-typing" });
    expect((await closeOf(t.peer)).code).toBe(CloseCode.RATE_LIMITED);
  });

  it("answers a publish that beforePublish refuses with the hook's code and text, and publishes what it transforms", async () => {
    const t = hooked({
      beforePublish: ({ data }) => (data === "bad" ? { refuse: "no bad words", code: "forbidden" } : { data: { wrapped: data } }),
    });
    await t.send({ type: "publish", data: "bad", id: "b" });
    await t.send({ type: "publish", data: "good", id: "g" });
    expect(await errorsOf(t.peer, 1)).toEqual([{ type: "error", code: "forbidden", message: "no bad words", id: "b" }]);
    expect(t.host.published).toEqual(['{"wrapped":"good"}']);
    expect(await answersOf(t.peer, 1)).toEqual([{ type: "published", id: "g", seq: 1 }]);
  });
});
