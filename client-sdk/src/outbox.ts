import { PublishError } from "./events.js";
import type { CustomClientFrame, ServerError, PublishFrame, PublishedEvent, WelcomeEvent } from "../../protocol/index.js";
import { describe } from "./transport.js";

/** Where publishes go out: the connection. */
export interface OutboxTransport {
  /** Whether a frame sent now goes out on an open connection. */
  readonly writable: boolean;
  send(text: string): boolean;
}

interface PendingPublish {
  resolve(seq: number): void;
  reject(error: PublishError): void;
}

/** A frame waiting for the budget: a publish (answered by the room) or an application frame (done once sent). */
type Queued =
  | { frame: PublishFrame & { id: string }; publish: PendingPublish }
  | { frame: CustomClientFrame; publish: PendingPublish; custom: true };

/**
 * Publishes over the socket, inside the room's frame budget. The welcome
 * announces how many client frames per second the room takes (over it, it
 * closes with 4009); acks that free the window are free, publishes are not.
 * So publishes wait here and leave at three quarters of the announced rate,
 * from half the burst, which leaves room for timing slack. A publish not yet
 * sent survives a reconnect (the server never saw it); one sent and not yet
 * answered when the connection ends is rejected as "unconfirmed".
 * Application frames (`x-...`) take the same budget and queue, in order with
 * publishes, and are done once sent.
 */
export class Outbox {
  #transport: OutboxTransport;
  /** Publishes not yet sent. */
  #queued: Queued[] = [];
  /** Publishes sent and awaiting the server's answer, by id. */
  #pending = new Map<string, PendingPublish>();
  #rate = { perSecond: 0, burst: 1 };
  #budget = 1;
  #refilledAt = 0;
  #pumpTimer: ReturnType<typeof setTimeout> | undefined;
  #nextId = 0;

  constructor(transport: OutboxTransport) {
    this.#transport = transport;
  }

  /** Queues `data` for publishing; settles with its seq or a PublishError. */
  publish(data: unknown): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#queued.push({ frame: { type: "publish", data, id: String(++this.#nextId) }, publish: { resolve, reject } });
      this.pump();
    });
  }

  /** Queues an application frame; settles once it was sent (or rejects when the client closes first). */
  sendCustom(frame: CustomClientFrame): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#queued.push({ frame, publish: { resolve: () => resolve(), reject }, custom: true });
      this.pump();
    });
  }

  /** A new connection was welcomed with its frame budget. */
  welcome(welcome: WelcomeEvent): void {
    this.#rate = welcome.rate ?? this.#rate;
    this.#budget = Math.max(1, Math.floor(this.#rate.burst / 2));
    this.#refilledAt = Date.now();
  }

  /** Sends queued publishes as far as the budget allows; retries when it has refilled. */
  pump(): void {
    clearTimeout(this.#pumpTimer);
    this.#pumpTimer = undefined;
    if (!this.#transport.writable) return;
    const rate = this.#rate.perSecond > 0 ? this.#rate.perSecond * 0.75 : Number.POSITIVE_INFINITY;
    const burst = Math.max(1, Math.floor(this.#rate.burst / 2));
    while (this.#queued.length > 0) {
      const now = Date.now();
      this.#budget = Math.min(burst, this.#budget + ((now - this.#refilledAt) / 1000) * rate);
      this.#refilledAt = now;
      if (this.#budget < 1) {
        this.#pumpTimer = setTimeout(() => this.pump(), Math.ceil(((1 - this.#budget) / rate) * 1000));
        return;
      }
      const queued = this.#queued.shift()!;
      const { frame, publish } = queued;
      let text: string;
      try {
        text = JSON.stringify(frame);
      } catch (error) {
        publish.reject(new PublishError("bad_request", describe(error)));
        continue;
      }
      this.#budget -= 1;
      const answered = !("custom" in queued);
      if (answered) this.#pending.set(queued.frame.id, publish);
      if (!this.#transport.send(text)) {
        if (answered) this.#pending.delete(queued.frame.id);
        this.#queued.unshift(queued);
        return;
      }
      if (!answered) publish.resolve(0);
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

  /** The client stopped: nothing queued will be sent. */
  close(message: string): void {
    for (const { publish } of this.#queued.splice(0)) publish.reject(new PublishError("closed", message));
  }
}
