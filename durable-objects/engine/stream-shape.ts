import type { LostEvent, PresenceEvent, PublishedEvent, ServerError, SubscribedEvent, UnsubscribedEvent } from "../../protocol";
import type { Cursor } from "./cursor";
import { scopedMessage, type Message } from "./message";

/** The events of one room that are not messages: what the engine tells a socket about its place in the room. */
export type StreamEvent = SubscribedEvent | UnsubscribedEvent | LostEvent | PublishedEvent | ServerError;

/**
 * How the events of one room look on the wire of the sockets that follow it
 * on an object. A room's own sockets and a leaf's speak this service's
 * protocol; multiplexed connections speak it with the room's name in every
 * event; the Pusher front door's connections speak Pusher (pusher/pusher-shape.ts).
 * The engine decides what happens (a message, a loss, a join); the shape
 * only says how it is written, and may say nothing (null) for an event its
 * protocol has no word for.
 */
export interface StreamShape {
  /** A message as this object's sockets get it (what its source keeps for them). Called once per message per object. */
  message(message: Message): Message;
  /** An event about a socket's place in the room, as text, or null when such sockets are not told. */
  event(event: StreamEvent, cursor: Cursor | null): string | null;
  /**
   * A presence event as text: for one socket (`cursor`: a `sync`, whose picture is its own),
   * or for every socket at once (`cursor` null: joins, leaves, counts). Null: not sent.
   */
  presence(event: PresenceEvent, cursor: Cursor | null): string | null;
}

/** This service's protocol on a room's own socket: events as they are, without the room's name. */
export const ROOM_SHAPE: StreamShape = {
  message: (message) => message,
  event: (event) => JSON.stringify(event),
  presence: (event) => JSON.stringify(event),
};

/** This service's protocol on a multiplexed connection: every event names `room`, right after its type. */
export function scopedShape(room: string): StreamShape {
  const label = <T extends { type: string }>(event: T): string => {
    const { type, ...rest } = event;
    return JSON.stringify({ type, room, ...rest });
  };
  return {
    message: (message) => scopedMessage(room, message),
    event: (event) => label(event),
    presence: (event) => label(event),
  };
}
