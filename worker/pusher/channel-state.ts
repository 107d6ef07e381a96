import type { HistoryPage, PresencePage } from "../../protocol";
import { pusherRoom, PUSHER_LIMITS, type PusherChannel, type PusherChannelAttribute, type PusherChannelInfo, type PusherUserList } from "../../protocol/pusher";
import { readCoordinatorConfig } from "../../common/coordinator-config";
import { shardOf, shardStub } from "../../common/coordinator-shards";
import type { PusherApp } from "../../common/settings";
import type { Room } from "../../durable-objects/room/room";
import type { Env } from "../env";
import { attributesOf } from "./channel-attributes";

/**
 * The room of an app's channel, or null when it holds nothing (no socket, no
 * history): the directory is asked first, as GET /rooms/{room} asks it,
 * because instantiating a room that never existed would create its database.
 */
async function existingRoom(env: Env, app: PusherApp, channel: PusherChannel): Promise<DurableObjectStub<Room> | null> {
  const room = pusherRoom(app.id, channel.name);
  const shard = shardStub(env.COORDINATOR, shardOf(room, readCoordinatorConfig(env).shards));
  if (!(await shard.known(room))) return null;
  return env.ROOMS.get(env.ROOMS.idFromName(room));
}

/**
 * `GET /apps/{app_id}/channels/{channel}` (docs/pusher.md#the-http-api):
 * whether the channel has subscribers, and what `info` asked: its counts from
 * the room's stats, and on a cache channel its last event's data and the
 * seconds the room keeps it still (its history's age bound).
 */
export async function channelInfo(env: Env, app: PusherApp, channel: PusherChannel, info: ReadonlySet<PusherChannelAttribute>): Promise<PusherChannelInfo> {
  const stub = await existingRoom(env, app, channel);
  if (stub === null) return { occupied: false, ...attributesOf(channel, { connections: 0, members: 0 }, info) };
  const stats = await stub.stats();
  const answer: PusherChannelInfo = { occupied: stats.connections > 0, ...attributesOf(channel, stats, info) };
  if (info.has("cache") && channel.cache && stats.seq > 0) {
    const page = await stub.messages({ direction: "backward", after: null, before: null, limit: 1, rowHint: 0, epoch: null });
    const last = page.ok ? (JSON.parse(page.body) as HistoryPage).messages[0] : undefined;
    const ttl = last ? Math.floor(stats.retention.maxAgeSeconds - (Date.now() - last.ts) / 1000) : 0;
    if (last && last.seq === stats.seq && ttl > 0) answer.cache = { data: typeof last.data === "string" ? last.data : JSON.stringify(last.data), ttl };
  }
  return answer;
}

/**
 * `GET /apps/{app_id}/channels/{presence-…}/users`: the channel's members'
 * ids, from the room's presence (every object that holds them; a presence
 * channel has at most PUSHER_LIMITS.maxPresenceMembers).
 */
export async function channelUsers(env: Env, app: PusherApp, channel: PusherChannel): Promise<PusherUserList> {
  const stub = await existingRoom(env, app, channel);
  const users: PusherUserList["users"] = [];
  let cursor: string | null = null;
  if (stub !== null) {
    do {
      const page: PresencePage = await stub.presence(1000, cursor);
      for (const member of page.members) users.push({ id: member.id });
      cursor = page.cursor;
    } while (cursor !== null && users.length < 10 * PUSHER_LIMITS.maxPresenceMembers);
  }
  return { users };
}
