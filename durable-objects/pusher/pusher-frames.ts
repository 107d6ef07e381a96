import { CloseCode } from "../../protocol";
import {
  parsePusherChannel,
  parsePusherClientFrame,
  PUSHER_CLIENT_EVENT_REJECTED,
  PUSHER_LIMITS,
  PUSHER_PONG,
  pusherFrame,
  SERVER_TO_USER_PREFIX,
  pusherRoom,
  type PusherChannel,
  type PusherClientEvent,
  type PusherSignin,
  type PusherSubscribe,
} from "../../protocol/pusher";
import type { MemberIdentity } from "../../common/members";
import type { Limits, PusherApp } from "../../common/settings";
import { channelAuthorized, userAuthorized } from "../../common/pusher-signatures";
import { utf8Length } from "../../common/utf8";
import { logEvent } from "../../common/log";
import type { RoomCounters } from "../engine/counters";
import type { SocketEngine } from "../engine/socket-engine";
import type { SocketState } from "../engine/socket-state";
import { TokenBucket, type RatePolicy } from "../engine/token-bucket";
import type { FollowedRooms, FollowRefusal } from "../hub/followed-rooms";
import type { HubRoom } from "../hub/hub-room";
import type { PusherAttachment, PusherSubscription, SubscriptionRecords } from "./subscriptions";

/** Why a subscribe was refused, as `pusher:subscription_error` carries it to pusher-js and Echo's `.error()`. */
interface SubscriptionError {
  type: "AuthError" | "InvalidChannel" | "LimitReached" | "ServerError" | "AlreadySubscribed";
  error: string;
  status: number;
}

const CLIENT_EVENT_RATE: RatePolicy = { perSecond: PUSHER_LIMITS.clientEventsPerSecond, burst: PUSHER_LIMITS.clientEventsPerSecond };

/**
 * What a Pusher connection's frames do (docs/pusher.md): subscribes checked
 * against the app's signatures and Pusher's limits, then followed like any
 * multiplexed subscription; unsubscribes; sign-ins; client events published
 * into the channel's room (its sender skipped); and pongs, which acknowledge
 * what was sent before the server's ping. A refusal is a `pusher:error` or a
 * `pusher:subscription_error` and the connection stays; what a client library
 * never sends closes it.
 */
export class PusherFrames {
  readonly #app: PusherApp | null;
  readonly #limits: Limits;
  readonly #engine: SocketEngine;
  readonly #rooms: FollowedRooms;
  readonly #records: SubscriptionRecords;
  readonly #counters: RoomCounters;
  readonly #subscribeRate: RatePolicy;
  readonly #subscribeBudgets = new WeakMap<SocketState, TokenBucket>();
  readonly #clientEventBudgets = new WeakMap<SocketState, TokenBucket>();

  constructor(app: PusherApp | null, limits: Limits, engine: SocketEngine, rooms: FollowedRooms, records: SubscriptionRecords, counters: RoomCounters) {
    this.#app = app;
    this.#limits = limits;
    this.#engine = engine;
    this.#rooms = rooms;
    this.#records = records;
    this.#counters = counters;
    this.#subscribeRate = { perSecond: limits.SUBSCRIBES_PER_SECOND, burst: Math.max(1, limits.SUBSCRIBE_BURST) };
  }

