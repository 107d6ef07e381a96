import {
  CloseCode,
  PING,
  PONG,
  parseClientFrame,
  type CustomClientFrame,
  type ServerError,
  type PublishedEvent,
  type PublishFrame,
} from "../../protocol";
import type { Limits } from "../../common/settings";
import { logEvent } from "../../common/log";
import type { RoomCounters } from "./counters";
import type { Delivery } from "./delivery";
import type { FrameHooks } from "./hook-runner";
import type { PublishOutcome } from "./publishing";
import type { RatePolicy, SocketState } from "./socket-state";
import { utf8Length } from "../../common/utf8";

/**
 * Where a socket's publishes go: the room's own Publishing, or, for a socket
 * on a leaf of a sharded room, the root (whose beforePublish may refuse).
 */
export interface FramePublisher {
  publish(dataJson: string): Promise<PublishOutcome>;
}

export interface ClientFrameHooks {
  roomName(): string;
  /** Rewrites a socket's attachment (its last-activity time) so it survives hibernation. */
  persistAttachment(ws: WebSocket, state: SocketState): void;
}

/**
 * What the room does with each frame a client sends. The rules, which
 * docs/protocol.md states for clients:
 *
 * - Flow control is free: heartbeats (answered by the runtime) and acks that
 *   release a frame never count against the rate. Every other frame (a
 *   publish, an ack that releases nothing) takes a token from the socket's
 *   bucket of CLIENT_FRAMES_PER_SECOND (burst CLIENT_FRAME_BURST); past it the
 *   socket is closed with 4009. A client can send at most one releasing ack
 *   per frame it was sent, so free acks cost the room no more than the
 *   frames it chose to send.
 * - An ack that names a message the socket was never sent, or a wrong tag,
 *   is a lie: 4000.
 * - Anything that is not protocol is 4000; frames over MAX_FRAME_BYTES 1009.
 *   A custom frame (`{"type":"x-..."}`) is protocol only for a room whose
 *   onClientFrame hook handles it; it costs a token, like a publish.
 * - With beforePublish or onClientFrame overridden, a socket's publishes and
 *   custom frames pass the hooks one at a time, in arrival order.
 */
export class ClientFrames {
  readonly #delivery: Delivery;
  readonly #publishing: FramePublisher;
  readonly #counters: RoomCounters;
  readonly #limits: Limits;
  readonly #rate: RatePolicy;
  readonly #hooks: ClientFrameHooks;
  readonly #runner: FrameHooks;

  constructor(
    delivery: Delivery,
    publishing: FramePublisher,
    counters: RoomCounters,
    limits: Limits,
    rate: RatePolicy,
    hooks: ClientFrameHooks,
    runner: FrameHooks,
  ) {
    this.#delivery = delivery;
    this.#publishing = publishing;
    this.#counters = counters;
    this.#limits = limits;
    this.#rate = rate;
    this.#hooks = hooks;
    this.#runner = runner;
  }

