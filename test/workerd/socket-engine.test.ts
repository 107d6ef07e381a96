/**
 * The socket engine (engine/socket-engine.ts) on a real object's state:
 * accepting a socket (its welcome, a resume from `since`, a `lost` for a
 * history that is not the room's, a rewind) and restoring the sockets the
 * runtime hands back when the object wakes (cursors where the object says
 * they stood, presence rebuilt from the attachments, nobody told). Sockets
 * are accepted with the Hibernation API; the test reads their client ends.
 */
import { describe, expect, it } from "vitest";
import type { ServerEvent } from "../../protocol";
import type { SocketAttachment } from "../../durable-objects/engine/attachment";
import { ackOfAll, EngineRig, inObject, resumeOf } from "../helpers/workerd/engine";
import { attachmentOf, MemorySource, SETTLED, type Peer } from "../helpers/workerd/sockets";
import { sleep } from "../helpers/wait";

const EPOCH = "epoch-1";

/** A room of `count` messages on the rig's engine. */
function roomOf(rig: EngineRig, count: number, name = "engine") {
  const source = new MemorySource();
  source.add(count);
  return { source, stream: rig.engine.openStream(name, source) };
}

/** What a socket was told, in order: `[type, ...]` with seqs, lost ranges and presence counts. */
function story(peer: Peer): (string | number)[][] {
  return peer.events.filter((e) => e.type !== SETTLED).map((e: ServerEvent) => {
    if (e.type === "message") return ["message", e.seq];
    if (e.type === "lost") return ["lost", e.reason, e.from, e.to];
    if (e.type === "welcome") return ["welcome", e.seq];
    if (e.type === "presence") return ["presence", e.action, e.count];
    return [e.type];
  });
}

const member = (id: string): Partial<SocketAttachment> => ({ member: { id, verified: true } });

