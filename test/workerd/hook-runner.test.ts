/**
 * The contract between a room and its application's hooks
 * (room/hooks/hook-runner.ts): whatever a hook answers, throws or takes its time
 * over, the room acts only on answers it checked, counts what went wrong,
 * and keeps a socket's frames in order. Hooks are plain functions here, some
 * of them breaking their typed contract on purpose, as JavaScript can.
 */
import { describe, expect, it } from "vitest";
import { MAX_CONNECTION_DATA_BYTES, MAX_FRAMES_AWAITING_HOOKS } from "../../common/settings";
import { HookRunner, type RoomHookSet } from "../../durable-objects/room/hooks/hook-runner";
import type { CloseInfo, ConnectRequest, PublishRequest } from "../../durable-objects/room/hooks/hooks";
import { attachmentOf, DeliveryRig } from "../helpers/workerd/sockets";
import { sleep } from "../helpers/wait";

const MAX_MESSAGE_BYTES = 100;

type Counted = "connect_refused" | "publish_refused" | "hook_error";

function runner(hooks: RoomHookSet) {
  const rig = new DeliveryRig();
  const counted: Counted[] = [];
  const hookRunner = new HookRunner(hooks, { delivery: rig.delivery, roomName: () => "hooked", maxEventBytes: 1024 }, {
    maxMessageBytes: MAX_MESSAGE_BYTES,
    count: (reason) => {
      counted.push(reason);
    },
  });
  return { rig, counted, hooks: hookRunner };
}

/** A hook as JavaScript may write it, outside its typed contract. */
const untyped = <T>(hook: (...args: never[]) => unknown): T => hook as unknown as T;

const connectRequest = (): ConnectRequest => ({
  id: "socket-1",
  room: "hooked",
  member: null,
  canPublish: true,
  request: new Request("http://edge.test/rooms/hooked/ws"),
});

