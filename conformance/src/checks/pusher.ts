import WebSocket from "ws";
import type Pusher from "pusher-js";
import type { Channel } from "pusher-js";
import { CloseCode } from "../../../protocol/index.js";
import { PusherCloseCode, pusherCloseAction, pusherRoom } from "../../../protocol/pusher.js";
import { expect, skip, sleep, type Check, type Context } from "../check.js";

/**
 * G14: the Pusher front door, checked with the stock libraries only
 * (pusher-js subscribes, the `pusher` server SDK signs and triggers): what an
 * app that moves off Pusher runs on the first day.
 */

/** Waits until `done` holds, or fails saying what it waited for. */
async function until(done: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    expect(Date.now() < deadline, `timed out after ${ms} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** Every event of a channel, in order. */
function recorder(channel: Channel): { event: string; data: unknown }[] {
  const seen: { event: string; data: unknown }[] = [];
  channel.bind_global((event: string, data: unknown) => seen.push({ event, data }));
  return seen;
}

async function connected(client: Pusher): Promise<void> {
  await until(() => client.connection.state === "connected", 15_000, `pusher-js to connect (state ${client.connection.state})`);
}

/** The close code of a raw connection to `url` (null when none came within `ms`). */
function closeCodeOf(url: string, ms: number): Promise<number | null> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url);
    const timer = setTimeout(() => {
      ws.terminate();
      resolve(null);
    }, ms);
    ws.on("close", (code) => {
      clearTimeout(timer);
      resolve(code);
    });
    ws.on("error", () => undefined);
  });
}

const events = (seen: { event: string; data: unknown }[], name: string) => seen.filter((e) => e.event === name).map((e) => e.data);

export const pusherCanary: Check = {
  id: "G14.pusher-canary",
  clause: "G14 Pusher connections",
  title: "stock pusher-js subscribes, the stock server SDK triggers 30 events: each arrives once, in order",
  timeoutMs: 45_000,
  needsSockets: true,
  needsPusher: true,
  needsPublishKey: false,
  async run(ctx) {
    const channel = ctx.room("canary");
    const client = ctx.pusherClient();
    await connected(client);
    const seen = recorder(client.subscribe(channel));
    await until(() => events(seen, "pusher:subscription_succeeded").length > 0, 10_000, "pusher:subscription_succeeded");
    const server = ctx.pusherBackEnd();
    for (let n = 1; n <= 30; n++) {
      const answer = await server.trigger(channel, "tick", { n });
      expect(answer.status === 200, `trigger ${n} answered ${answer.status}`);
    }
    await until(() => events(seen, "tick").length >= 30, 15_000, "30 tick events");
    await sleep(300);
    const got = events(seen, "tick").map((d) => (d as { n: number }).n);
    expect(JSON.stringify(got) === JSON.stringify(Array.from({ length: 30 }, (_, i) => i + 1)), `events arrived as ${JSON.stringify(got)}`);
    return `30 of 30 events, once each, in order, on channel ${channel}`;
  },
};

export const pusherPrivate: Check = {
  id: "G14.pusher-private",
  clause: "G14 Pusher connections",
  title: "a private channel opens with the server SDK's signature, a forged one is refused and the connection stays",
  timeoutMs: 30_000,
  needsSockets: true,
  needsPusher: true,
  needsPublishKey: false,
  async run(ctx) {
    const channel = `private-${ctx.room("private")}`;
    const good = ctx.pusherClient();
    const goodSeen = recorder(good.subscribe(channel));
    await until(() => events(goodSeen, "pusher:subscription_succeeded").length > 0, 15_000, "the signed subscribe to succeed");
    const forger = ctx.pusherClient({ forged: true });
    await connected(forger);
    const forged = recorder(forger.subscribe(channel));
    await until(() => events(forged, "pusher:subscription_error").length > 0, 15_000, "the forged subscribe to be refused");
    const refusal = events(forged, "pusher:subscription_error")[0] as { type?: string; status?: number };
    const after = recorder(forger.subscribe(ctx.room("after-forgery")));
    await until(() => events(after, "pusher:subscription_succeeded").length > 0, 10_000, "a public subscribe on the same connection");
    await ctx.pusherBackEnd().trigger(channel, "secret", { n: 1 });
    await until(() => events(goodSeen, "secret").length === 1, 10_000, "the private event");
    await sleep(300);
    expect(events(forged, "secret").length === 0, "the forged subscriber got the private event");
    return `forged: pusher:subscription_error ${JSON.stringify(refusal)}, connection kept; the signed subscriber got the event`;
  },
};

export const pusherPresence: Check = {
  id: "G14.pusher-presence",
  clause: "G14 Pusher connections",
  title: "presence members between two clients: the picture with user_info, member_added, member_removed",
  timeoutMs: 40_000,
  needsSockets: true,
  needsPusher: true,
  needsPublishKey: false,
  async run(ctx) {
    const channel = `presence-${ctx.room("presence")}`;
    const alice = ctx.pusherClient({ user: { id: "alice", info: { name: "Alice" } } });
    const aliceSeen = recorder(alice.subscribe(channel));
    await until(() => events(aliceSeen, "pusher:subscription_succeeded").length > 0, 15_000, "alice's subscribe");
    const bob = ctx.pusherClient({ user: { id: "bob", info: { name: "Bob" } } });
    const bobSeen = recorder(bob.subscribe(channel));
    await until(() => events(bobSeen, "pusher:subscription_succeeded").length > 0, 15_000, "bob's subscribe");
    const picture = events(bobSeen, "pusher:subscription_succeeded")[0] as { count: number; members: Record<string, unknown> };
    expect(picture.count === 2 && JSON.stringify(picture.members) === JSON.stringify({ alice: { name: "Alice" }, bob: { name: "Bob" } }), `bob's picture: ${JSON.stringify(picture)}`);
    await until(() => events(aliceSeen, "pusher:member_added").length > 0, 10_000, "member_added to alice");
    bob.disconnect();
    await until(() => events(aliceSeen, "pusher:member_removed").length > 0, 20_000, "member_removed to alice");
    return `picture of 2 with user_info; member_added and member_removed reached the other member`;
  },
};

