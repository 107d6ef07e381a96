import type { MemberIdentity } from "../../common/members";
import type { SocketAttachment } from "../engine/attachment";

/** One channel a Pusher connection follows, and who it is there (a presence channel's member, or a signed-in user on its own channel). */
export interface PusherSubscription {
  channel: string;
  member?: MemberIdentity;
  /** A user's channel it only watches (its user's watchlist): who is online, none of its events. */
  watch?: true;
}

/** A Pusher connection's attachment: the socket's, its socket id as `id`, its channels and its signed-in user. */
export interface PusherAttachment extends SocketAttachment {
  /** The channels it follows, while they fit in the attachment. */
  channels?: PusherSubscription[];
  /** Set when they did not fit: they are in the hub's storage, under the socket's id. */
  stored?: true;
  /** The user it signed in as (`pusher:signin`). */
  user?: string;
}

/**
 * Bytes of attachment JSON a connection's channels may take: the platform
 * keeps at most 16 KiB per socket through hibernation, and the rest of the
 * attachment needs its share.
 */
export const ATTACHMENT_BUDGET = 12 * 1024;

/**
 * Where a Pusher connection's channels survive hibernation: in its attachment
 * while they fit (no write at all), else in one row of the hub's storage (a
 * connection following 100 presence channels with their members' data needs
 * far more than an attachment holds). A hub that never needs the table never
 * creates it.
 */
export class SubscriptionRecords {
  readonly #sql: SqlStorage;
  #table = false;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
  }

  /** The channels `attachment` says its connection follows. */
  list(attachment: PusherAttachment): PusherSubscription[] {
    if (!attachment.stored) return attachment.channels ?? [];
    if (!this.#ensureTable()) return [];
    const row = this.#sql.exec<{ channels: string }>("SELECT channels FROM pusher_subscriptions WHERE socket = ?", attachment.id).toArray()[0];
    return row ? (JSON.parse(row.channels) as PusherSubscription[]) : [];
  }

  /** Records `channels` as what the connection of `ws` follows, in its attachment or the table. */
  save(ws: WebSocket, attachment: PusherAttachment, channels: PusherSubscription[]): void {
    const inline = JSON.stringify(channels);
    if (inline.length <= ATTACHMENT_BUDGET) {
      if (attachment.stored) this.forget(attachment);
      delete attachment.stored;
      attachment.channels = channels;
    } else {
      this.#ensureTable(true);
      this.#sql.exec("INSERT INTO pusher_subscriptions (socket, channels) VALUES (?, ?) ON CONFLICT (socket) DO UPDATE SET channels = excluded.channels", attachment.id, inline);
      delete attachment.channels;
      attachment.stored = true;
    }
    try {
      ws.serializeAttachment(attachment);
    } catch {
      // Closing meanwhile: nothing of it needs to survive.
    }
  }

  /** The connection is gone: its row, if it had one, goes too. */
  forget(attachment: PusherAttachment): void {
    if (attachment.stored && this.#ensureTable()) this.#sql.exec("DELETE FROM pusher_subscriptions WHERE socket = ?", attachment.id);
  }

  /** Rows of connections that are gone (the hub restarted, which drops every socket without a close), deleted when the hub wakes. */
  prune(live: ReadonlySet<string>): void {
    if (!this.#ensureTable()) return;
    for (const row of this.#sql.exec<{ socket: string }>("SELECT socket FROM pusher_subscriptions").toArray()) {
      if (!live.has(row.socket)) this.#sql.exec("DELETE FROM pusher_subscriptions WHERE socket = ?", row.socket);
    }
  }

  /** Whether the table exists (made first when `create`). */
  #ensureTable(create = false): boolean {
    if (this.#table) return true;
    if (!create) {
      const found = this.#sql.exec<{ n: number }>("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'pusher_subscriptions'").one().n;
      if (found === 0) return false;
    } else {
      this.#sql.exec("CREATE TABLE IF NOT EXISTS pusher_subscriptions (socket TEXT PRIMARY KEY, channels TEXT NOT NULL)");
    }
    this.#table = true;
    return true;
  }
}
