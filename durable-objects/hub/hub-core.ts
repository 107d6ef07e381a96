import { CloseCode, isValidRoomName, MAX_ECHOED_ROOM_LENGTH, type AuthFrame, type AuthorizedEvent, type ErrorCode, type SubscribeFrame, type UnsubscribeFrame } from "../../protocol";
import { isPrivatePusherRoom } from "../../protocol/pusher";
import { grantsFromHeaders } from "../../common/edge-requests";
import { accessSettings } from "../../common/settings";
import { accessTo, grantsOf, verifyToken, type RoomGrant } from "../../common/tokens";
import { attachmentFromEdge, type SocketAttachment } from "../engine/attachment";
import type { Cursor } from "../engine/cursor";
import type { MultiplexFrames, SubscribeRefusal } from "../engine/client-frames";
import type { PublishOutcome, RetryKey } from "../engine/publish-outcome";
import type { SocketState } from "../engine/socket-state";
import { scopedShape, type StreamShape } from "../engine/stream-shape";
import { TokenBucket, type RatePolicy } from "../engine/token-bucket";
import { HubBase } from "./hub-base";

/** A multiplexed connection's attachment: the socket's, plus what its token grants and the rooms it follows. */
interface HubAttachment extends SocketAttachment {
  /** The rooms the connection's token opens (null: every room, with publishing: the service has no TOKEN_SECRET). */
  grants: RoomGrant[] | null;
  /** The rooms it follows, so that they are followed again when the hub wakes. */
  rooms: string[];
  /**
   * The start of the epoch each of `rooms` was followed under (same order), so
   * that a hub that wakes can tell a room whose history started over meanwhile
   * (an ephemeral room that restarted) and close the connection, as it would
   * awake. Absent in attachments written before it was kept.
   */
  epochs?: string[];
}

/** Characters of an epoch a connection's attachment keeps per room: enough to tell two apart, small beside 100 room names. */
const EPOCH_PREFIX = 8;

/**
 * A hub of multiplexed connections, its parts wired (HubBase), and what a
 * connection's own frames do: subscribe (checked against its token's grants),
 * unsubscribe, a fresh token. Every event names its room (scopedShape).
 */
