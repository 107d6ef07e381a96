import type Pusher from "pusher-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { PusherWebhookBody, PusherWebhookEvent } from "../../protocol/pusher";
import { startServer, type LocalServer } from "../helpers/server";
import { sleep, until } from "../helpers/wait";
import { WebhookReceiver } from "../helpers/webhook-receiver";
import { APP, backEnd, connected, frontEnd, pusherVars, pusherWebhookCheck, record } from "../helpers/pusher";

/**
 * Webhooks in Pusher's format (docs/pusher.md#webhooks) against the local
 * server and a receiver on 127.0.0.1 that accepts a request only when the
 * stock server SDK's `webhook(request).isValid()` says it is the app's: a
 * presence channel's life with a client event, a cache miss, what is sent by
 * default, and a receiver that is down for a while and loses nothing.
 */

const LEAVE_DELAY_MS = 300;

/** Subscribes and waits until the server confirmed it. */
async function subscribed(client: Pusher, channel: string): Promise<void> {
  await record(client, channel).waitFor("pusher:subscription_succeeded");
}

/** A channel's accepted events as `name` or `name:user_id`, client events with their event and sender. */
function story(receiver: WebhookReceiver<PusherWebhookEvent>, channel: string): string[] {
  return receiver.accepted
    .filter((e) => e.channel === channel)
    .map((e) => {
      if (e.name === "client_event") return `client_event:${e.event}:${e.data}:${e.user_id ?? "-"}`;
      if (e.name === "member_added" || e.name === "member_removed") return `${e.name}:${e.user_id}`;
      return e.name;
    });
}

