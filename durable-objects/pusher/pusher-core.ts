import { CloseCode } from "../../protocol";
import { channelOfRoom, parsePusherChannel, PUSHER_ACTIVITY_TIMEOUT_SECONDS, pusherFrame } from "../../protocol/pusher";
import { pusherSettings, type PusherApp } from "../../common/settings";
import type { ForeignFrames } from "../engine/client-frames";
import type { PublishOutcome } from "../engine/publish-outcome";
import type { SocketState } from "../engine/socket-state";
import { ROOM_SHAPE, type StreamShape } from "../engine/stream-shape";
import { HubBase } from "../hub/hub-base";
import { PUSHER_DIALECT } from "./pusher-dialect";
import { PusherFrames } from "./pusher-frames";
import { PusherShape } from "./pusher-shape";
import { SubscriptionRecords, type PusherAttachment } from "./subscriptions";

/** A socket id as Pusher's server SDKs accept it: two unsigned integers and a dot, unguessable. */
function newSocketId(): string {
  const words = crypto.getRandomValues(new Uint32Array(2));
  return `${words[0]}.${words[1]}`;
}

/**
 * A hub of Pusher connections, its parts wired: a hub (HubBase: the engine,
 * in Pusher's dialect, and the channels' rooms its connections follow, as a
 * hub of multiplexed connections follows them), what a Pusher connection's
 * frames do (PusherFrames), each channel's events written in Pusher
 * (PusherShape), and where a connection's channels survive hibernation.
 */
export class PusherCore extends HubBase implements ForeignFrames {
  /** The app the front door serves; null when it is off (no connection reaches a hub then). */
  readonly #app: PusherApp | null;
  readonly #records: SubscriptionRecords;
  readonly #frames: PusherFrames;

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env, "pusher", PUSHER_DIALECT);
    this.#app = pusherSettings(env).app;
    this.#records = new SubscriptionRecords(ctx.storage.sql);
    this.#frames = new PusherFrames(this.#app, this.limits, this.engine, this.rooms, this.#records, this.counters);
    // Connections that were here when the hub woke follow their channels again, each as the
    // member it was there; where each room stands is asked of its root before anything is served.
    const live = new Set<string>();
    this.engine.restore((attachment) => {
      const pusher = attachment as PusherAttachment;
      live.add(pusher.id);
      return this.#records.list(pusher).map((subscription) => ({
        stream: this.rooms.roomFor(this.#frames.roomOf(subscription.channel)).follower.stream,
        seq: 0,
        as: { ...(subscription.member ? { member: subscription.member } : {}), ...(subscription.watch ? { watching: true as const } : {}) },
      }));
    });
    this.#records.prune(live);
  }

  /** A Pusher connection the edge checked (app key, protocol version): `pusher:connection_established` with its socket id. */
  async upgrade(): Promise<Response> {
    if (this.#app === null) return Response.json({ error: "not_found", message: "the Pusher front door is off" }, { status: 404 });
    const full = this.full();
    if (full) return full;
    const attachment: PusherAttachment = { id: newSocketId(), connectedAt: Date.now(), canPublish: false, expiresAt: null };
    const welcome = pusherFrame("pusher:connection_established", { socket_id: attachment.id, activity_timeout: PUSHER_ACTIVITY_TIMEOUT_SECONDS });
    return this.engine.acceptConnection(attachment, welcome);
  }

  shapeOf(room: string): StreamShape {
    const held = channelOfRoom(room);
    const channel = held === null ? null : parsePusherChannel(held.channel);
    // Only channels' rooms are followed from here; anything else would reach no Pusher client.
    return channel ? new PusherShape(channel) : ROOM_SHAPE;
  }

  /** Closes the connections of a signed-in user (`terminate_connections`); returns how many. */
  terminate(user: string): number {
    let closed = 0;
    for (const socket of [...this.engine.delivery.sockets()]) {
      if ((socket.attachment as PusherAttachment).user !== user) continue;
      this.engine.delivery.close(socket.ws, CloseCode.FORBIDDEN, "connections of this user were terminated by the app");
      closed += 1;
    }
    return closed;
  }

  get foreign(): ForeignFrames {
    return this;
  }

  frame(socket: SocketState, text: string, now: number): Promise<void> {
    return this.#frames.handle(socket, text, now);
  }

  /** Pusher connections publish client events through PusherFrames, never through the engine's publish frames. */
  async publishFrom(): Promise<PublishOutcome> {
    return { refused: { error: "forbidden", message: "a Pusher connection publishes client events" } };
  }

  override left(socket: SocketState): void {
    super.left(socket);
    this.#records.forget(socket.attachment as PusherAttachment);
  }
}
