import { channelOfRoom, escapeChannel, parsePusherChannel, PUSHER_ROOM_PREFIX, type PusherChannel, type PusherChannelAttribute, type PusherChannelAttributes, type PusherChannelList } from "../../protocol/pusher";
import { forEachBounded } from "../../common/bounded";
import { readCoordinatorConfig } from "../../common/coordinator-config";
import type { PusherApp } from "../../common/settings";
import { listRooms } from "../coordinator/listing";
import { LIST_MAX_LIMIT } from "../coordinator/policy";
import type { Env } from "../env";
import { attributesOf } from "./channel-attributes";

/** Channels one `GET /channels` names at most: ten pages of the registry. Pusher's answer has no pages; this one says where it stops. */
export const CHANNEL_LIST_MAX = 10 * LIST_MAX_LIMIT;
/** Channels one `GET /channels` with `info` names at most: each is one read of its room. */
export const CHANNEL_COUNTS_MAX = LIST_MAX_LIMIT;
/** Rooms read at once for their counts. */
const CONCURRENT_ROOMS = 10;

/** What may follow `filter_by_prefix=`: the start of a channel name. */
export const CHANNEL_PREFIX_PATTERN = /^[A-Za-z0-9_\-=@,.;]{0,164}$/;

/**
 * `GET /apps/{app_id}/channels` (docs/pusher.md#the-http-api): the app's
 * occupied channels whose names start with `prefix`, from the coordinator's
 * live-room registry (GET /rooms), restricted to the app's rooms
 * (`pusher:{app_id}:` and the prefix as room names escape it) and named back
 * as channels; a signed-in user's `#server-to-user-` channel is the server's
 * own and is not listed. The registry's counts are as of each room's last
 * report (up to a heartbeat old), so when `info` asks for counts each listed
 * room is read (its stats, as `GET /channels/{channel}` reads them), for at
 * most CHANNEL_COUNTS_MAX channels; a room whose last subscriber left since
 * its report is left out.
 */
export async function listChannels(env: Env, app: PusherApp, prefix: string, info: ReadonlySet<PusherChannelAttribute>): Promise<PusherChannelList> {
  const config = readCoordinatorConfig(env);
  const roomPrefix = `${PUSHER_ROOM_PREFIX}${app.id}:${escapeChannel(prefix)}`;
  const max = info.size > 0 ? CHANNEL_COUNTS_MAX : CHANNEL_LIST_MAX;
  const found: { room: string; channel: PusherChannel }[] = [];
  let after: string | null = null;
  do {
    const page = await listRooms(env.COORDINATOR, config, { prefix: roomPrefix, after, limit: LIST_MAX_LIMIT });
    for (const entry of page.rooms) {
      const held = channelOfRoom(entry.room);
      const channel = held && held.appId === app.id ? parsePusherChannel(held.channel) : null;
      if (channel && channel.kind !== "user" && found.length < max) found.push({ room: entry.room, channel });
    }
    after = page.cursor === null ? null : (page.rooms.at(-1)?.room ?? null);
  } while (after !== null && found.length < max);

  const channels: PusherChannelList["channels"] = {};
  if (info.size === 0) {
    for (const { channel } of found) channels[channel.name] = {};
    return { channels };
  }
  const counted = new Map<string, PusherChannelAttributes>();
  await forEachBounded(found, CONCURRENT_ROOMS, async ({ room, channel }) => {
    const stats = await env.ROOMS.get(env.ROOMS.idFromName(room)).stats();
    if (stats.connections > 0) counted.set(channel.name, attributesOf(channel, stats, info));
  });
  // In name order, as the registry listed them.
  for (const { channel } of found) {
    const attributes = counted.get(channel.name);
    if (attributes) channels[channel.name] = attributes;
  }
  return { channels };
}
