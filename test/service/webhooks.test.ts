import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RoomStats, WebhookEvent } from "../../protocol";
import { MuxSocket } from "../helpers/multiplex";
import { startServer, type LocalServer } from "../helpers/server";
import { publish, roomStats, TestSocket } from "../helpers/socket";
import { WebhookReceiver } from "../helpers/webhook-receiver";
import { readUntil, sleep } from "../helpers/wait";

/**
 * Webhooks against the local server and a real receiver on 127.0.0.1
 * (docs/webhooks.md): what a room tells, in which order, signed; a receiver
 * that is down for a minute; a sharded room; the outbox's bounds and dead
 * letters. Kill -9 is in webhooks-crash.test.ts.
 */

const SECRET = "webhook-test-secret";
const LEAVE_DELAY_MS = 500;

function ids(events: WebhookEvent[]): string[] {
  return events.map((e) => e.id);
}

/** Ids that arrived in more than one acknowledged request. */
function repeated(receiver: WebhookReceiver): string[] {
  const seen = new Set<string>();
  const twice = new Set<string>();
  for (const event of receiver.accepted) (seen.has(event.id) ? twice : seen).add(event.id);
  return [...twice];
}

describe("webhooks of rooms", () => {
  let receiver: WebhookReceiver;
  let server: LocalServer;
  const open = (room: string, member: string, info?: unknown) => {
    const url = new URL(`${server.wsUrl}/rooms/${room}/ws`);
    url.searchParams.set("member", member);
    if (info !== undefined) url.searchParams.set("info", JSON.stringify(info));
    return TestSocket.open(url.toString());
  };
  const stats = (room: string): Promise<RoomStats> => roomStats(server.url, room);

  beforeAll(async () => {
    receiver = await WebhookReceiver.start(SECRET);
    server = await startServer({
      vars: {
        WEBHOOK_URL: receiver.url,
        WEBHOOK_SECRET: SECRET,
        WEBHOOK_EVENTS: "room.occupied,room.vacated,member.joined,member.left,message.published",
        WEBHOOK_MESSAGE_PREFIX: "orders-",
        WEBHOOK_BACKOFF_MAX_MS: "2000",
        PRESENCE_LEAVE_DELAY_MS: String(LEAVE_DELAY_MS),
        PRESENCE_COUNT_INTERVAL_MS: "200",
        HISTORY_MAX_AGE_SECONDS: "2",
        ROOM_SHARD_SOCKETS: "2",
      },
    });
  });

  afterAll(async () => {
    await server?.stop("SIGKILL");
    await receiver?.stop();
  });

  it("tells a room's life once, in order, signed: a second tab and a reload within the leave delay are no joins or leaves", async () => {
    const room = "life";
    const ada1 = await open(room, "ada", { name: "Ada" });
    const ada2 = await open(room, "ada");
    const bob = await open(room, "bob");
    await receiver.waitFor((r) => r.summary(room).length >= 3, 10_000, "the joins");
    // Bob reloads: his socket goes and another comes within the delay.
    bob.close();
    const bobAgain = await open(room, "bob");
    ada1.close();
    ada2.close();
    await receiver.waitFor((r) => r.summary(room).includes("member.left:ada"), 10_000, "ada's leave");
    bobAgain.close();
    await receiver.waitFor((r) => r.summary(room).includes("room.vacated"), 10_000, "the vacated room");
    await sleep(LEAVE_DELAY_MS * 2);

    expect(receiver.summary(room)).toEqual(["room.occupied", "member.joined:ada", "member.joined:bob", "member.left:ada", "member.left:bob", "room.vacated"]);
    const events = receiver.eventsOf(room);
    expect(events[1]).toMatchObject({ type: "member.joined", room, data: { member: { id: "ada", info: { name: "Ada" }, verified: false } } });
    expect(events[3]).toMatchObject({ type: "member.left", data: { member: { id: "ada" }, inferred: false } });
    expect(events[5]).toMatchObject({ type: "room.vacated", data: { inferred: false } });
    // Times never go back, ids never repeat, and every request was signed with the secret.
    expect(events.map((e) => e.ts)).toEqual([...events.map((e) => e.ts)].sort((a, b) => a - b));
    expect(new Set(ids(events)).size).toBe(events.length);
    expect(receiver.requests.filter((r) => r.events.some((e) => e.room === room)).every((r) => r.verified)).toBe(true);
    expect(repeated(receiver)).toEqual([]);
    const after = await stats(room);
    expect(after.webhooks).toMatchObject({ pending: 0, failures: 0, members: 0, occupied: false, deadLetters: 0 });
    expect(after.webhookDelivered).toBe(6);
  });

  it("tells a room followed over a multiplexed connection in the same order as over a room's socket: occupied, then the join", async () => {
    const room = "life-mux";
    const mux = await MuxSocket.open(`${server.wsUrl}/ws?member=max`);
    mux.subscribe(room);
    await receiver.waitFor((r) => r.summary(room).length >= 2, 10_000, "the occupied room and the join");
    mux.close();
    await receiver.waitFor((r) => r.summary(room).includes("room.vacated"), 15_000, "the vacated room");
    expect(receiver.summary(room)).toEqual(["room.occupied", "member.joined:max", "member.left:max", "room.vacated"]);
  });

  it("sends message.published only for rooms whose name starts with WEBHOOK_MESSAGE_PREFIX, with the seq, epoch and data", async () => {
    for (const n of [1, 2]) {
      expect((await publish(server.url, "chat-7", { n })).status).toBe(200);
      expect((await publish(server.url, "orders-7", { n })).status).toBe(200);
    }
    // The chat room's next event shows what it recorded before it: no message.
    const watcher = await open("chat-7", "watcher");
    await receiver.waitFor((r) => r.summary("orders-7").length >= 2 && r.summary("chat-7").length >= 2, 10_000, "both rooms' events");
    watcher.close();
    const epoch = (await stats("orders-7")).epoch;
    expect(receiver.eventsOf("orders-7").map((e) => e.data)).toEqual([
      { seq: 1, epoch, data: { n: 1 } },
      { seq: 2, epoch, data: { n: 2 } },
    ]);
    expect(receiver.summary("chat-7").slice(0, 2)).toEqual(["room.occupied", "member.joined:watcher"]);
  });

  it("delivers every event once per id, in order per room, after the receiver was down for 60 s, and keeps the storage of a room whose events wait", async () => {
    const rooms = ["outage-a", "outage-b", "orders-outage"];
    const expected = new Map<string, string[]>(rooms.map((r) => [r, []]));
    receiver.mode = "down";
    const downAt = Date.now();
    // A member stays in each room throughout, so the rooms stay occupied until the end.
    const keepers: TestSocket[] = [];
    for (const room of ["outage-a", "outage-b"]) {
      keepers.push(await open(room, "keeper"));
      expected.get(room)!.push("room.occupied", "member.joined:keeper");
    }
    // Changes keep coming while the receiver is down: members arrive and go, messages are published.
    let round = 0;
    while (Date.now() - downAt < 50_000) {
      for (const room of ["outage-a", "outage-b"]) {
        const member = `m${round}`;
        const socket = await open(room, member);
        expected.get(room)!.push(`member.joined:${member}`);
        await sleep(100);
        socket.close();
      }
      expect((await publish(server.url, "orders-outage", { round })).status).toBe(200);
      expected.get("orders-outage")!.push("message.published");
      await sleep(LEAVE_DELAY_MS * 3);
      for (const room of ["outage-a", "outage-b"]) expected.get(room)!.push(`member.left:m${round}`);
      round += 1;
      await sleep(2000);
    }
    // The rooms empty, and their last leaves and vacated events wait too.
    for (const keeper of keepers) keeper.close();
    for (const room of ["outage-a", "outage-b"]) expected.get(room)!.push("member.left:keeper", "room.vacated");
    await sleep(LEAVE_DELAY_MS * 4);
    const during = await stats("outage-a");
    expect(during.webhooks?.pending).toBe(expected.get("outage-a")!.length);
    expect(during.webhooks?.failures).toBeGreaterThan(0);
    expect(during.webhooks?.lastError).toBe("status 503");
    expect(receiver.eventsOf("outage-a")).toEqual([]);
    // Its history aged out long ago (HISTORY_MAX_AGE_SECONDS=2) and it has no socket, but its events need its storage.
    expect((await fetch(`${server.url}/rooms/outage-b`)).status).toBe(200);
    while (Date.now() - downAt < 60_000) await sleep(500);

    receiver.mode = "up";
    for (const room of rooms) {
      await receiver.waitFor((r) => r.summary(room).length >= expected.get(room)!.length, 30_000, `every event of ${room}`);
      expect(receiver.summary(room)).toEqual(expected.get(room));
    }
    expect(repeated(receiver)).toEqual([]);
    expect(receiver.eventsOf("orders-outage").map((e) => (e.data as { seq: number }).seq)).toEqual(Array.from({ length: round }, (_, i) => i + 1));
    // Delivered, the room may already have given its storage back (its shard asks as soon as nothing holds it,
    // and nothing pending is the condition): a 404 says that much; a room still there shows it in its stats.
    const afterResponse = await fetch(`${server.url}/rooms/outage-a`);
    if (afterResponse.status === 200) {
      const after = (await afterResponse.json()) as RoomStats;
      expect(after.webhooks).toMatchObject({ pending: 0, failures: 0, lastError: null, deadLetters: 0 });
      expect(after.webhookFailedRequests).toBeGreaterThan(0);
    } else {
      expect(afterResponse.status).toBe(404);
    }
    // Delivered and empty, the room gives its storage back.
    await readUntil(async () => (await fetch(`${server.url}/rooms/outage-b`)).status, (s) => s === 404, { what: "outage-b's storage to go", timeoutMs: 40_000 });
  }, 150_000);

  it("sends one room.occupied and one room.vacated for a sharded room, decided over the root and its leaves, and each member's join and leave once across its objects", async () => {
    const room = "sharded-hooks";
    const sockets: TestSocket[] = [];
    for (let i = 0; i < 6; i++) sockets.push(await open(room, `s${i}`));
    // A member with tabs on two objects is one member.
    sockets.push(await open(room, "s0"));
    const sharded = await stats(room);
    expect(sharded.leaves?.length).toBeGreaterThan(1);
    // Two sockets without a member, on leaves: the room is occupied while they are there, whoever left.
    const viewers = [await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`), await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws`)];
    await receiver.waitFor((r) => r.summary(room).length >= 7, 10_000, "the joins");
    for (const socket of sockets) socket.close();
    await receiver.waitFor((r) => r.summary(room).filter((t) => t.startsWith("member.left:")).length >= 6, 20_000, "the leaves");
    await sleep(LEAVE_DELAY_MS * 4);
    expect(receiver.summary(room)).not.toContain("room.vacated");
    for (const viewer of viewers) viewer.close();
    await receiver.waitFor((r) => r.summary(room).includes("room.vacated"), 20_000, "the vacated room");
    await sleep(2000);
    const told = receiver.summary(room);
    expect(told[0]).toBe("room.occupied");
    expect(told.at(-1)).toBe("room.vacated");
    expect(told.filter((t) => t === "room.occupied" || t === "room.vacated")).toHaveLength(2);
    const members = Array.from({ length: 6 }, (_, i) => `s${i}`);
    expect(told.filter((t) => t.startsWith("member.joined:")).sort()).toEqual(members.map((m) => `member.joined:${m}`));
    expect(told.filter((t) => t.startsWith("member.left:")).sort()).toEqual(members.map((m) => `member.left:${m}`));
    // Every member's join comes before its leave.
    for (const m of members) expect(told.indexOf(`member.joined:${m}`)).toBeLessThan(told.indexOf(`member.left:${m}`));
  });
});

