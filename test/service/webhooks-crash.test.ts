import { afterAll, describe, expect, it } from "vitest";
import type { MemberLeftEvent, RoomStats, RoomVacatedEvent } from "../../protocol";
import { startServer, type LocalServer } from "../helpers/server";
import { roomStats, TestSocket } from "../helpers/socket";
import { WebhookReceiver } from "../helpers/webhook-receiver";
import { readUntil } from "../helpers/wait";

/**
 * Webhooks across kill -9 of workerd (docs/webhooks.md#what-survives-what):
 * events recorded before the kill are delivered after the restart, and the
 * members who were in a room when it died get their `member.left` (and the
 * room its `room.vacated`), counted from the restart, unless they come back.
 */

const SECRET = "webhook-crash-secret";
const LEAVE_DELAY_MS = 3000;

const servers: LocalServer[] = [];
const receivers: WebhookReceiver[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop("SIGKILL")));
  await Promise.all(receivers.map((r) => r.stop()));
});

describe("webhooks and kill -9", () => {
  it("delivers after the restart a leave recorded before the kill, and the leaves (and the vacated room) of members who were present at it and did not come back", async () => {
    const receiver = await WebhookReceiver.start(SECRET);
    receivers.push(receiver);
    const vars = {
      WEBHOOK_URL: receiver.url,
      WEBHOOK_SECRET: SECRET,
      WEBHOOK_BACKOFF_MAX_MS: "2000",
      PRESENCE_LEAVE_DELAY_MS: String(LEAVE_DELAY_MS),
      // The sweep alarm of a room with sockets comes this often: it is what wakes a room after a restart.
      IDLE_TIMEOUT_SECONDS: "10",
    };
    const first = await startServer({ vars });
    servers.push(first);
    const open = (server: LocalServer, room: string, member: string) => TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?member=${member}`);

    // A room whose events all reached the receiver, with two members in it when the server dies.
    const present = "present-at-kill";
    await open(first, present, "dan");
    await open(first, present, "eve");
    await receiver.waitFor((r) => r.summary(present).length === 3, 10_000, "the first room's joins");

    // The receiver is down: a member joins and leaves another room, and the leave waits in the outbox.
    receiver.mode = "down";
    const left = "left-before-kill";
    const ada = await open(first, left, "ada");
    await open(first, left, "bob");
    await open(first, left, "cyd");
    ada.close();
    const waiting = await readUntil(
      () => roomStats(first.url, left),
      (s: RoomStats) => s.webhooks?.pending === 5,
      { what: "ada's leave in the outbox", timeoutMs: LEAVE_DELAY_MS + 10_000 },
    );
    expect(waiting.webhooks).toMatchObject({ members: 2, occupied: true });
    expect(receiver.eventsOf(left)).toEqual([]);

    await first.stop("SIGKILL");
    receiver.mode = "up";
    const second = await startServer({ vars, dataDir: first.dataDir, port: first.port });
    servers.push(second);
    // Cyd comes back at once, within the leave delay: no leave, no second join.
    const cyd = await open(second, left, "cyd");

    await receiver.waitFor((r) => r.summary(left).length >= 6, LEAVE_DELAY_MS + 20_000, "the second room's events");
    await receiver.waitFor((r) => r.summary(present).length >= 6, LEAVE_DELAY_MS + 30_000, "the first room's leaves");
    expect(receiver.summary(left)).toEqual(["room.occupied", "member.joined:ada", "member.joined:bob", "member.joined:cyd", "member.left:ada", "member.left:bob"]);
    const leaves = receiver.eventsOf(left).filter((e): e is MemberLeftEvent => e.type === "member.left");
    expect(leaves.map((e) => [e.data.member.id, e.data.inferred])).toEqual([
      ["ada", false],
      ["bob", true],
    ]);
    expect(receiver.summary(present)).toEqual(["room.occupied", "member.joined:dan", "member.joined:eve", "member.left:dan", "member.left:eve", "room.vacated"]);
    const presentEvents = receiver.eventsOf(present);
    expect(presentEvents.filter((e) => e.type === "member.left").every((e) => (e as MemberLeftEvent).data.inferred)).toBe(true);
    expect((presentEvents.at(-1) as RoomVacatedEvent).data.inferred).toBe(true);

    // Cyd leaves for good: the room is told as it would be without the restart.
    cyd.close();
    await receiver.waitFor((r) => r.summary(left).includes("room.vacated"), LEAVE_DELAY_MS + 10_000, "the second room vacated");
    expect(receiver.summary(left).slice(6)).toEqual(["member.left:cyd", "room.vacated"]);
    expect((receiver.eventsOf(left).at(-1) as RoomVacatedEvent).data.inferred).toBe(false);
    expect(receiver.requests.every((r) => r.verified)).toBe(true);
    const after = await roomStats(second.url, left);
    expect(after.webhooks).toMatchObject({ pending: 0, members: 0, occupied: false });
  }, 120_000);
});
