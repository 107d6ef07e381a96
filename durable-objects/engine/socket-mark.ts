import type { SocketAttachment } from "./attachment";
import type { Delivery } from "./delivery";
import type { SocketState } from "./socket-state";

/** Where an object stood in a room: the latest seq its sockets are level with, and the epoch that seq belongs to. */
export interface StreamMark {
  seq: number;
  epoch: string;
}

/** An attachment that may carry a mark. */
export interface MarkedAttachment extends SocketAttachment {
  mark?: StreamMark;
}

/**
 * Where an object that keeps a room's messages in memory stands (a leaf of a
 * sharded room, an ephemeral room), kept where it survives hibernation with
 * no row written: in the attachment of one of its sockets (the holder),
 * rewritten each time the object moves on (one write, however many sockets).
 * A socket is accepted with the mark of that moment in its attachment too, so
 * the highest mark over the sockets still open is where the object stood
 * when it hibernated (highestMark). Nothing survives a restart this way: the
 * sockets do not either.
 */
export class SocketMark {
  readonly #delivery: Delivery;
  #holder: SocketState | null = null;

  constructor(delivery: Delivery) {
    this.#delivery = delivery;
  }

  /** Writes `mark` into the holder's attachment; the first socket holds it when the holder is gone. */
  write(mark: StreamMark): void {
    let holder = this.#holder !== null && this.#delivery.get(this.#holder.ws) === this.#holder ? this.#holder : null;
    // The holder left without the caller's hook running (it cannot always): start over with the first socket.
    holder ??= this.#delivery.sockets().next().value ?? null;
    this.#holder = holder;
    if (!holder) return;
    (holder.attachment as MarkedAttachment).mark = mark;
    try {
      holder.ws.serializeAttachment(holder.attachment);
    } catch {
      // Closing meanwhile: its leave moves the mark on.
    }
  }

  /** A socket left: true when it held the mark, which the caller then writes again (onto another socket). */
  left(socket: SocketState): boolean {
    if (socket !== this.#holder) return false;
    this.#holder = null;
    return true;
  }
}

/** The highest mark the attachments carry (of sockets that were open when the object woke), or null when none does. */
export function highestMark(attachments: Iterable<SocketAttachment | null>): StreamMark | null {
  let highest: StreamMark | null = null;
  for (const attachment of attachments) {
    const mark = (attachment as MarkedAttachment | null)?.mark;
    if (mark && (highest === null || mark.seq > highest.seq)) highest = mark;
  }
  return highest;
}