describe("a room's outbox, bounded", () => {
  let receiver: WebhookReceiver;
  let server: LocalServer;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start(SECRET);
    receiver.mode = "down";
    server = await startServer({
      vars: {
        WEBHOOK_URL: receiver.url,
        WEBHOOK_SECRET: SECRET,
        // One event per row and two rows at most: the third row pushes the oldest out.
        WEBHOOK_BATCH_MAX_EVENTS: "1",
        WEBHOOK_OUTBOX_MAX_ROWS: "2",
        WEBHOOK_RETRY_SECONDS: "60",
        WEBHOOK_BACKOFF_MAX_MS: "2000",
        PRESENCE_LEAVE_DELAY_MS: "200",
      },
    });
  });

  afterAll(async () => {
    await server?.stop("SIGKILL");
    await receiver?.stop();
  });

  it("turns the oldest rows into dead letters past WEBHOOK_OUTBOX_MAX_ROWS, and what is left into dead letters past WEBHOOK_RETRY_SECONDS; both show in the room's stats and /metrics", async () => {
    const room = "bounded";
    const ada = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?member=ada`);
    const bob = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?member=bob`);
    // room.occupied, joined ada, joined bob: three rows for two places.
    const overflowed = await readUntil(() => roomStats(server.url, room), (s) => (s.webhooks?.deadLetters ?? 0) >= 1, { what: "a dead letter", timeoutMs: 20_000 });
    expect(overflowed.webhooks).toMatchObject({ pending: 2, pendingRows: 2, deadLetters: 1 });
    expect(overflowed.webhooks?.recentDeadLetters).toEqual([expect.objectContaining({ type: "room.occupied", reason: "overflow" })]);
    expect(overflowed.webhookDeadLetters).toBe(1);

    // Nothing is acknowledged for WEBHOOK_RETRY_SECONDS: the two left become dead letters too.
    const expired = await readUntil(() => roomStats(server.url, room), (s) => (s.webhooks?.deadLetters ?? 0) >= 3, { what: "the expired events", timeoutMs: 90_000 });
    expect(expired.webhooks).toMatchObject({ pending: 0, deadLetters: 3 });
    expect(expired.webhooks?.recentDeadLetters.map((d) => [d.type, d.reason])).toEqual([
      ["member.joined", "expired"],
      ["member.joined", "expired"],
      ["room.occupied", "overflow"],
    ]);
    expect(receiver.accepted).toEqual([]);

    // The receiver is back: events from now on arrive; the dead ones do not.
    // (One at a time: two leaves and the vacated room in one turn would be three rows, and the oldest would give way.)
    receiver.mode = "up";
    ada.close();
    await receiver.waitFor((r) => r.summary(room).length >= 1, 20_000, "ada's leave");
    bob.close();
    await receiver.waitFor((r) => r.summary(room).length >= 3, 20_000, "bob's leave and the vacated room");
    expect(receiver.summary(room)).toEqual(["member.left:ada", "member.left:bob", "room.vacated"]);
    // The room reported its counters as it emptied.
    const metrics = await readUntil(
      async () => (await fetch(`${server.url}/metrics`)).text(),
      (text) => Number(/^fanout_webhook_dead_letters_total (\d+)$/m.exec(text)?.[1]) >= 3,
      { what: "dead letters in /metrics", timeoutMs: 20_000 },
    );
    expect(metrics).toMatch(/^fanout_webhook_failed_requests_total [1-9]\d*$/m);
    expect((await roomStats(server.url, room)).webhookDelivered).toBe(3);
  }, 150_000);
});