  /** Handles one frame from a socket the room tracks. Never throws: a failure closes that socket with 1011. */
  async handle(ws: WebSocket, state: SocketState, message: string | ArrayBuffer): Promise<void> {
    try {
      const now = Date.now();
      if (state.touch(now)) {
        state.attachment.activeAt = now;
        this.#hooks.persistAttachment(ws, state);
      }
      if (state.attachment.expiresAt !== null && now >= state.attachment.expiresAt) {
        this.#counters.refused("token_expired");
        this.#delivery.close(ws, CloseCode.UNAUTHORIZED, "token expired");
        return;
      }
      if (typeof message !== "string") return this.#refuse(ws, "bad_frame", CloseCode.BAD_FRAME, "binary frames are not supported");
      if (message.length * 3 > this.#limits.MAX_FRAME_BYTES && utf8Length(message) > this.#limits.MAX_FRAME_BYTES) {
        return this.#refuse(ws, "too_big", CloseCode.MESSAGE_TOO_BIG, `frame over ${this.#limits.MAX_FRAME_BYTES} bytes`);
      }
      // The runtime answers heartbeats itself; one can only get here while the answer is being set up.
      if (message === PING) {
        this.#delivery.sendControl(ws, PONG);
        return;
      }
      const parsed = parseClientFrame(message);
      if (!parsed.ok) return this.#refuse(ws, "bad_frame", CloseCode.BAD_FRAME, parsed.error);
      const frame = parsed.value;
      if (frame.type === "ack") {
        const verdict = this.#delivery.ack(ws, state, frame.seq, frame.tag, now);
        if (verdict === "forged") return this.#refuse(ws, "bad_ack", CloseCode.BAD_FRAME, "ack for a message this socket was not sent, or with the wrong tag");
        if (verdict === "stale") this.#spend(ws, state, now);
        return;
      }
      if (frame.type !== "publish") {
        if (!this.#runner.handlesClientFrames) {
          return this.#refuse(ws, "bad_frame", CloseCode.BAD_FRAME, `unknown frame type ${JSON.stringify(frame.type)}`);
        }
        if (!this.#spend(ws, state, now)) return;
        return await this.#inOrder(ws, state, frame.id, () => this.#custom(ws, state, frame));
      }
      if (!this.#spend(ws, state, now)) return;
      if (!state.attachment.canPublish) {
        this.#error(ws, { type: "error", code: "forbidden", message: "this socket may not publish", id: frame.id });
        return;
      }
      const dataJson = JSON.stringify(frame.data);
      if (utf8Length(dataJson) > this.#limits.MAX_MESSAGE_BYTES) {
        this.#error(ws, { type: "error", code: "too_large", message: `message data over ${this.#limits.MAX_MESSAGE_BYTES} bytes as JSON`, id: frame.id });
        return;
      }
      if (this.#runner.ordersFrames) return await this.#inOrder(ws, state, frame.id, () => this.#publish(ws, state, frame, dataJson));
      await this.#publish(ws, state, frame, dataJson);
    } catch (error) {
      logEvent("error", { room: this.#hooks.roomName(), socket: state.attachment.id, where: "message", error: String(error) });
      this.#delivery.close(ws, CloseCode.INTERNAL_ERROR, "internal error");
    }
  }

  async #publish(ws: WebSocket, state: SocketState, frame: PublishFrame, dataJson: string): Promise<void> {
    let json = dataJson;
    if (this.#runner.checksPublishes) {
      const checked = await this.#runner.checkPublish(dataJson, frame.data, { kind: "socket", ws, state });
      if (!checked.ok) {
        this.#answer(ws, state, { type: "error", code: checked.refusal.error, message: checked.refusal.message, id: frame.id });
        return;
      }
      json = checked.dataJson;
    }
    let seq: number;
    try {
      const outcome = await this.#publishing.publish(json);
      // Refused by the root's beforePublish (a socket on a leaf of a sharded room).
      if ("refused" in outcome) {
        this.#answer(ws, state, { type: "error", code: outcome.refused.error, message: outcome.refused.message, id: frame.id });
        return;
      }
      seq = outcome.seq;
    } catch {
      this.#answer(ws, state, { type: "error", code: "internal", message: "the message could not be stored", id: frame.id });
      return;
    }
    const published: PublishedEvent = { type: "published", id: frame.id, seq };
    this.#answer(ws, state, published);
  }

  async #custom(ws: WebSocket, state: SocketState, frame: CustomClientFrame): Promise<void> {
    if (await this.#runner.clientFrame(ws, state, frame)) return;
    this.#answer(ws, state, { type: "error", code: "internal", message: `the room could not handle ${frame.type}`, id: frame.id });
  }

  /** Runs `task` in the socket's hook queue; a socket with too many frames waiting is told so instead. */
  async #inOrder(ws: WebSocket, state: SocketState, id: string | undefined, task: () => Promise<void>): Promise<void> {
    const queued = this.#runner.inOrder(state, task);
    if (queued) return queued;
    this.#counters.refused("rate_limited");
    this.#error(ws, { type: "error", code: "rate_limited", message: "too many frames are waiting for the room; slow down", id });
  }

  /** Answers a frame whose handling waited: only a socket still in the room is told. */
  #answer(ws: WebSocket, state: SocketState, event: PublishedEvent | ServerError): void {
    if (this.#delivery.get(ws) === state) this.#delivery.sendControl(ws, JSON.stringify(event));
  }

  /** Takes a frame token; false (and the socket closed with 4009) when the socket is over its rate. */
  #spend(ws: WebSocket, state: SocketState, now: number): boolean {
    if (state.takeFrameToken(now, this.#rate)) return true;
    logEvent("kick", { room: this.#hooks.roomName(), socket: state.attachment.id, reason: "rate_limited" });
    this.#counters.refused("rate_limited");
    this.#delivery.close(ws, CloseCode.RATE_LIMITED, `over ${this.#rate.perSecond} frames per second`);
    return false;
  }

  #refuse(ws: WebSocket, reason: string, code: number, message: string): void {
    this.#counters.refused(reason);
    this.#delivery.close(ws, code, message);
  }

  #error(ws: WebSocket, event: ServerError): void {
    this.#delivery.sendControl(ws, JSON.stringify(event));
  }
}
