/**
 * A multiplexed connection held by the Worker itself (the design
 * docs/multiplexing.md calls "the Worker holds the client's socket"): the
 * client's socket is accepted in the Worker's own invocation, and each
 * `subscribe` opens one internal socket into the room's object, whose frames
 * the Worker relays with the room's name spliced in. Nothing hibernates on
 * the Worker's side: the invocation lives as long as the client's socket.
 *
 * Bare, like the rest of this baseline: `since` is ignored, acks are
 * swallowed, nothing is limited; the Worker answers the client's heartbeat
 * itself (the runtime's auto-response is a Durable Object's). It speaks
 * enough of protocol/multiplex.ts for the load tool's multiplexed clients:
 * `welcome`, `subscribed` (from the room's welcome), room-scoped messages.
 */
import type { ConnectionWelcomeEvent, SubscribedEvent, WelcomeEvent } from "../../../protocol";
import { parseMultiplexFrame, PING, PONG } from "../../../protocol";
import { webSocketPair, type UpgradeInit } from "./runtime";

/** A Worker-side socket: `accept()` starts its events in this invocation. */
type WorkerSocket = WebSocket & { accept(): void };

/** Opens the room's socket: the room object's upgrade answer carries it. */
export type OpenRoomSocket = (room: string) => Promise<WorkerSocket | null>;

const ANNOUNCED_WINDOW_BYTES = 1_048_576;

/** Accepts a client's multiplexed connection and relays its rooms' frames to it. */
export function relayConnection(openRoom: OpenRoomSocket): Response {
  const { client, server } = webSocketPair();
  const socket = server as WorkerSocket;
  socket.accept();
  const rooms = new Map<string, WorkerSocket>();
  const welcome: ConnectionWelcomeEvent = {
    type: "welcome",
    window: ANNOUNCED_WINDOW_BYTES,
    rate: { perSecond: 0, burst: 0 },
    maxMessageBytes: 65_536,
    maxRooms: 100,
    subscribeRate: { perSecond: 0, burst: 0 },
  };
  socket.send(JSON.stringify(welcome));

  const follow = async (room: string): Promise<void> => {
    const inner = await openRoom(room);
    if (!inner) {
      socket.send(JSON.stringify({ type: "error", room, code: "internal", message: "the room did not upgrade" }));
      return;
    }
    rooms.set(room, inner);
    inner.accept();
    // The room's name goes in by splicing, not by parsing and serializing each frame again.
    const prefix = `{"room":${JSON.stringify(room)},`;
    inner.addEventListener("message", (event: MessageEvent) => {
      const text = event.data as string;
      if (text.startsWith('{"type":"welcome"')) {
        const room_ = JSON.parse(text) as WelcomeEvent;
        const subscribed: SubscribedEvent = { type: "subscribed", room, seq: room_.seq, epoch: room_.epoch };
        socket.send(JSON.stringify(subscribed));
        return;
      }
      try {
        socket.send(prefix + text.slice(1));
      } catch {
        // The client went away; its close ends the room sockets.
      }
    });
    inner.addEventListener("close", () => rooms.delete(room));
  };

  socket.addEventListener("message", (event: MessageEvent) => {
    const text = event.data as string;
    if (text === PING) return socket.send(PONG);
    const parsed = parseMultiplexFrame(text);
    if (!parsed.ok || parsed.value.type !== "subscribe") return;
    const { room } = parsed.value;
    if (rooms.has(room)) return;
    follow(room).catch(() => socket.send(JSON.stringify({ type: "error", room, code: "internal", message: "the room could not be reached" })));
  });
  const end = (): void => {
    for (const inner of rooms.values()) {
      try {
        inner.close(1000, "client gone");
      } catch {
        // Already closed.
      }
    }
    rooms.clear();
  };
  socket.addEventListener("close", () => {
    end();
    try {
      socket.close(1000, "bye");
    } catch {
      // Already closed.
    }
  });
  socket.addEventListener("error", end);
  const init: UpgradeInit = { status: 101, webSocket: client };
  return new Response(null, init);
}
