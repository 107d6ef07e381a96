/**
 * The sweep of an object that holds sockets (engine/sweeper.ts), on a real
 * object's state: idle sockets closed with 4010 by the runtime's heartbeat
 * answers and the last frame (kept in the attachment across hibernation),
 * expired tokens closed with 4001, the alarm set for the earliest of the
 * next sweep and the object's own work, the alarm's round, and nudges for a
 * protocol whose clients only speak after a quiet while. Sockets are the
 * engine's (accepted with the Hibernation API); heartbeats are answered by
 * the runtime itself, as in production.
 */
import { describe, expect, it } from "vitest";
import { CloseCode } from "../../protocol";
import type { SocketAttachment } from "../../durable-objects/engine/attachment";
import { SERVICE_HEARTBEAT } from "../../durable-objects/engine/socket-engine";
import type { SocketState } from "../../durable-objects/engine/socket-state";
import { EngineRig, inObject, resumeOf, type Accepted } from "../helpers/workerd/engine";
import { attachmentOf, MemorySource } from "../helpers/workerd/sockets";
import { sleep } from "../helpers/wait";

const IDLE_S = 60;
const IDLE_MS = IDLE_S * 1000;

/** A rig whose sockets are reaped after IDLE_S; `connect` opens a socket that connected `agoMs` ago. */
function sweepRig(state: DurableObjectState, idleSeconds = IDLE_S, nudged?: SocketState[]) {
  const rig = new EngineRig(state, { IDLE_TIMEOUT_SECONDS: idleSeconds }, nudged ? { heartbeat: SERVICE_HEARTBEAT, nudge: (socket) => nudged.push(socket) } : undefined);
  const stream = rig.engine.openStream("swept", new MemorySource());
  const connect = (agoMs: number, fields: Partial<SocketAttachment> = {}): Promise<Accepted> =>
    rig.accept(stream, resumeOf(), attachmentOf({ connectedAt: Date.now() - agoMs, ...fields }));
  return { rig, connect };
}

/** Which of `sockets` are still open on the engine. */
const open = (rig: EngineRig, sockets: readonly Accepted[]) => sockets.map((s) => rig.engine.delivery.holds(s.socket));

/** The alarm the object has set, as ms from now (null: none). */
async function alarmIn(state: DurableObjectState): Promise<number | null> {
  const at = await state.storage.getAlarm();
  return at === null ? null : at - Date.now();
}

describe("idle sockets", () => {
  it("closes a socket silent for IDLE_TIMEOUT_SECONDS with 4010, counting the runtime's heartbeat answers and the last frame as signs of life", async () => {
    await inObject(async (state) => {
      const { rig, connect } = sweepRig(state);
      const long = IDLE_MS + 10_000;
      const pinger = await connect(long);
      const talker = await connect(long);
      // Its last frame was written into its attachment before the object slept.
      const sleeper = await connect(long, { activeAt: Date.now() - 10_000 });
      const silent = await connect(long);
      // The runtime answers the ping without the object: only its timestamp tells.
      pinger.peer.ws.send("ping");
      await pinger.peer.waitFor((p) => p.frames.includes("pong"), "the runtime's pong");
      await rig.frame(talker.socket, "ping");

      rig.engine.sweeper.sweep(Date.now());
      expect(open(rig, [pinger, talker, sleeper, silent])).toEqual([true, true, true, false]);
      expect(await silent.peer.closing()).toEqual({ code: CloseCode.IDLE_TIMEOUT, reason: "no heartbeat" });
      expect(rig.counters.snapshot().refusals).toEqual({ idle_timeout: 1 });

      // A timeout later, everyone is silent.
      rig.engine.sweeper.sweep(Date.now() + IDLE_MS + 1000);
      expect(open(rig, [pinger, talker, sleeper])).toEqual([false, false, false]);
      expect(rig.engine.size).toBe(0);
    });
  });

  it("leaves a socket alone for the whole timeout after it connected", async () => {
    await inObject(async (state) => {
      const { rig, connect } = sweepRig(state);
      const young = await connect(IDLE_MS - 5000);
      rig.engine.sweeper.sweep(Date.now());
      expect(open(rig, [young])).toEqual([true]);
      rig.engine.sweeper.sweep(Date.now() + 6000);
      expect(open(rig, [young])).toEqual([false]);
    });
  });

  it("never reaps with IDLE_TIMEOUT_SECONDS 0", async () => {
    await inObject(async (state) => {
      const { rig, connect } = sweepRig(state, 0);
      const ancient = await connect(365 * 86_400_000);
      rig.engine.sweeper.sweep(Date.now());
      expect(open(rig, [ancient])).toEqual([true]);
      // Nor does it keep an alarm for a sweep.
      expect(await alarmIn(state)).toBeNull();
    });
  });

  it("sweeps during flushes once half the timeout has passed since the last sweep, not before", async () => {
    await inObject(async (state) => {
      const { rig, connect } = sweepRig(state);
      const silent = await connect(IDLE_MS + 10_000);
      rig.engine.sweeper.maybeSweep(Date.now());
      expect(open(rig, [silent])).toEqual([true]);
      rig.engine.sweeper.maybeSweep(Date.now() + IDLE_MS / 2);
      expect(open(rig, [silent])).toEqual([false]);
    });
  });
});

