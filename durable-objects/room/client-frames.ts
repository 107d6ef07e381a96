import { CloseCode, PING, PONG, parseClientFrame, type ErrorEvent, type PublishedEvent } from "../../client-sdk/src/protocol";
import type { Limits } from "../../worker/settings";
import { logEvent } from "../../worker/log";
import type { RoomCounters } from "./counters";
import type { Delivery } from "./delivery";
import type { Publishing } from "./publishing";
import type { RatePolicy, SocketState } from "./socket-state";
import { utf8Length } from "../../worker/utf8";

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
 */
export class ClientFrames {
  readonly #delivery: Delivery;
  readonly #publishing: Pick<Publishing, "publish">;
  readonly #counters: RoomCounters;
  readonly #limits: Limits;
  readonly #rate: RatePolicy;
  readonly #hooks: ClientFrameHooks;

  constructor(delivery: Delivery, publishing: Pick<Publishing, "publish">, counters: RoomCounters, limits: Limits, rate: RatePolicy, hooks: ClientFrameHooks) {
    this.#delivery = delivery;
    this.#publishing = publishing;
    this.#counters = counters;
    this.#limits = limits;
    this.#rate = rate;
    this.#hooks = hooks;
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
      let seq: number;
      try {
        seq = (await this.#publishing.publish(dataJson)).seq;
      } catch {
        this.#error(ws, { type: "error", code: "internal", message: "the message could not be stored", id: frame.id });
        return;
      }
      const published: PublishedEvent = { type: "published", id: frame.id, seq };
      this.#delivery.sendControl(ws, JSON.stringify(published));
    } catch (error) {
      logEvent("error", { room: this.#hooks.roomName(), socket: state.attachment.id, where: "message", error: String(error) });
      this.#delivery.close(ws, CloseCode.INTERNAL_ERROR, "internal error");
    }
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

  #error(ws: WebSocket, event: ErrorEvent): void {
    this.#delivery.sendControl(ws, JSON.stringify(event));
  }
}
