import { channelOfRoom, PUSHER_PING, pusherRoom, type PusherEvent } from "../../../protocol/pusher";
import type { ServerEvent } from "../../../protocol";
import { MuxLoadClient } from "./mux-client";
import { publisherSendTime } from "./socket-client";

/** The app a load run's Pusher connections belong to (the spawned server is given it). */
export const LOAD_PUSHER_APP = { id: "1", key: "load-key", secret: "load-secret" } as const;

/** The room of a load run's channel `channel`. */
export function loadPusherRoom(channel: string): string {
  return pusherRoom(LOAD_PUSHER_APP.id, channel);
}

/**
 * One simulated Pusher connection (`/app/{key}`, docs/pusher.md), following
 * the channels of its rooms: the multiplexed connection's subscribe storm and
 * ledgers (MuxLoadClient), spoken in Pusher. Pusher events carry no seq, so a
 * channel's n-th event after its subscribe is seq n of the room (the run's
 * rooms are new, so their seqs start at 1), and their latency is measured from
 * the publisher's send time in the payload. A Pusher connection acknowledges
 * nothing: it answers the server's pings, which is what releases its window.
 * It cannot resume: after a reconnect a channel's count starts again.
 */
export class PusherLoadClient extends MuxLoadClient {
  readonly #counts = new Map<string, number>();

  protected override socketPath(): string {
    return `/app/${LOAD_PUSHER_APP.key}?protocol=7&client=load&version=1.0`;
  }

  protected override pingFrame(): string {
    return PUSHER_PING;
  }

  protected override subscribeFrame(room: string): string {
    const channel = channelOfRoom(room)?.channel ?? room;
    return JSON.stringify({ event: "pusher:subscribe", data: { channel } });
  }

  protected override readFrame(text: string, now: number): boolean {
    let frame: PusherEvent;
    try {
      frame = JSON.parse(text) as PusherEvent;
    } catch {
      this.stats.parseErrors++;
      return false;
    }
    const room = frame.channel === undefined ? undefined : loadPusherRoom(frame.channel);
    const data = typeof frame.data === "string" ? parsed(frame.data) : frame.data;
    switch (frame.event) {
      case "pusher:connection_established":
        return this.onEvent(asEvent({ type: "welcome", window: 0 }), now);
      case "pusher:ping":
        this.send('{"event":"pusher:pong","data":{}}');
        return false;
      case "pusher:pong":
        this.stats.pongs++;
        return false;
      case "pusher_internal:subscription_succeeded":
        if (room === undefined) return false;
        this.#counts.set(room, 0);
        return this.onEvent(asEvent({ type: "subscribed", room, seq: 0, epoch: "pusher" }), now);
      case "pusher:subscription_error":
        return room === undefined ? false : this.onEvent(asEvent({ type: "error", room, code: "forbidden", message: JSON.stringify(data) }), now);
      case "pusher:error":
        this.stats.errorEvents++;
        return false;
      default: {
        if (room === undefined || frame.event.startsWith("pusher")) return false;
        const seq = (this.#counts.get(room) ?? 0) + 1;
        this.#counts.set(room, seq);
        const welcomed = this.onEvent(asEvent({ type: "message", room, seq, ts: publisherSendTime(data) ?? now, tag: 0, data }), now);
        // Pusher has no acks: what the base class would send is never owed.
        this.toAck = null;
        return welcomed;
      }
    }
  }

  protected override socketGone(): void {
    this.#counts.clear();
    super.socketGone();
  }
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** A Pusher event as the event of this service's protocol it stands for, for the multiplexed connection's handling. */
function asEvent(event: Record<string, unknown>): ServerEvent {
  return event as unknown as ServerEvent;
}