describe("Pusher webhooks", () => {
  let receiver: WebhookReceiver<PusherWebhookEvent>;
  let server: LocalServer;
  const clients: Pusher[] = [];
  const client = (user?: { id: string }) => {
    const c = frontEnd(server, user ? { user } : {});
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    receiver = await WebhookReceiver.checking<PusherWebhookEvent>(pusherWebhookCheck());
    server = await startServer({
      vars: {
        ...pusherVars(),
        PUSHER_WEBHOOK_URL: receiver.url,
        PUSHER_WEBHOOK_EVENTS: "channel_occupied,channel_vacated,member_added,member_removed,client_event,cache_miss",
        PRESENCE_LEAVE_DELAY_MS: String(LEAVE_DELAY_MS),
        WEBHOOK_BACKOFF_MAX_MS: "1000",
      },
    });
  });

  afterEach(() => {
    for (const c of clients.splice(0)) c.disconnect();
    receiver.mode = "up";
  });

  afterAll(async () => {
    await server?.stop("SIGKILL");
    await receiver?.stop();
  });

  it("tells a presence channel's life in order, client events with their sender, each request valid by the SDK's webhook().isValid()", async () => {
    const channel = "presence-hooks";
    const ada = client({ id: "ada" });
    await subscribed(ada, channel);
    await receiver.waitFor(() => story(receiver, channel).length >= 2, 10_000, "ada's arrival");
    const bob = client({ id: "bob" });
    await subscribed(bob, channel);
    await receiver.waitFor(() => story(receiver, channel).length >= 3, 10_000, "bob's arrival");
    bob.channel(channel).trigger("client-typing", { who: "bob" });
    await receiver.waitFor(() => story(receiver, channel).length >= 4, 10_000, "the client event");
    bob.disconnect();
    await receiver.waitFor(() => story(receiver, channel).length >= 5, 10_000, "bob's leave");
    ada.disconnect();
    await receiver.waitFor(() => story(receiver, channel).length >= 7, 10_000, "the channel vacated");

    expect(story(receiver, channel)).toEqual([
      "channel_occupied",
      "member_added:ada",
      "member_added:bob",
      'client_event:client-typing:{"who":"bob"}:bob',
      "member_removed:bob",
      "member_removed:ada",
      "channel_vacated",
    ]);
    const requests = receiver.requests.filter((r) => r.events.some((e) => e.channel === channel));
    expect(requests.every((r) => r.verified && r.status === 204)).toBe(true);
    for (const request of requests) {
      expect(request.headers["content-type"]).toBe("application/json");
      expect(request.headers["x-pusher-key"]).toBe(APP.key);
      const body = JSON.parse(request.rawBody) as PusherWebhookBody;
      expect(Math.abs(body.time_ms - Date.now())).toBeLessThan(60_000);
    }
    // The check can fail: the same requests are not the work of another secret.
    const stranger = pusherWebhookCheck("another-secret");
    expect(requests.some((r) => stranger(r))).toBe(false);
    // The client event's socket id is the sender's.
    const clientEvent = receiver.accepted.find((e) => e.channel === channel && e.name === "client_event");
    expect(clientEvent).toMatchObject({ socket_id: expect.stringMatching(/^\d+\.\d+$/) });
  });

  it("a private channel's client event has no user_id; a cache channel with nothing cached tells cache_miss", async () => {
    const sender = client();
    const listener = client();
    await Promise.all([subscribed(sender, "private-hooks"), subscribed(listener, "private-hooks")]);
    const senderId = await connected(sender);
    sender.channel("private-hooks").trigger("client-move", { x: 1 });
    await receiver.waitFor(() => story(receiver, "private-hooks").some((s) => s.startsWith("client_event")), 10_000, "the private client event");
    expect(story(receiver, "private-hooks")).toEqual(["channel_occupied", 'client_event:client-move:{"x":1}:-']);
    expect(receiver.accepted.find((e) => e.name === "client_event" && e.channel === "private-hooks")).toMatchObject({ socket_id: senderId });

    const reader = client();
    await subscribed(reader, "cache-hooks");
    await receiver.waitFor(() => story(receiver, "cache-hooks").includes("cache_miss"), 10_000, "the cache miss");
    expect(story(receiver, "cache-hooks").sort()).toEqual(["cache_miss", "channel_occupied"]);
  });

  it("loses nothing while the receiver is down: everything arrives, in order, once it answers again", async () => {
    receiver.mode = "down";
    const channel = "presence-outage";
    const ada = client({ id: "ada" });
    await subscribed(ada, channel);
    const bob = client({ id: "bob" });
    await subscribed(bob, channel);
    bob.disconnect();
    await until(() => receiver.requests.filter((r) => r.status === 503 && r.events.some((e) => e.channel === channel)).length >= 2, { what: "refused attempts", timeoutMs: 15_000 });
    ada.disconnect();
    await sleep(LEAVE_DELAY_MS * 3);
    receiver.mode = "up";
    await receiver.waitFor(() => story(receiver, channel).includes("channel_vacated"), 20_000, "the backlog");
    expect(story(receiver, channel)).toEqual(["channel_occupied", "member_added:ada", "member_added:bob", "member_removed:bob", "member_removed:ada", "channel_vacated"]);
  });
});

describe("Pusher webhooks by default", () => {
  it("send a channel's existence and its members, not client events or cache misses", async () => {
    const receiver = await WebhookReceiver.checking<PusherWebhookEvent>(pusherWebhookCheck());
    const server = await startServer({ vars: { ...pusherVars(), PUSHER_WEBHOOK_URL: receiver.url, PRESENCE_LEAVE_DELAY_MS: String(LEAVE_DELAY_MS) } });
    const clients: Pusher[] = [];
    try {
      const ada = frontEnd(server, { user: { id: "ada" } });
      const bob = frontEnd(server, { user: { id: "bob" } });
      clients.push(ada, bob);
      await subscribed(ada, "presence-default");
      await subscribed(bob, "presence-default");
      bob.channel("presence-default").trigger("client-ignored", {});
      await subscribed(ada, "cache-default");
      await backEnd(server).trigger("presence-default", "marker", {});
      bob.disconnect();
      await receiver.waitFor(() => story(receiver, "presence-default").includes("member_removed:bob"), 10_000, "bob's leave");
      await sleep(500);
      expect(story(receiver, "presence-default")).toEqual(["channel_occupied", "member_added:ada", "member_added:bob", "member_removed:bob"]);
      expect(story(receiver, "cache-default")).toEqual(["channel_occupied"]);
    } finally {
      for (const c of clients) c.disconnect();
      await server.stop("SIGKILL");
      await receiver.stop();
    }
  });
});