  /** The room of one of the app's channels. */
  roomOf(channel: string): string {
    return pusherRoom(this.#app?.id ?? "", channel);
  }

  /** One text frame of a Pusher connection. */
  async handle(socket: SocketState, text: string, now: number): Promise<void> {
    const parsed = parsePusherClientFrame(text);
    if (!parsed.ok) {
      if (!this.#engine.frames.spend(socket, now)) return;
      this.#counters.refused("bad_frame");
      return this.#error(socket, null, parsed.error);
    }
    const frame = parsed.value;
    switch (frame.event) {
      case "pusher:ping":
        // The runtime answers pusher-js's exact ping for free; another spelling of it gets here, and
        // costs a frame token, so that a client that never reads cannot pile pongs up for free.
        if (!this.#engine.frames.spend(socket, now)) return;
        this.#engine.delivery.sendControl(socket, PUSHER_PONG);
        return;
      case "pusher:pong":
        if (this.#engine.delivery.answered(socket, now) === "forged") {
          this.#counters.refused("bad_ack");
          this.#engine.delivery.close(socket.ws, CloseCode.BAD_FRAME, "pusher:pong without a pusher:ping");
        }
        return;
      case "pusher:subscribe":
        return this.#subscribe(socket, frame, now);
      case "pusher:unsubscribe":
        if (!this.#engine.frames.spend(socket, now)) return;
        return this.#unsubscribe(socket, frame.channel);
      case "pusher:signin":
        if (!this.#engine.frames.spend(socket, now)) return;
        return this.#signin(socket, frame);
      default:
        if (!this.#engine.frames.spend(socket, now)) return;
        return this.#clientEvent(socket, frame, now);
    }
  }

  // -------------------------------------------------------------------------

  async #subscribe(socket: SocketState, frame: PusherSubscribe, now: number): Promise<void> {
    const refuse = (error: SubscriptionError): void => {
      this.#counters.refused(`subscribe_${error.type}`);
      // A refusal costs a frame token, so a client cannot have refusals for free.
      if (!this.#engine.frames.spend(socket, now)) return;
      this.#engine.delivery.sendControl(socket, pusherFrame("pusher:subscription_error", error, frame.channel));
    };
    let budget = this.#subscribeBudgets.get(socket);
    if (!budget) this.#subscribeBudgets.set(socket, (budget = new TokenBucket()));
    if (!budget.take(now, this.#subscribeRate)) return refuse({ type: "LimitReached", error: `over ${this.#subscribeRate.perSecond} subscribes per second`, status: 429 });
    const channel = parsePusherChannel(frame.channel);
    if (!channel) return refuse({ type: "InvalidChannel", error: "channel names are 1-164 characters of A-Z a-z 0-9 _ - = @ , . ;", status: 400 });
    const app = this.#app as PusherApp;
    const attachment = socket.attachment as PusherAttachment;
    let member: MemberIdentity | undefined;
    switch (channel.kind) {
      case "public":
        break;
      case "user":
        if (attachment.user !== channel.userId) return refuse({ type: "AuthError", error: "sign in as this user before subscribing to its channel", status: 403 });
        // The user is online while one of its connections follows its channel: its watchers see that.
        member = { id: channel.userId as string, verified: true };
        break;
      case "private":
      case "encrypted":
        if (!(await channelAuthorized(app, attachment.id, channel.name, frame.auth))) return refuse({ type: "AuthError", error: "the channel's authorization signature is not valid for this socket", status: 401 });
        break;
      case "presence": {
        if (frame.channelData === undefined || !(await channelAuthorized(app, attachment.id, channel.name, frame.auth, frame.channelData))) {
          return refuse({ type: "AuthError", error: "the channel's authorization signature is not valid for this socket and channel_data", status: 401 });
        }
        const parsed = presenceMember(frame.channelData);
        if (typeof parsed === "string") return refuse({ type: "AuthError", error: parsed, status: 400 });
        member = parsed;
        break;
      }
    }
    const room = this.roomOf(channel.name);
    if (this.#rooms.follows(socket, room)) return refuse({ type: "AlreadySubscribed", error: "the connection already follows this channel", status: 400 });
    let cacheMiss = false;
    const followed = await this.#rooms.follow(socket, room, {
      start: (hubRoom) => {
        if (!channel.cache) return { since: null, epoch: null, rewind: null };
        // A cache channel: its last event first, when this hub holds it.
        const latest = hubRoom.follower.stream.flushedSeq;
        if (latest > 0 && hubRoom.follower.ring.covers(latest)) return { since: latest - 1, epoch: hubRoom.follower.epoch, rewind: null };
        cacheMiss = true;
        return { since: null, epoch: null, rewind: null };
      },
      ...(member ? { as: { member } } : {}),
      ...(member && channel.kind === "presence" ? { admit: (hubRoom: HubRoom) => this.#presenceCap(hubRoom, member as MemberIdentity) } : {}),
    });
    if (followed === null) return;
    if (!("socket" in followed)) return refuse(subscriptionError(followed));
    this.#record(socket, (channels) => [...channels.filter((c) => c.channel !== channel.name), { channel: channel.name, ...(member ? { member } : {}) }]);
    if (cacheMiss) this.#cacheMiss(socket, channel);
  }

  /** A presence channel at Pusher's member cap takes no new member (one already there may open another connection). */
  #presenceCap(hubRoom: HubRoom, member: MemberIdentity): FollowRefusal | null {
    const presence = this.#engine.presence(hubRoom.follower.stream);
    const cap = Math.min(PUSHER_LIMITS.maxPresenceMembers, this.#limits.PRESENCE_MAX_MEMBERS);
    if (presence.count < cap || presence.has(member.id)) return null;
    return { code: "too_many_rooms", message: `the presence channel holds its maximum of ${cap} members` };
  }

  #cacheMiss(socket: SocketState, channel: PusherChannel): void {
    this.#engine.delivery.sendControl(socket, pusherFrame("pusher:cache_miss", {}, channel.name));
    // The room records Pusher's `cache_miss` webhook, from its outbox like every other.
    this.#rooms
      .root(this.roomOf(channel.name))
      .cacheMiss()
      .catch((error: unknown) => logEvent("error", { room: this.roomOf(channel.name), where: "cache_miss", error: String(error) }));
  }

  #unsubscribe(socket: SocketState, channel: string): void {
    const cursor = socket.cursors.get(this.roomOf(channel));
    // Pusher answers nothing to an unsubscribe, even of a channel the connection did not follow.
    if (!cursor) return;
    this.#rooms.end(cursor);
    this.#record(socket, (channels) => channels.filter((c) => c.channel !== channel));
  }

  async #signin(socket: SocketState, frame: PusherSignin): Promise<void> {
    const attachment = socket.attachment as PusherAttachment;
    if (!(await userAuthorized(this.#app as PusherApp, attachment.id, frame.userData, frame.auth))) {
      this.#counters.refused("signin_refused");
      this.#engine.delivery.close(socket.ws, CloseCode.UNAUTHORIZED, "the sign-in's signature is not valid for this socket");
      return;
    }
    const user = signedInUser(frame.userData);
    if (user === null) {
      this.#counters.refused("signin_refused");
      this.#engine.delivery.close(socket.ws, CloseCode.UNAUTHORIZED, `user_data must be a JSON object with an id of 1-${PUSHER_LIMITS.maxUserIdLength} characters, and a watchlist of at most ${PUSHER_LIMITS.maxWatchlist} ids`);
      return;
    }
    if (this.#engine.delivery.get(socket.ws) !== socket) return;
    // A connection is one user: signing in again as the same one changes nothing, as another is refused.
    if (attachment.user !== undefined) {
      if (attachment.user !== user.id) return this.#error(socket, null, `this connection is signed in as ${attachment.user}`);
      this.#engine.delivery.sendControl(socket, pusherFrame("pusher:signin_success", { user_data: frame.userData }));
      return;
    }
    attachment.user = user.id;
    this.#record(socket, (channels) => channels);
    this.#engine.delivery.sendControl(socket, pusherFrame("pusher:signin_success", { user_data: frame.userData }));
    await this.#watch(socket, user.watchlist.filter((id) => id !== user.id));
  }

  /**
   * The signed-in user's watchlist: each watched user's own channel is
   * followed for its presence only, so the connection hears when that user
   * comes online or goes offline (pusher-shape.ts) and none of its events.
   */
  async #watch(socket: SocketState, users: readonly string[]): Promise<void> {
    for (const user of users) {
      const channel = `${SERVER_TO_USER_PREFIX}${user}`;
      const followed = await this.#rooms.follow(socket, this.roomOf(channel), { start: { since: null, epoch: null, rewind: null }, as: { watching: true } });
      if (followed === null) return;
      if (!("socket" in followed)) {
        this.#error(socket, null, `the watchlist could not follow ${user}: ${followed.message}`);
        continue;
      }
      this.#record(socket, (channels) => [...channels, { channel, watch: true }]);
    }
  }

  async #clientEvent(socket: SocketState, frame: PusherClientEvent, now: number): Promise<void> {
    const app = this.#app as PusherApp;
    if (!app.clientEvents) return this.#error(socket, null, "client events are not enabled for this app (PUSHER_CLIENT_EVENTS)", frame.channel);
    const channel = parsePusherChannel(frame.channel);
    if (!channel || (channel.kind !== "private" && channel.kind !== "presence")) {
      return this.#error(socket, null, "client events go on private and presence channels only", frame.channel);
    }
    const cursor = socket.cursors.get(this.roomOf(channel.name));
    if (!cursor) return this.#error(socket, null, "subscribe to the channel before sending client events on it", frame.channel);
    let budget = this.#clientEventBudgets.get(socket);
    if (!budget) this.#clientEventBudgets.set(socket, (budget = new TokenBucket()));
    if (!budget.take(now, CLIENT_EVENT_RATE)) {
      this.#counters.refused("rate_limited");
      return this.#error(socket, PUSHER_CLIENT_EVENT_REJECTED, `over ${CLIENT_EVENT_RATE.perSecond} client events per second`, frame.channel);
    }
    const data = typeof frame.data === "string" ? frame.data : JSON.stringify(frame.data);
    if (utf8Length(data) > PUSHER_LIMITS.maxEventDataBytes) {
      this.#counters.refused("too_large");
      return this.#error(socket, null, `an event's data is at most ${PUSHER_LIMITS.maxEventDataBytes} bytes`, frame.channel);
    }
    const userId = channel.kind === "presence" ? cursor.member?.id : undefined;
    try {
      const outcome = await this.#rooms.root(cursor.stream.room).publish(JSON.stringify(data), {
        source: "pusher",
        fields: { event: frame.event, socketId: socket.attachment.id, ...(userId === undefined ? {} : { userId }) },
      });
      if ("refused" in outcome) this.#error(socket, null, outcome.refused.message, frame.channel);
    } catch (error) {
      logEvent("error", { room: cursor.stream.room, where: "client_event", error: String(error) });
      this.#error(socket, null, "the event could not be published; send it again", frame.channel);
    }
  }

  // -------------------------------------------------------------------------

  /** Changes the connection's recorded channels (they survive hibernation: subscriptions.ts). */
  #record(socket: SocketState, change: (channels: PusherSubscription[]) => PusherSubscription[]): void {
    const attachment = socket.attachment as PusherAttachment;
    this.#records.save(socket.ws, attachment, change(this.#records.list(attachment)));
  }

  /** A `pusher:error` (the connection stays); `code` null when Pusher has no code for it. */
  #error(socket: SocketState, code: number | null, message: string, channel?: string): void {
    if (this.#engine.delivery.get(socket.ws) !== socket) return;
    this.#engine.delivery.sendControl(socket, pusherFrame("pusher:error", { code, message }, channel));
  }
}

/** A follow refusal as `pusher:subscription_error` says it. */
function subscriptionError(refusal: FollowRefusal): SubscriptionError {
  switch (refusal.code) {
    case "too_many_rooms":
      return { type: "LimitReached", error: refusal.message, status: 4100 };
    case "forbidden":
      return { type: "AuthError", error: refusal.message, status: 403 };
    case "bad_request":
      return { type: "AlreadySubscribed", error: refusal.message, status: 400 };
    default:
      return { type: "ServerError", error: refusal.message, status: 500 };
  }
}

/** The member a presence channel's `channel_data` names (`{"user_id", "user_info"}`), or what is wrong with it. */
function presenceMember(channelData: string): MemberIdentity | string {
  let value: unknown;
  try {
    value = JSON.parse(channelData) as unknown;
  } catch {
    return "channel_data must be JSON";
  }
  if (typeof value !== "object" || value === null) return "channel_data must be a JSON object with a user_id";
  const { user_id: userId, user_info: userInfo } = value as { user_id?: unknown; user_info?: unknown };
  // Pusher's PHP and Ruby libraries send numeric ids as numbers.
  const id = typeof userId === "number" && Number.isFinite(userId) ? String(userId) : userId;
  if (typeof id !== "string" || id === "" || id.length > PUSHER_LIMITS.maxUserIdLength) {
    return `channel_data.user_id must be 1-${PUSHER_LIMITS.maxUserIdLength} characters`;
  }
  const member: MemberIdentity = { id, verified: true };
  if (userInfo !== undefined && userInfo !== null) {
    const info = JSON.stringify(userInfo);
    if (utf8Length(info) > PUSHER_LIMITS.maxUserInfoBytes) return `channel_data.user_info must be at most ${PUSHER_LIMITS.maxUserInfoBytes} bytes as JSON`;
    member.info = info;
  }
  return member;
}

/** The user a sign-in's `user_data` names (its id and watchlist), or null when it names none. */
function signedInUser(userData: string): { id: string; watchlist: string[] } | null {
  const isId = (id: unknown): id is string => typeof id === "string" && id !== "" && id.length <= PUSHER_LIMITS.maxUserIdLength && parsePusherChannel(`${SERVER_TO_USER_PREFIX}${id}`) !== null;
  try {
    const value = JSON.parse(userData) as { id?: unknown; watchlist?: unknown } | null;
    if (!isId(value?.id)) return null;
    const watchlist = value?.watchlist ?? [];
    if (!Array.isArray(watchlist) || watchlist.length > PUSHER_LIMITS.maxWatchlist || !watchlist.every(isId)) return null;
    return { id: value.id, watchlist: [...new Set(watchlist)] };
  } catch {
    return null;
  }
}
