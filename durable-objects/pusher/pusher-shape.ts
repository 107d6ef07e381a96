import type { PresenceEvent, PresenceMember } from "../../protocol";
import { pusherFrame, type PusherChannel } from "../../protocol/pusher";
import { utf8Length } from "../../common/utf8";
import type { Cursor } from "../engine/cursor";
import type { Message } from "../engine/message";
import type { StreamEvent, StreamShape } from "../engine/stream-shape";

/** The event name a message published through this service's own API carries on a Pusher connection. */
export const OWN_PROTOCOL_EVENT = "message";

/** A stored message event, as far as a Pusher connection needs it. */
interface StoredMessage {
  event?: string;
  socket_id?: string;
  user_id?: string;
  data?: unknown;
}

/**
 * How one channel's events look on a Pusher connection (docs/pusher.md):
 * - a message is an event of its name (`message` for one published through
 *   this service's own API), its data a string (Pusher's double encoding);
 *   a client event's sender, or the socket an HTTP publisher excluded, is
 *   skipped; a presence channel's client event carries `user_id`;
 * - a subscribe is answered `pusher_internal:subscription_succeeded`, on a
 *   presence channel with its members, so it waits for the presence picture;
 * - a presence picture is `subscription_succeeded` with the members (a
 *   connection that fell behind on presence gets the whole picture again,
 *   which Laravel Echo's `here` and pusher-js's members take as the current
 *   list); a join is `pusher_internal:member_added`, a leave `member_removed`;
 * - a user's own channel (`#server-to-user-{id}`) has that user as its one
 *   member while it is signed in anywhere: to the connections that watch the
 *   user (their watchlist), its presence is `pusher_internal:watchlist_events`,
 *   `online` when it joins (or is there when they start watching) and
 *   `offline` when it leaves;
 * - what Pusher has no word for (a loss, a count above the member cap, an
 *   unsubscribe's answer) is not sent.
 * A message is written once per hub, however many connections follow the channel.
 */
export class PusherShape implements StreamShape {
  readonly #channel: PusherChannel;
  readonly #presence: boolean;

  constructor(channel: PusherChannel) {
    this.#channel = channel;
    this.#presence = channel.kind === "presence";
  }

  /** A user's channel: its presence is whether the user is online, for those who watch it. */
  #watchlist(event: PresenceEvent, cursor: Cursor | null): string | null {
    const user = this.#channel.userId as string;
    switch (event.action) {
      case "sync":
        // To a watcher that starts watching: online if the user is; the user's own connections are told nothing.
        return cursor?.watching && event.count > 0 ? watchlistEvent("online", user) : null;
      case "join":
        return watchlistEvent("online", user);
      case "leave":
        return watchlistEvent("offline", user);
      case "count":
        return null;
    }
  }

  message(message: Message): Message {
    const stored = JSON.parse(message.event) as StoredMessage;
    const data = typeof stored.data === "string" ? stored.data : JSON.stringify(stored.data ?? null);
    let text = pusherFrame(stored.event ?? OWN_PROTOCOL_EVENT, data, this.#channel.name);
    if (this.#presence && stored.user_id !== undefined) text = `${text.slice(0, -1)},"user_id":${JSON.stringify(stored.user_id)}}`;
    const shaped: Message = { seq: message.seq, tag: message.tag, event: text, bytes: utf8Length(text) };
    if (stored.socket_id !== undefined) shaped.skip = stored.socket_id;
    return shaped;
  }

  event(event: StreamEvent): string | null {
    // A presence channel's subscribe is answered with its members, by the first presence picture.
    if (event.type === "subscribed" && !this.#presence) return pusherFrame("pusher_internal:subscription_succeeded", {}, this.#channel.name);
    return null;
  }

  presence(event: PresenceEvent, cursor: Cursor | null): string | null {
    if (this.#channel.kind === "user") return this.#watchlist(event, cursor);
    if (!this.#presence) return null;
    switch (event.action) {
      case "sync":
        return pusherFrame("pusher_internal:subscription_succeeded", { presence: presenceData(event.members ?? [], event.count) }, this.#channel.name);
      case "join":
        return pusherFrame("pusher_internal:member_added", { user_id: event.member.id, user_info: event.member.info ?? null }, this.#channel.name);
      case "leave":
        return pusherFrame("pusher_internal:member_removed", { user_id: event.member.id }, this.#channel.name);
      case "count":
        return null;
    }
  }
}

/** What pusher-js's watchlist listens for: a user came online or went offline. */
function watchlistEvent(name: "online" | "offline", user: string): string {
  return pusherFrame("pusher_internal:watchlist_events", { events: [{ name, user_ids: [user] }] });
}

/** A presence channel's members as `subscription_succeeded` carries them: ids, a hash of id to user_info, and the count. */
function presenceData(members: readonly PresenceMember[], count: number): { ids: string[]; hash: Record<string, unknown>; count: number } {
  const hash: Record<string, unknown> = {};
  for (const member of members) hash[member.id] = member.info ?? null;
  return { ids: members.map((m) => m.id), hash, count: Math.max(count, members.length) };
}