export const pusherClientEvents: Check = {
  id: "G14.pusher-client-events",
  clause: "G14 Pusher connections",
  title: "client events reach the others with user_id and never their sender (or are refused saying they are off)",
  timeoutMs: 40_000,
  needsSockets: true,
  needsPusher: true,
  needsPublishKey: false,
  async run(ctx) {
    const channel = `presence-${ctx.room("client")}`;
    const alice = ctx.pusherClient({ user: { id: "alice" } });
    const bob = ctx.pusherClient({ user: { id: "bob" } });
    const aliceChannel = alice.subscribe(channel);
    const bobChannel = bob.subscribe(channel);
    const senders: unknown[] = [];
    aliceChannel.bind("client-wave", (_data: unknown, meta: { user_id?: string }) => senders.push(meta?.user_id));
    const bobSeen = recorder(bobChannel);
    const errors: unknown[] = [];
    bob.connection.bind("error", (error: { data?: { message?: string } }) => errors.push(error?.data?.message));
    await until(() => aliceChannel.subscribed && bobChannel.subscribed, 15_000, "both subscribes");
    bobChannel.trigger("client-wave", { hi: true });
    const deadline = Date.now() + 5000;
    while (senders.length === 0 && errors.length === 0 && Date.now() < deadline) await sleep(20);
    if (errors.length > 0) {
      const message = String(errors[0]);
      expect(/client events/i.test(message), `a refused client event says ${JSON.stringify(message)}, not that client events are off`);
      skip(`client events are off on this deployment (refused: ${message})`);
    }
    expect(senders.length === 1 && senders[0] === "bob", `the other member got ${JSON.stringify(senders)}, expected one event from bob`);
    await sleep(500);
    expect(events(bobSeen, "client-wave").length === 0, "the client event came back to its sender");
    return "one client event, to the other member with user_id bob, not echoed";
  },
};

export const pusherDoor: Check = {
  id: "G14.pusher-door",
  clause: "G14 Pusher connections",
  title: "an unknown key and an unsupported protocol are closed with codes that make the client stop",
  timeoutMs: 20_000,
  needsSockets: true,
  needsPusher: true,
  needsPublishKey: false,
  async run(ctx) {
    const results: string[] = [];
    for (const [query, path, code] of [
      ["protocol=7", `/app/${ctx.pusher?.key}-not-it`, PusherCloseCode.APP_NOT_FOUND],
      ["protocol=6", `/app/${ctx.pusher?.key}`, PusherCloseCode.UNSUPPORTED_PROTOCOL],
    ] as const) {
      const closed = await closeCodeOf(`${ctx.service.wsBase}${path}?${query}&client=conformance`, 10_000);
      expect(closed === code, `${path}?${query}: close ${closed ?? "none"}, expected ${code}`);
      expect(pusherCloseAction(code) === "stop", `${code} must make a Pusher client stop`);
      results.push(`${query === "protocol=6" ? "protocol 6" : "unknown key"}: ${closed}`);
    }
    return results.join("; ");
  },
};

export const pusherIsolation: Check = {
  id: "G14.pusher-isolation",
  clause: "G14 Pusher connections",
  title: "a private channel's room is closed to this service's own sockets without a token that grants it, even in open mode",
  timeoutMs: 20_000,
  needsSockets: true,
  needsPusher: true,
  needsPublishKey: false,
  async run(ctx: Context) {
    const room = pusherRoom(ctx.pusher?.appId ?? "", `private-${ctx.room("isolated")}`);
    // In open mode no credentials at all; with tokens, a token for another room (a token that grants this one opens it, by design).
    const query = ctx.facts.access === "open" ? "" : await ctx.socketQuery(ctx.room("elsewhere"));
    const peer = await ctx.openRaw(`${ctx.service.wsBase}/rooms/${encodeURIComponent(room)}/ws${query}`, { autoAck: false });
    const closed = await peer.waitForClose(10_000);
    expect(closed?.code === CloseCode.FORBIDDEN, `a socket of this service's own protocol into ${room} (${ctx.facts.access} mode): close ${closed?.code ?? "none"}, expected 4003`);
    return `${room}, ${ctx.facts.access} mode: closed with 4003`;
  },
};

export const PUSHER_CHECKS: readonly Check[] = [pusherPresence, pusherClientEvents, pusherCanary, pusherPrivate, pusherDoor, pusherIsolation];