/** A promise and the function that settles it. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

describe("what the runner tells the room about the hooks", () => {
  it("reports only the hooks a room overrides", () => {
    const none = runner({}).hooks;
    expect([none.checksPublishes, none.handlesClientFrames, none.ordersFrames, none.admitsSockets, none.watchesCloses]).toEqual([false, false, false, false, false]);
    const publishes = runner({ beforePublish: () => undefined }).hooks;
    expect([publishes.checksPublishes, publishes.handlesClientFrames, publishes.ordersFrames]).toEqual([true, false, true]);
    const frames = runner({ onClientFrame: () => undefined }).hooks;
    expect([frames.checksPublishes, frames.handlesClientFrames, frames.ordersFrames]).toEqual([false, true, true]);
    const lifecycle = runner({ onConnect: () => undefined, onClose: () => undefined }).hooks;
    expect([lifecycle.admitsSockets, lifecycle.watchesCloses, lifecycle.ordersFrames]).toEqual([true, true, false]);
  });
});

describe("onConnect", () => {
  it("admits as is without the hook, or when it answers nothing", async () => {
    expect(await runner({}).hooks.connect(connectRequest())).toEqual({ ok: true, data: undefined, canPublish: undefined });
    const nothing = runner({ onConnect: () => undefined });
    expect(await nothing.hooks.connect(connectRequest())).toEqual({ ok: true, data: undefined, canPublish: undefined });
    const nulled = runner({ onConnect: untyped(() => null) });
    expect(await nulled.hooks.connect(connectRequest())).toEqual({ ok: true, data: undefined, canPublish: undefined });
    expect(nothing.counted).toEqual([]);
  });

  it("attaches data as JSON brings it back, frozen, and narrows canPublish", async () => {
    const at = new Date(0);
    const t = runner({ onConnect: untyped(() => ({ data: { role: "viewer", at, skip: undefined }, canPublish: false })) });
    const outcome = await t.hooks.connect(connectRequest());
    expect(outcome).toEqual({ ok: true, data: { role: "viewer", at: at.toISOString() }, canPublish: false });
    if (!outcome.ok) throw new Error("admitted above");
    expect(Object.isFrozen(outcome.data)).toBe(true);
    expect(t.counted).toEqual([]);
  });

  it("refuses with the hook's code and text, `forbidden` by default, and bounds the text", async () => {
    const answers: Array<[decision: unknown, code: string, message: string]> = [
      [{ refuse: "members only" }, "forbidden", "members only"],
      [{ refuse: "log in again", code: "unauthorized" }, "unauthorized", "log in again"],
      [{ refuse: "busy", code: "try_again_later" }, "try_again_later", "busy"],
      [{ refuse: "" }, "forbidden", "refused by the room"],
      [{ refuse: 42 }, "forbidden", "refused by the room"],
      [{ refuse: "x".repeat(600) }, "forbidden", `${"x".repeat(500)}…`],
    ];
    for (const [decision, code, message] of answers) {
      const t = runner({ onConnect: untyped(() => decision) });
      expect(await t.hooks.connect(connectRequest())).toEqual({ ok: false, code, message });
      expect(t.counted).toEqual(["connect_refused"]);
    }
  });

  it("answers `internal` and counts a hook error for every answer outside the contract, and for a throw", async () => {
    const broken: Array<() => unknown> = [
      () => "yes",
      () => 1,
      () => ({ refuse: "no", code: "bad_request" }),
      () => ({ refuse: "no", code: 4003 }),
      () => ({ canPublish: "no" }),
      () => ({ data: ["not", "an", "object"] }),
      () => ({ data: "text" }),
      () => ({ data: { big: "x".repeat(MAX_CONNECTION_DATA_BYTES) } }),
      () => ({ data: { n: 1n } }),
      () => {
        throw new Error("onConnect broke");
      },
      () => Promise.reject(new Error("onConnect rejected")),
    ];
    for (const hook of broken) {
      const t = runner({ onConnect: untyped(hook) });
      expect(await t.hooks.connect(connectRequest())).toEqual({ ok: false, code: "internal", message: "the room could not admit the socket" });
      expect(t.counted).toEqual(["hook_error"]);
    }
  });

  it("takes data of exactly MAX_CONNECTION_DATA_BYTES as JSON", async () => {
    const fill = MAX_CONNECTION_DATA_BYTES - JSON.stringify({ k: "" }).length;
    const t = runner({ onConnect: () => ({ data: { k: "x".repeat(fill) } }) });
    expect(await t.hooks.connect(connectRequest())).toMatchObject({ ok: true });
  });
});

describe("beforePublish", () => {
  it("publishes the text as sent when there is no hook or it answers nothing, parsing data only when not given", async () => {
    const spaced = '{ "a" : 1 }';
    expect(await runner({}).hooks.checkPublish(spaced, undefined, { kind: "http" })).toEqual({ ok: true, dataJson: spaced });
    const seen: PublishRequest[] = [];
    const t = runner({
      beforePublish: (request) => {
        seen.push(request);
      },
    });
    expect(await t.hooks.checkPublish(spaced, undefined, { kind: "http" })).toEqual({ ok: true, dataJson: spaced });
    // A socket's publish hands the data it already parsed, and the connection it came from.
    const { socket } = t.rig.connect();
    const parsed = { already: "parsed" };
    expect(await t.hooks.checkPublish(spaced, parsed, { kind: "socket", socket })).toEqual({ ok: true, dataJson: spaced });
    expect(seen[0]).toMatchObject({ room: "hooked", data: { a: 1 }, source: { kind: "http" } });
    expect(seen[1]?.data).toBe(parsed);
    const source = seen[1]?.source;
    expect(source?.kind === "socket" && source.connection.id).toBe(socket.attachment.id);
    // An answer with neither data nor refuse publishes as sent too.
    const empty = runner({ beforePublish: untyped(() => ({})) });
    expect(await empty.hooks.checkPublish(spaced, undefined, { kind: "broadcast" })).toEqual({ ok: true, dataJson: spaced });
    expect([...t.counted, ...empty.counted]).toEqual([]);
  });

  it("publishes what the hook transforms, within MAX_MESSAGE_BYTES counted in UTF-8", async () => {
    const t = runner({ beforePublish: ({ data }) => ({ data: { wrapped: data } }) });
    expect(await t.hooks.checkPublish("1", undefined, { kind: "leaf" })).toEqual({ ok: true, dataJson: '{"wrapped":1}' });

    const exact = runner({ beforePublish: () => ({ data: "x".repeat(MAX_MESSAGE_BYTES - 2) }) });
    expect(await exact.hooks.checkPublish("1", undefined, { kind: "http" })).toEqual({ ok: true, dataJson: JSON.stringify("x".repeat(MAX_MESSAGE_BYTES - 2)) });

    // 52 characters, 102 bytes.
    const over = runner({ beforePublish: () => ({ data: "é".repeat(50) }) });
    expect(await over.hooks.checkPublish("1", undefined, { kind: "http" })).toEqual({
      ok: false,
      refusal: { error: "too_large", message: `the message as the room transformed it is 102 bytes as JSON, over ${MAX_MESSAGE_BYTES}` },
    });
    // A transform past the limit is the hook's refusal, not its error.
    expect(over.counted).toEqual(["publish_refused"]);
  });

  it("refuses with the hook's code and text, `bad_request` by default", async () => {
    const answers: Array<[decision: unknown, code: string, message: string]> = [
      [{ refuse: "spam" }, "bad_request", "spam"],
      [{ refuse: "muted", code: "forbidden" }, "forbidden", "muted"],
      [{ refuse: "slow down", code: "rate_limited" }, "rate_limited", "slow down"],
      [{ refuse: null }, "bad_request", "refused by the room"],
    ];
    for (const [decision, code, message] of answers) {
      const t = runner({ beforePublish: untyped(() => decision) });
      expect(await t.hooks.checkPublish("1", undefined, { kind: "http" })).toEqual({ ok: false, refusal: { error: code, message } });
      expect(t.counted).toEqual(["publish_refused"]);
    }
  });

  it("answers `internal` and counts a hook error for every answer outside the contract, and for a throw", async () => {
    const broken: Array<() => unknown> = [
      () => "publish it",
      () => true,
      // too_large and internal are the room's to give, not the hook's.
      () => ({ refuse: "no", code: "too_large" }),
      () => ({ refuse: "no", code: "internal" }),
      () => ({ data: undefined }),
      () => ({ data: () => 1 }),
      () => ({ data: { n: 1n } }),
      () => {
        throw new Error("beforePublish broke");
      },
      async () => {
        await sleep(1);
        throw new Error("beforePublish rejected");
      },
    ];
    for (const hook of broken) {
      const t = runner({ beforePublish: untyped(hook) });
      expect(await t.hooks.checkPublish("1", undefined, { kind: "http" })).toEqual({
        ok: false,
        refusal: { error: "internal", message: "the room could not check the message" },
      });
      expect(t.counted).toEqual(["hook_error"]);
    }
  });
});

describe("onClientFrame", () => {
  it("reports whether the hook handled the frame; a throw is counted", async () => {
    const frames: string[] = [];
    const t = runner({
      onClientFrame: (connection, frame) => {
        if (frame.type === "x-bad") throw new Error("onClientFrame broke");
        frames.push(`${connection.id}:${frame.type}`);
      },
    });
    const { socket } = t.rig.connect(attachmentOf({ id: "tab" }));
    expect(await t.hooks.clientFrame(socket, { type: "x-ok" })).toBe(true);
    expect(await t.hooks.clientFrame(socket, { type: "x-bad" })).toBe(false);
    expect(frames).toEqual(["tab:x-ok"]);
    expect(t.counted).toEqual(["hook_error"]);
    expect(await runner({}).hooks.clientFrame(socket, { type: "x-ok" })).toBe(false);
  });
});

describe("a socket's frames, in order", () => {
  it("handles one socket's frames one at a time in arrival order, however long each waits", async () => {
    const t = runner({ beforePublish: () => undefined });
    const { socket } = t.rig.connect();
    const log: string[] = [];
    const handling = (name: string, waitMs: number) => async () => {
      log.push(`start ${name}`);
      await sleep(waitMs);
      log.push(`end ${name}`);
    };
    const runs = [t.hooks.inOrder(socket, handling("a", 15)), t.hooks.inOrder(socket, handling("b", 0)), t.hooks.inOrder(socket, handling("c", 5))];
    await Promise.all(runs);
    expect(log).toEqual(["start a", "end a", "start b", "end b", "start c", "end c"]);
  });

  it("does not hold one socket's frames behind another's", async () => {
    const t = runner({ beforePublish: () => undefined });
    const { socket: slow } = t.rig.connect();
    const { socket: quick } = t.rig.connect();
    const held = gate();
    const log: string[] = [];
    const blocked = t.hooks.inOrder(slow, async () => {
      await held.opened;
      log.push("slow");
    });
    await t.hooks.inOrder(quick, async () => {
      log.push("quick");
    });
    expect(log).toEqual(["quick"]);
    held.open();
    await blocked;
    expect(log).toEqual(["quick", "slow"]);
  });

  it("goes on after a frame whose handling fails, which its caller alone sees", async () => {
    const t = runner({ beforePublish: () => undefined });
    const { socket } = t.rig.connect();
    const log: string[] = [];
    const failing = t.hooks.inOrder(socket, async () => {
      throw new Error("handling failed");
    });
    const next = t.hooks.inOrder(socket, async () => {
      log.push("next");
    });
    await expect(failing).rejects.toThrow("handling failed");
    await next;
    expect(log).toEqual(["next"]);
  });

  it(`keeps at most MAX_FRAMES_AWAITING_HOOKS (${MAX_FRAMES_AWAITING_HOOKS}) waiting, refusing more until they drain`, async () => {
    const t = runner({ beforePublish: () => undefined });
    const { socket } = t.rig.connect();
    const { socket: other } = t.rig.connect();
    const held = gate();
    let ran = 0;
    const handling = async () => {
      await held.opened;
      ran += 1;
    };
    const queued = Array.from({ length: MAX_FRAMES_AWAITING_HOOKS }, () => t.hooks.inOrder(socket, handling));
    expect(queued.every((q) => q !== null)).toBe(true);
    let refusedRan = false;
    expect(
      t.hooks.inOrder(socket, async () => {
        refusedRan = true;
      }),
    ).toBeNull();
    // Another socket has a queue of its own.
    expect(t.hooks.inOrder(other, async () => {})).not.toBeNull();
    held.open();
    await Promise.all(queued);
    expect(ran).toBe(MAX_FRAMES_AWAITING_HOOKS);
    expect(refusedRan).toBe(false);
    // Drained: the socket may queue again.
    const again = t.hooks.inOrder(socket, async () => {});
    expect(again).not.toBeNull();
    await again;
  });
});

describe("onClose", () => {
  const cause = { code: 4009, reason: "over 20 frames per second", by: "room" } as const;

  it("runs after the socket's waiting frames, with how it closed, on a connection that is no longer open", async () => {
    const closes: Array<{ info: CloseInfo; open: boolean; id: string }> = [];
    const t = runner({
      beforePublish: () => undefined,
      onClose: (connection, info) => {
        closes.push({ info, open: connection.open, id: connection.id });
      },
    });
    const { socket } = t.rig.connect(attachmentOf({ id: "leaving" }));
    const held = gate();
    const log: string[] = [];
    const frame = t.hooks.inOrder(socket, async () => {
      await held.opened;
      log.push("frame");
    });
    t.rig.delivery.close(socket.ws, cause.code, cause.reason);
    const closed = t.hooks.closed(socket, cause).then(() => log.push("onClose"));
    await sleep(5);
    expect(closes).toEqual([]);
    held.open();
    await Promise.all([frame, closed]);
    expect(log).toEqual(["frame", "onClose"]);
    expect(closes).toEqual([{ info: { code: 4009, reason: "over 20 frames per second", by: "room" }, open: false, id: "leaving" }]);
  });

  it("is never called inside its caller's turn, and a throw is counted, never thrown", async () => {
    let called = false;
    const t = runner({
      onClose: () => {
        called = true;
        throw new Error("onClose broke");
      },
    });
    const { socket } = t.rig.connect();
    const closing = t.hooks.closed(socket, cause);
    expect(called).toBe(false);
    await expect(closing).resolves.toBeUndefined();
    expect(called).toBe(true);
    expect(t.counted).toEqual(["hook_error"]);
  });
});