describe("expired tokens", () => {
  it("closes a socket whose token expired with 4001, however lively it is", async () => {
    await inObject(async (state) => {
      const { rig, connect } = sweepRig(state);
      const expired = await connect(0, { expiresAt: Date.now() - 1, activeAt: Date.now() });
      const valid = await connect(0, { expiresAt: Date.now() + 60_000 });
      rig.engine.sweeper.sweep(Date.now());
      expect(open(rig, [expired, valid])).toEqual([false, true]);
      expect(await expired.peer.closing()).toEqual({ code: CloseCode.UNAUTHORIZED, reason: "token expired" });
      expect(rig.counters.snapshot().refusals).toEqual({ token_expired: 1 });
      rig.engine.sweeper.sweep(Date.now() + 60_000);
      expect(open(rig, [valid])).toEqual([false]);
    });
  });
});

describe("the alarm", () => {
  it("is set for the next sweep while the object holds sockets, or sooner for the object's own work, never later than one already set", async () => {
    await inObject(async (state) => {
      const { rig, connect } = sweepRig(state);
      await connect(0);
      const sweep = await alarmIn(state);
      expect(sweep).toBeGreaterThan(IDLE_MS - 2000);
      expect(sweep).toBeLessThanOrEqual(IDLE_MS);
      rig.workAt = Date.now() + 5000;
      await rig.engine.sweeper.ensureAlarm();
      expect(await state.storage.getAlarm()).toBe(rig.workAt);
      // Work due later than the alarm set does not move it.
      rig.workAt = Date.now() + 20_000;
      await rig.engine.sweeper.ensureAlarm();
      expect(await alarmIn(state)).toBeLessThanOrEqual(5000);
    });
  });

  it("is not moved later by an object that woke without knowing which alarm is set", async () => {
    await inObject(async (state) => {
      const soon = Date.now() + 5000;
      await state.storage.setAlarm(soon);
      const { connect } = sweepRig(state);
      await connect(0);
      expect(await state.storage.getAlarm()).toBe(soon);
    });
  });

  it("is set for the object's own work alone while no socket is here, and for the sweep while the room's sockets are on other objects", async () => {
    await inObject(async (state) => {
      const { rig } = sweepRig(state);
      await rig.engine.sweeper.ensureAlarm();
      expect(await alarmIn(state)).toBeNull();
      rig.workAt = Date.now() + 3_600_000;
      await rig.engine.sweeper.ensureAlarm();
      expect(await state.storage.getAlarm()).toBe(rig.workAt);
      await state.storage.deleteAlarm();
      rig.engine.sweeper.forgetAlarm();
      rig.workAt = null;
      rig.elsewhere = 2;
      await rig.engine.sweeper.ensureAlarm();
      expect(await alarmIn(state)).toBeGreaterThan(IDLE_MS - 2000);
    });
  });

  it("sweeps, reports while the room is live, runs the object's work and sets the next alarm", async () => {
    await inObject(async (state) => {
      const { rig, connect } = sweepRig(state);
      const lively = await connect(0);
      const silent = await connect(IDLE_MS + 10_000);
      await state.storage.deleteAlarm();
      rig.engine.sweeper.forgetAlarm();
      await rig.engine.alarm();
      expect(open(rig, [lively, silent])).toEqual([true, false]);
      expect(rig.heartbeats).toBe(1);
      expect(rig.worked.map((w) => w.live)).toEqual([true]);
      expect(await alarmIn(state)).toBeGreaterThan(IDLE_MS - 2000);

      // The last socket gone: no report, the work runs as for an empty room, and no sweep is due.
      rig.engine.delivery.close(lively.socket.ws, 1000, "bye");
      await state.storage.deleteAlarm();
      rig.engine.sweeper.forgetAlarm();
      await rig.engine.alarm();
      expect(rig.heartbeats).toBe(1);
      expect(rig.worked.map((w) => w.live)).toEqual([true, false]);
      expect(await alarmIn(state)).toBeNull();
    });
  });
});

describe("nudges", () => {
  it("asks a socket silent for half the timeout for a sign of life instead of closing it, and sweeps every half timeout", async () => {
    await inObject(async (state) => {
      const nudged: SocketState[] = [];
      const { rig, connect } = sweepRig(state, IDLE_S, nudged);
      const quiet = await connect(IDLE_MS / 2 + 5000);
      const fresh = await connect(IDLE_MS / 2 - 5000);
      const gone = await connect(IDLE_MS + 5000);
      rig.engine.sweeper.sweep(Date.now());
      expect(nudged).toEqual([quiet.socket]);
      expect(open(rig, [quiet, fresh, gone])).toEqual([true, true, false]);
      const next = await alarmIn(state);
      expect(next).toBeGreaterThan(IDLE_MS / 2 - 2000);
      expect(next).toBeLessThanOrEqual(IDLE_MS / 2);
      // Its answer (any frame) is a sign of life: it is not nudged again.
      await rig.frame(quiet.socket, "ping");
      await sleep(0);
      rig.engine.sweeper.sweep(Date.now());
      expect(nudged).toHaveLength(1);
    });
  });
});
