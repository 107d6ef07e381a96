import { utf8Length } from "../../common/utf8";

/**
 * One message as the room handles it: its serialized `message` event (the
 * exact text sent on the wire and kept in history, so it is serialized once
 * and never again) with the facts the fan-out needs beside it.
 */
export interface Message {
  seq: number;
  /** The receipt tag inside `event`; an ack must echo it. */
  tag: number;
  /** The serialized ServerMessage. */
  event: string;
  /** UTF-8 length of `event`: what it costs a socket's window. */
  bytes: number;
  /**
   * The id of a socket this message is not sent to (the Pusher front door's: a client event's
   * sender, or the socket an HTTP publisher excluded). Its cursor moves past it all the same.
   */
  skip?: string;
}

/**
 * What a message carries besides its data when it came through the Pusher
 * front door (docs/pusher.md): its event name, the socket it is not sent to,
 * and a presence channel's client event's sender.
 */
export interface MessageFields {
  event?: string;
  socketId?: string;
  userId?: string;
}

/** The fields as JSON members written after `seq` (empty for a message without them). */
function fieldsText(fields: MessageFields | undefined): string {
  if (fields === undefined) return "";
  let text = "";
  if (fields.event !== undefined) text += `,"event":${JSON.stringify(fields.event)}`;
  if (fields.socketId !== undefined) text += `,"socket_id":${JSON.stringify(fields.socketId)}`;
  if (fields.userId !== undefined) text += `,"user_id":${JSON.stringify(fields.userId)}`;
  return text;
}

/**
 * Builds a message event around data that is already JSON text. The tag is
 * written last so it can be read back from stored text without parsing it.
 */
export function messageEvent(seq: number, dataJson: string, ts: number, tag: number, fields?: MessageFields): Message {
  const event = `{"type":"message","seq":${seq}${fieldsText(fields)},"data":${dataJson},"ts":${ts},"tag":${tag}}`;
  return { seq, tag, event, bytes: utf8Length(event) };
}

const MESSAGE_HEAD = '{"type":"message",';

/**
 * A message as a multiplexed connection gets it: the same event with the
 * room's name after its type (its tag stays last, so tagOf still reads it).
 * Room names are ASCII, so the bytes grow by the text added.
 */
export function scopedMessage(room: string, message: Message): Message {
  const head = `{"type":"message","room":${JSON.stringify(room)},`;
  return { seq: message.seq, tag: message.tag, event: head + message.event.slice(MESSAGE_HEAD.length), bytes: message.bytes + head.length - MESSAGE_HEAD.length };
}

/** The tag of a stored event built by `messageEvent`. */
export function tagOf(event: string): number {
  return Number(event.slice(event.lastIndexOf(":") + 1, -1));
}

const POOL_SIZE = 1024;

/**
 * Unpredictable 32-bit tags. A tag is what makes an ack a proof of receipt,
 * so it comes from the platform's CSPRNG (Math.random's state can be
 * recovered from its outputs); drawing them in blocks keeps that to one call
 * per thousand messages.
 */
export class TagSource {
  readonly #pool = new Uint32Array(POOL_SIZE);
  #next = POOL_SIZE;

  next(): number {
    if (this.#next === POOL_SIZE) {
      crypto.getRandomValues(this.#pool);
      this.#next = 0;
    }
    return this.#pool[this.#next++] as number;
  }
}
