import { PublishError } from "./events.js";
import type { CustomClientFrame, ServerError, PublishedEvent, WelcomeEvent } from "../../protocol/index.js";
import { utf8Length } from "../../common/utf8.js";
import { RateBudget } from "./rate-budget.js";
import { describe } from "./transport.js";

/** Where publishes go out: the connection. */
export interface OutboxTransport {
  /** Whether a frame sent now goes out on an open connection. */
  readonly writable: boolean;
  send(text: string): boolean;
}

/** A frame waiting for the budget, with the promise it settles. */
interface Queued {
  /** The frame as it goes on the wire. */
  text: string;
  /** A publish's correlation id, which its answer names; an application frame has none and is done once sent. */
  id?: string;
  /** A publish: UTF-8 bytes of its data as JSON, what the room's message limit counts. */
  dataBytes?: number;
  /** On a multiplexed connection, the room it goes to. */
  room?: string;
  /** Whether it may go now (a room's publish waits until the room is subscribed); absent: always. */
  ready?: () => boolean;
  resolve(seq: number): void;
  reject(error: PublishError): void;
}

/**
 * Publishes over the socket, inside the room's frame budget. The welcome
 * announces how many client frames per second the room takes (over it, it
 * closes with 4009); acks that free the window are free, publishes are not.
 * So publishes wait here and leave at three quarters of the announced rate,
 * from half the burst, which leaves room for timing slack. A publish not yet
 * sent survives a reconnect (the server never saw it); one sent and not yet
 * answered when the connection ends is rejected as "unconfirmed".
 * A publish whose data is over the message limit the welcome announces is
 * refused here with "too_large" instead of being sent: it would cost a frame
 * of the budget only to be refused by the room.
 * Application frames (`x-...`) take the same budget and queue, in order with
 * publishes, and are done once sent.
 *
 * On a multiplexed connection the publishes of every room share the one
 * budget; a room's publishes wait while the room is not subscribed, and the
 * other rooms' go past them. Frames of the connection's own (subscribes)
 * spend the same budget (`budget`, shared with the Outbox).
 */
export class Outbox {
  #transport: OutboxTransport;
  /** Frames not yet sent. */
  #queued: Queued[] = [];
  /** Publishes sent and awaiting the server's answer, by id. */
  #pending = new Map<string, Queued>();
  /** The current connection's limit on message data; none from a server that does not announce one. */
  #maxMessageBytes: number | undefined;
  #budget: RateBudget;
  #pumpTimer: ReturnType<typeof setTimeout> | undefined;
  #nextId = 0;

  /** @param budget the connection's frame budget, when other frames spend it too. */
  constructor(transport: OutboxTransport, budget = new RateBudget()) {
    this.#transport = transport;
    this.#budget = budget;
  }

  /**
   * Queues `data` for publishing; settles with its seq or a PublishError.
   * @param room the room, on a multiplexed connection.
   * @param ready whether it may go now; it waits in the queue while not.
   */
  publish(data: unknown, room?: string, ready?: () => boolean): Promise<number> {
    return new Promise((resolve, reject) => {
      const id = String(++this.#nextId);
      // Encoded once, now: the data's JSON is both what the limit measures and what is sent.
      const json = encode(data, reject);
      if (json === undefined) return;
      // The id is digits only and room names have no character JSON escapes, so the frame
      // can be put together around the data's text.
      const to = room === undefined ? "" : `"room":"${room}",`;
      this.#enqueue({ text: `{"type":"publish",${to}"id":"${id}","data":${json}}`, id, dataBytes: utf8Length(json), room, ready, resolve, reject });
    });
  }

  /** Queues an application frame; settles once it was sent (or rejects when the client closes first). */
  sendCustom(frame: CustomClientFrame): Promise<void> {
    return new Promise((resolve, reject) => {
      const text = encode(frame, reject);
      if (text !== undefined) this.#enqueue({ text, resolve: () => resolve(), reject });
    });
  }

  /** A new connection was welcomed with its frame budget and message limit. */
  welcome(welcome: Pick<WelcomeEvent, "rate" | "maxMessageBytes">): void {
    this.#maxMessageBytes = welcome.maxMessageBytes;
    this.#budget.reset(welcome.rate);
  }

  /** Sends queued frames as far as the budget allows; retries when it has refilled. */
  pump(): void {
    clearTimeout(this.#pumpTimer);
    this.#pumpTimer = undefined;
    if (!this.#transport.writable) return;
    const limit = this.#maxMessageBytes;
    for (let i = 0; i < this.#queued.length; ) {
      const next = this.#queued[i]!;
      if (limit !== undefined && next.dataBytes !== undefined && next.dataBytes > limit) {
        this.#queued.splice(i, 1);
        next.reject(new PublishError("too_large", `the data is ${next.dataBytes} bytes as JSON, over the room's limit of ${limit}`));
        continue;
      }
      if (next.ready && !next.ready()) {
        i += 1;
        continue;
      }
      const wait = this.#budget.wait();
      if (wait > 0) {
        this.#pumpTimer = setTimeout(() => this.pump(), wait);
        return;
      }
      if (!this.#transport.send(next.text)) return;
      this.#queued.splice(i, 1);
      this.#budget.spend();
      if (next.id === undefined) next.resolve(0);
      else this.#pending.set(next.id, next);
    }
  }

  /** Settles the publish an answer names; false when it names none of ours. */
  settle(answer: PublishedEvent | ServerError): boolean {
    const publish = answer.id === undefined ? undefined : this.#pending.get(answer.id);
    if (!publish) return false;
    this.#pending.delete(answer.id!);
    if (answer.type === "published") publish.resolve(answer.seq);
    else publish.reject(new PublishError(answer.code, answer.message));
    return true;
  }

  /** The connection ended: publishes it carried have an unknown outcome; the queue waits for the next one. */
  connectionEnded(): void {
    clearTimeout(this.#pumpTimer);
    this.#pumpTimer = undefined;
    for (const publish of this.#pending.values()) {
      publish.reject(new PublishError("unconfirmed", "the connection ended before the publish was confirmed"));
    }
    this.#pending.clear();
  }

  /** The client stopped, or (with `room`) that room's subscription ended: what is queued (for it) will not be sent. */
  close(message: string, room?: string): void {
    const ending = this.#queued.filter((queued) => room === undefined || queued.room === room);
    this.#queued = this.#queued.filter((queued) => !ending.includes(queued));
    for (const queued of ending) queued.reject(new PublishError("closed", message));
  }

  #enqueue(queued: Queued): void {
    this.#queued.push(queued);
    this.pump();
  }
}

/** `value` as JSON text; undefined after rejecting with "bad_request" when it has none (a cycle, a BigInt, a function). */
function encode(value: unknown, reject: (error: PublishError) => void): string | undefined {
  let text: string | undefined;
  try {
    text = JSON.stringify(value) as string | undefined;
  } catch (error) {
    reject(new PublishError("bad_request", describe(error)));
    return undefined;
  }
  if (text === undefined) reject(new PublishError("bad_request", "data must be a JSON value"));
  return text;
}
