import type { PusherChannel, PusherChannelAttribute, PusherChannelAttributes } from "../../protocol/pusher";

/** What a published event's answer may say of its channels. */
export type EventAttribute = Exclude<PusherChannelAttribute, "cache">;

/** A channel's counts, as a room's stats or the live-room listing have them. */
export interface ChannelCounts {
  /** Subscriptions: every socket that follows the room (Pusher connections, multiplexed ones, the room's own). */
  connections: number;
  /** Distinct presence members (users). */
  members: number;
}

/** `info=a,b` as a set of the attributes `allowed` names; an attribute it does not name is refused. */
export function parseAttributes(
  value: unknown,
  allowed: readonly PusherChannelAttribute[],
): { ok: true; value: ReadonlySet<PusherChannelAttribute> } | { ok: false; message: string } {
  if (value === undefined || value === null || value === "") return { ok: true, value: new Set() };
  if (typeof value !== "string") return { ok: false, message: "info must be a comma-separated string of attributes" };
  const set = new Set<PusherChannelAttribute>();
  for (const name of value.split(",").map((n) => n.trim())) {
    if (name === "") continue;
    if (!(allowed as readonly string[]).includes(name)) return { ok: false, message: `info may ask for ${allowed.join(", ")}; not ${JSON.stringify(name.slice(0, 64))}` };
    set.add(name as PusherChannelAttribute);
  }
  return { ok: true, value: set };
}

/** The attributes `info` asked of `channel`: `user_count` only where there are users, a presence channel. */
export function attributesOf(channel: PusherChannel, counts: ChannelCounts, info: ReadonlySet<PusherChannelAttribute>): PusherChannelAttributes {
  const attributes: PusherChannelAttributes = {};
  if (info.has("user_count") && channel.kind === "presence") attributes.user_count = counts.members;
  if (info.has("subscription_count")) attributes.subscription_count = counts.connections;
  return attributes;
}