describe("webhook settings", () => {
  it("sends unsigned requests without WEBHOOK_SECRET, and says so when it starts", async () => {
    const receiver = await WebhookReceiver.start(SECRET);
    const server = await startServer({ vars: { WEBHOOK_URL: receiver.url } });
    try {
      expect(server.output()).toMatch(/WEBHOOK_URL is set without WEBHOOK_SECRET/);
      const socket = await TestSocket.open(`${server.wsUrl}/rooms/unsigned/ws`);
      await readUntil(async () => receiver.requests.length, (n) => n > 0, { what: "a request", timeoutMs: 20_000 });
      expect(receiver.requests[0]).toMatchObject({ verified: false, events: [expect.objectContaining({ type: "room.occupied" })] });
      socket.close();
    } finally {
      await server.stop("SIGKILL");
      await receiver.stop();
    }
  });

  it("refuses a WEBHOOK_URL with credentials: bad_config, nothing recorded, the password never printed", async () => {
    const receiver = await WebhookReceiver.start(SECRET);
    const withCredentials = receiver.url.replace("http://", "http://hookuser:hunter2-pw@");
    const server = await startServer({ vars: { WEBHOOK_URL: withCredentials, WEBHOOK_SECRET: SECRET } });
    try {
      const socket = await TestSocket.open(`${server.wsUrl}/rooms/credentials/ws?member=ada`);
      const stats = await roomStats(server.url, "credentials");
      expect(stats.webhooks).toBeUndefined();
      expect(server.output()).toMatch(/"event":"bad_config","var":"WEBHOOK_URL","problem":"holds credentials/);
      expect(server.output()).not.toContain("hunter2-pw");
      await sleep(1000);
      expect(receiver.requests).toEqual([]);
      socket.close();
    } finally {
      await server.stop("SIGKILL");
      await receiver.stop();
    }
  });

  it("records nothing when WEBHOOK_URL is not an http or https URL", async () => {
    const server = await startServer({ vars: { WEBHOOK_URL: "ftp://127.0.0.1/hooks", WEBHOOK_SECRET: SECRET } });
    try {
      const socket = await TestSocket.open(`${server.wsUrl}/rooms/no-hooks/ws?member=ada`);
      const stats = await roomStats(server.url, "no-hooks");
      expect(stats.webhooks).toBeUndefined();
      expect(stats.webhookEvents).toBe(0);
      expect(server.output()).toMatch(/"var":"WEBHOOK_URL"/);
      socket.close();
    } finally {
      await server.stop("SIGKILL");
    }
  });
});