describe("accepting a socket", () => {
  it("welcomes it at the room's present with its limits, gives it the room's presence, holds it and arms the sweep", async () => {
    await inObject(async (state) => {
      const rig = new EngineRig(state);
      const { source, stream } = roomOf(rig, 5);
      const attachment = attachmentOf(member("ann"));
      const { peer } = await rig.accept(stream, resumeOf(), attachment);
      await peer.waitFor((p) => p.events.length === 2);
      expect(peer.events[0]).toEqual({
        type: "welcome",
        room: "engine",
        seq: 5,
        epoch: EPOCH,
        window: rig.limits.WINDOW_BYTES,
        rate: { perSecond: rig.limits.CLIENT_FRAMES_PER_SECOND, burst: rig.limits.CLIENT_FRAME_BURST },
        maxMessageBytes: rig.limits.MAX_MESSAGE_BYTES,
      });
      expect(peer.events[1]).toMatchObject({ type: "presence", action: "sync", count: 1, members: [{ id: "ann" }] });
      expect([rig.engine.size, rig.occupancy]).toEqual([1, [1]]);
      // Accepted with the Hibernation API, its attachment written where a woken object finds it.
      expect(rig.serverEnds().map((ws) => ws.deserializeAttachment())).toEqual([attachment]);
      const alarm = await state.storage.getAlarm();
      expect(alarm).toBeGreaterThan(Date.now() + rig.limits.IDLE_TIMEOUT_SECONDS * 1000 - 5000);
      // Level: the next message comes live.
      rig.publish(stream, source);
      await peer.waitFor((p) => p.of("message").length === 1);
      expect(story(peer).slice(2)).toEqual([["message", 6]]);
    });
  });

  it("resumes a socket from since: the presence picture, then every message after it in order, then live", async () => {
    await inObject(async (state) => {
      const rig = new EngineRig(state);
      const { source, stream } = roomOf(rig, 5);
      const { peer } = await rig.accept(stream, resumeOf({ since: 2, epoch: EPOCH }));
      await peer.waitFor((p) => p.of("message").length === 3);
      rig.publish(stream, source);
      await peer.waitFor((p) => p.of("message").length === 4);
      expect(story(peer)).toEqual([["welcome", 5], ["presence", "sync", 0], ["message", 3], ["message", 4], ["message", 5], ["message", 6]]);
    });
  });

  it("resumes a socket that names no epoch (an older client) in the room's history", async () => {
    await inObject(async (state) => {
      const rig = new EngineRig(state);
      const { stream } = roomOf(rig, 5);
      const { peer } = await rig.accept(stream, resumeOf({ since: 3 }));
      await peer.waitFor((p) => p.of("message").length === 2);
      expect(story(peer)).toEqual([["welcome", 5], ["presence", "sync", 0], ["message", 4], ["message", 5]]);
    });
  });

  it("tells a socket of another history, or from the future, that it lost everything, and starts it at the present", async () => {
    await inObject(async (state) => {
      const rig = new EngineRig(state);
      const { source, stream } = roomOf(rig, 5);
      const foreign = await rig.accept(stream, resumeOf({ since: 3, epoch: "epoch-0" }));
      const ahead = await rig.accept(stream, resumeOf({ since: 9, epoch: EPOCH }));
      await rig.settled(foreign, ahead);
      rig.publish(stream, source);
      for (const { peer } of [foreign, ahead]) {
        await peer.waitFor((p) => p.of("message").length === 1);
        expect(story(peer)).toEqual([["welcome", 5], ["lost", "epoch", 1, 5], ["presence", "sync", 0], ["message", 6]]);
      }
    });
  });

  it("tells a resuming socket which messages the room's history no longer holds, then sends the rest", async () => {
    await inObject(async (state) => {
      const rig = new EngineRig(state);
      const { source, stream } = roomOf(rig, 5);
      source.forget(3);
      const { peer } = await rig.accept(stream, resumeOf({ since: 1, epoch: EPOCH }));
      await peer.waitFor((p) => p.of("message").length === 2);
      expect(story(peer)).toEqual([["welcome", 5], ["presence", "sync", 0], ["lost", "history", 2, 3], ["message", 4], ["message", 5]]);
    });
  });

  it("rewinds a new socket N messages: welcomed where they start, then those messages, never further back than the room holds", async () => {
    await inObject(async (state) => {
      const rig = new EngineRig(state);
      const { source, stream } = roomOf(rig, 8);
      source.forget(2);
      const two = await rig.accept(stream, resumeOf({ rewind: 2 }));
      const all = await rig.accept(stream, resumeOf({ rewind: 100 }));
      const none = await rig.accept(stream, resumeOf({ rewind: 0 }));
      // A resume knows where it is: the rewind beside it is ignored.
      const resumed = await rig.accept(stream, resumeOf({ since: 7, epoch: EPOCH, rewind: 5 }));
      await two.peer.waitFor((p) => p.of("message").length === 2);
      await all.peer.waitFor((p) => p.of("message").length === 6);
      await rig.settled(two, all, none, resumed);
      expect(story(two.peer)).toEqual([["welcome", 6], ["presence", "sync", 0], ["message", 7], ["message", 8]]);
      expect(story(all.peer)).toEqual([["welcome", 2], ["presence", "sync", 0], ...[3, 4, 5, 6, 7, 8].map((seq) => ["message", seq])]);
      expect(story(none.peer)).toEqual([["welcome", 8], ["presence", "sync", 0]]);
      expect(story(resumed.peer)).toEqual([["welcome", 8], ["presence", "sync", 0], ["message", 8]]);
    });
  });

  it("sends a resume larger than the socket's window as its acks make room", async () => {
    await inObject(async (state) => {
      // One message per frame; a window of about two of them.
      const rig = new EngineRig(state, { BATCH_MAX_EVENTS: 1, WINDOW_BYTES: 120 });
      const { stream } = roomOf(rig, 10);
      const accepted = await rig.accept(stream, resumeOf({ since: 0, epoch: EPOCH }));
      await rig.settled(accepted);
      const first = accepted.peer.of("message").length;
      expect(first).toBeGreaterThan(0);
      expect(first).toBeLessThan(10);
      for (let round = 0; round < 10 && accepted.peer.of("message").length < 10; round++) {
        const ack = ackOfAll(accepted.peer);
        if (ack) await rig.frame(accepted.socket, ack);
        await rig.settled(accepted);
      }
      expect(accepted.peer.of("message").map((m) => m.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    });
  });
});

describe("restoring sockets after a wake", () => {
  it("rebuilds each socket's cursor where the object says it stood and the room's presence from the attachments, telling nobody", async () => {
    await inObject(async (state) => {
      const before = new EngineRig(state);
      const { source, stream } = roomOf(before, 5);
      const ann = await before.accept(stream, resumeOf(), attachmentOf(member("ann")));
      const bob = await before.accept(stream, resumeOf(), attachmentOf(member("bob")));
      const anon = await before.accept(stream, resumeOf());
      await before.settled(ann, bob, anon);
      const seen = [ann, bob, anon].map(({ peer }) => peer.frames.length);

      // The object wakes: a new engine on the same state, its room's stream over the same messages.
      const after = new EngineRig(state);
      const woken = after.engine.openStream("engine", source);
      const placed: SocketAttachment[] = [];
      const restored = after.engine.restore((attachment) => {
        placed.push(attachment);
        return [{ stream: woken, seq: 5 }];
      });
      expect(restored).toHaveLength(3);
      expect(placed.map((a) => a.id).sort()).toEqual([ann, bob, anon].map(({ socket }) => socket.attachment.id).sort());
      expect([after.engine.size, after.occupancy]).toEqual([3, [1]]);
      const presence = after.engine.presence(woken);
      expect([presence.count, presence.has("ann"), presence.has("bob")]).toEqual([2, true, true]);
      for (const socket of restored) expect(after.engine.cursorOf(woken, socket.ws)?.sentSeq).toBe(5);

      // Nobody was told anything; the next message reaches every restored socket live.
      await sleep(20);
      expect([ann, bob, anon].map(({ peer }) => peer.frames.length)).toEqual(seen);
      after.publish(woken, source);
      for (const { peer } of [ann, bob, anon]) await peer.waitFor((p) => p.of("message").some((m) => m.seq === 6));
      // A socket that arrives now is shown the members the woken object rebuilt.
      const cy = await after.accept(woken, resumeOf(), attachmentOf(member("cy")));
      await cy.peer.waitFor((p) => p.of("presence").length > 0);
      expect(cy.peer.of("presence")[0]).toMatchObject({ action: "sync", count: 3 });
      await ann.peer.waitFor((p) => p.of("presence").some((e) => e.action === "join"));
      expect(ann.peer.of("presence").at(-1)).toMatchObject({ action: "join", count: 3, member: { id: "cy" } });
    });
  });

  it("catches a restored socket up from where the object says it stood", async () => {
    await inObject(async (state) => {
      const before = new EngineRig(state);
      const { source, stream } = roomOf(before, 3);
      const accepted = await before.accept(stream);
      await before.settled(accepted);
      source.add(2);
      const after = new EngineRig(state);
      const woken = after.engine.openStream("engine", source);
      after.engine.restore(() => [{ stream: woken, seq: 3 }]);
      await accepted.peer.waitFor((p) => p.of("message").length === 2);
      expect(story(accepted.peer)).toEqual([["welcome", 3], ["presence", "sync", 0], ["message", 4], ["message", 5]]);
    });
  });

  it("leaves out a socket the object places nowhere, and one still closing (its peer never answered the close)", async () => {
    await inObject(async (state) => {
      const before = new EngineRig(state);
      const { source, stream } = roomOf(before, 1);
      const kept = await before.accept(stream);
      const unplaced = await before.accept(stream);
      // A client that reads nothing, so it never answers the close.
      const stalled = attachmentOf();
      await before.engine.accept(stream, { attachment: stalled, resume: resumeOf(), epoch: EPOCH });
      const server = before.serverEnds().find((ws) => (ws.deserializeAttachment() as SocketAttachment).id === stalled.id) as WebSocket;
      before.engine.delivery.close(server, 1000, "bye");
      expect(before.serverEnds()).toHaveLength(3);
      const after = new EngineRig(state);
      const woken = after.engine.openStream("engine", source);
      const restored = after.engine.restore((attachment) => (attachment.id === unplaced.socket.attachment.id ? null : [{ stream: woken, seq: 1 }]));
      expect(restored.map((s) => s.attachment.id)).toEqual([kept.socket.attachment.id]);
      expect(after.engine.size).toBe(1);
    });
  });
});
