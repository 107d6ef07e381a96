import { pusherRoom, type PusherChannelAttributes } from "../../protocol/pusher";
import { forEachBounded } from "../../common/bounded";
import type { PusherApp } from "../../common/settings";
import { utf8Length } from "../../common/utf8";
import type { PublishRefused } from "../../durable-objects/engine/publish-outcome";
import { recordPublish } from "../analytics";
import type { Env } from "../env";
import { attributesOf } from "./channel-attributes";
import type { EventRequest } from "./event-bodies";

/** Rooms published into at once by one request (a trigger names up to 100 channels). */
const CONCURRENT_ROOMS = 10;

/** One channel's events of a request, in the request's order. */
interface ChannelRun {
  room: string;
  events: EventRequest[];
}

/**
 * Publishes events of the HTTP API (docs/pusher.md#the-http-api): each is a
 * message of its channel's room like any other (a seq, history, this
 * service's own subscribers get it with an `event` field), published with its
 * event name and the socket it skips (Room.publish, source `pusher`). A
 * channel's events go in the request's order, one after the other; channels
 * go side by side. Answers the first refusal of a room's beforePublish hook,
 * or null; events already published stay published.
 */
export async function publishEvents(env: Env, app: PusherApp, events: readonly EventRequest[]): Promise<PublishRefused | null> {
  const runs = new Map<string, ChannelRun>();
  for (const event of events) {
    for (const channel of event.channels) {
      const room = pusherRoom(app.id, channel.name);
      let run = runs.get(room);
      if (!run) runs.set(room, (run = { room, events: [] }));
      run.events.push(event);
    }
  }
  let refused: PublishRefused | null = null;
  await forEachBounded([...runs.values()], CONCURRENT_ROOMS, async ({ room, events: channelEvents }) => {
    const stub = env.ROOMS.get(env.ROOMS.idFromName(room));
    for (const event of channelEvents) {
      if (refused) return;
      const outcome = await stub.publish(event.dataJson, {
        source: "pusher",
        fields: { event: event.name, ...(event.socketId === null ? {} : { socketId: event.socketId }) },
      });
      if ("refused" in outcome) {
        refused ??= outcome.refused;
        return;
      }
      recordPublish(env, room, outcome.recipients, utf8Length(event.dataJson));
    }
  });
  return refused;
}

/** What `info` asked of each of an event's channels, from their rooms' stats (the rooms exist: the event was just published). */
export async function eventAttributes(env: Env, app: PusherApp, event: EventRequest): Promise<Record<string, PusherChannelAttributes>> {
  const answer: Record<string, PusherChannelAttributes> = {};
  if (event.info.size === 0) return answer;
  await forEachBounded(event.channels, CONCURRENT_ROOMS, async (channel) => {
    const stats = await env.ROOMS.get(env.ROOMS.idFromName(pusherRoom(app.id, channel.name))).stats();
    answer[channel.name] = attributesOf(channel, stats, event.info);
  });
  return answer;
}