export class HubCore extends HubBase implements MultiplexFrames {
  readonly #env: Record<string, unknown>;
  readonly #subscribeBudgets = new WeakMap<SocketState, TokenBucket>();
  readonly #subscribeRate: RatePolicy;

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env, "hub");
    this.#env = env;
    this.#subscribeRate = { perSecond: this.limits.SUBSCRIBES_PER_SECOND, burst: Math.max(1, this.limits.SUBSCRIBE_BURST) };
    // Connections that were here when the hub woke follow their rooms again; where each room
    // stands is asked of its root before anything is served (beforeFrame, or the root's next push).
    this.engine.restore((attachment) => {
      const { rooms = [], epochs } = attachment as HubAttachment;
      return rooms.map((room, i) => {
        const follower = this.rooms.roomFor(room).follower;
        const epoch = epochs?.[i];
        if (epoch) follower.expect(epoch);
        return { stream: follower.stream, seq: 0 };
      });
    });
  }

  async upgrade(request: Request): Promise<Response> {
    const full = this.full();
    if (full) return full;
    const attachment: HubAttachment = { ...attachmentFromEdge(request.headers, Date.now()), grants: grantsFromHeaders(request.headers), rooms: [] };
    return this.engine.acceptConnection(attachment);
  }

  shapeOf(room: string): StreamShape {
    return scopedShape(room);
  }

  get multiplexed(): MultiplexFrames {
    return this;
  }

  /** A connection publishes into a room: the room's root runs beforePublish, if its class has one, and may refuse. */
  async publishFrom(cursor: Cursor, dataJson: string, retry?: RetryKey): Promise<PublishOutcome> {
    // The root hashes the data itself (it arrives as the connection sent it) and looks the key up.
    return this.rooms.root(cursor.stream.room).publish(dataJson, retry ? { source: "multiplexed", retryKey: retry.key } : { source: "multiplexed" });
  }

  // -------------------------------------------------------------------------
  // A connection's own frames
  // -------------------------------------------------------------------------

  /** Follows `frame.room` for the connection, or says why not (ClientFrames charges and sends the refusal). */
  async subscribe(socket: SocketState, frame: SubscribeFrame): Promise<SubscribeRefusal | null> {
    const { room } = frame;
    const refuse = (code: ErrorCode, message: string): SubscribeRefusal => {
      this.counters.refused(`subscribe_${code}`);
      const named = room.length <= MAX_ECHOED_ROOM_LENGTH ? { room } : {};
      return { type: "error", ...named, code, message, ...(frame.id === undefined ? {} : { id: frame.id }) };
    };
    let budget = this.#subscribeBudgets.get(socket);
    if (!budget) this.#subscribeBudgets.set(socket, (budget = new TokenBucket()));
    if (!budget.take(Date.now(), this.#subscribeRate)) return refuse("rate_limited", `over ${this.#subscribeRate.perSecond} subscribes per second`);
    if (!isValidRoomName(room)) return refuse("bad_room", "not a room name: 1-64 letters, digits and . _ : ~ -, starting with a letter or digit");
    const attachment = socket.attachment as HubAttachment;
    // Open mode opens every room but those of channels Pusher keeps private.
    if (attachment.grants === null ? isPrivatePusherRoom(room) : accessTo(attachment.grants, room) === null) {
      return refuse("forbidden", "the connection's token does not open this room");
    }
    const followed = await this.rooms.follow(socket, room, { start: { since: frame.since ?? null, epoch: frame.epoch ?? null, rewind: null } });
    if (followed === null) return null;
    if (!("socket" in followed)) return refuse(followed.code, followed.message);
    // Rooms followed before epochs were kept have none (""): nothing to compare them with.
    attachment.epochs ??= attachment.rooms.map(() => "");
    attachment.rooms.push(room);
    attachment.epochs.push(this.rooms.roomFor(room).follower.epoch.slice(0, EPOCH_PREFIX));
    this.#persist(socket);
    return null;
  }

  unsubscribe(socket: SocketState, frame: UnsubscribeFrame): void {
    const cursor = socket.cursors.get(frame.room);
    if (!cursor) {
      this.engine.delivery.sendAnswer(socket, JSON.stringify({ type: "error", room: frame.room, code: "not_subscribed", message: "the connection does not follow this room", ...(frame.id === undefined ? {} : { id: frame.id }) }));
      return;
    }
    this.#end(cursor);
  }

  async authorize(socket: SocketState, frame: AuthFrame): Promise<void> {
    const secret = accessSettings(this.#env).tokenSecret;
    if (secret === null) {
      this.engine.delivery.sendAnswer(socket, JSON.stringify({ type: "error", code: "bad_request", message: "the service takes no tokens (no TOKEN_SECRET)" }));
      return;
    }
    const check = await verifyToken(frame.token, secret);
    if (this.engine.delivery.get(socket.ws) !== socket) return;
    if (!check.ok) {
      this.counters.refused(check.reason);
      this.engine.delivery.close(socket.ws, CloseCode.UNAUTHORIZED, check.message);
      return;
    }
    const attachment = socket.attachment as HubAttachment;
    // The connection is one member in every room it follows: a token for another would change who it is.
    if ((attachment.member?.verified ? attachment.member.id : undefined) !== check.claims.sub) {
      this.counters.refused("token_member_changed");
      this.engine.delivery.close(socket.ws, CloseCode.FORBIDDEN, "a fresh token must be for the same member (sub)");
      return;
    }
    attachment.grants = grantsOf(check.claims);
    attachment.expiresAt = Math.min(Math.floor(check.claims.exp * 1000), Number.MAX_SAFE_INTEGER);
    for (const cursor of [...socket.cursors.values()]) {
      if (accessTo(attachment.grants, cursor.stream.room) === null) this.#end(cursor, { code: "forbidden", reason: "the connection's new token does not open this room" });
    }
    this.#persist(socket);
    const authorized: AuthorizedEvent = { type: "authorized", exp: check.claims.exp };
    this.engine.delivery.sendAnswer(socket, JSON.stringify(authorized));
  }

  mayPublish(socket: SocketState, room: string): boolean {
    const grants = (socket.attachment as HubAttachment).grants;
    if (grants === null) return socket.attachment.canPublish && !isPrivatePusherRoom(room);
    return accessTo(grants, room)?.pub === true;
  }

  // -------------------------------------------------------------------------

  /** The connection stops following `cursor`'s room. */
  #end(cursor: Cursor, why?: { code: ErrorCode; reason: string }): void {
    const { socket, stream } = cursor;
    this.rooms.end(cursor, why);
    const attachment = socket.attachment as HubAttachment;
    const at = attachment.rooms.indexOf(stream.room);
    if (at >= 0) {
      attachment.rooms.splice(at, 1);
      attachment.epochs?.splice(at, 1);
    }
    this.#persist(socket);
  }

  #persist(socket: SocketState): void {
    try {
      socket.ws.serializeAttachment(socket.attachment);
    } catch {
      // Closing meanwhile: nothing of it needs to survive.
    }
  }
}
