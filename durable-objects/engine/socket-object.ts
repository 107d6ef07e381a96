import { DurableObject } from "cloudflare:workers";
import type { SocketEngine } from "./socket-engine";

/**
 * A Durable Object whose sockets run on the socket engine: the runtime's
 * socket and alarm calls (the Hibernation API's handlers) go to the engine,
 * the same for every object that holds sockets (a room, a leaf). A subclass
 * builds its parts in its constructor and hands over their engine once.
 */
export abstract class SocketObject<E = Record<string, unknown>> extends DurableObject<E> {
  #engine: SocketEngine | null = null;

  /** Hands the object's sockets to `engine`; once, from the constructor. */
  protected runSockets(engine: SocketEngine): void {
    if (this.#engine !== null) throw new Error("the object's sockets already run on an engine");
    this.#engine = engine;
  }

  override async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    await this.#engine?.message(ws, message);
  }

  override async webSocketClose(ws: WebSocket, code: number, reason: string): Promise<void> {
    this.#engine?.closed(ws, code, reason);
  }

  override async webSocketError(ws: WebSocket, error: unknown): Promise<void> {
    this.#engine?.errored(ws, error);
  }

  override async alarm(): Promise<void> {
    await this.#engine?.alarm();
  }
}
