import type { PresenceEvent, PresenceMember } from "../../protocol/index.js";

/** One member of a room: an identity, however many sockets (tabs, devices) it has open. */
export interface RoomMember<I = unknown> {
  /** The member's id: a token's `sub`, or the open-mode name. */
  id: string;
  /** Member data: a token's `info` claim, or what an open-mode socket named itself with. */
  info: I | undefined;
  /** Sockets this member had open as of the last `sync` (a `join` is a first socket); the HTTP view is current. */
  connections: number;
  /** False when the member named itself (open mode): show it as unverified, never trust it. */
  verified: boolean;
}

/**
 * Who is in the room, as this client last heard.
 *
 * @see client-sdk/README.md#presence
 */
export interface RoomPresence<I = unknown> {
  /** Members in the room. Above the room's member cap this is the only figure the room sends. */
  readonly count: number;
  /** The members by id, or null above the room's member cap (the room then sends only counts). */
  readonly members: ReadonlyMap<string, RoomMember<I>> | null;
}

/** What one presence event changed. */
export interface PresenceChange<I> {
  action: PresenceEvent["action"];
  /** The member that joined or left (for a leave, as it was last known). */
  member: RoomMember<I> | undefined;
}

function toMember<I>(member: PresenceMember): RoomMember<I> {
  return { id: member.id, info: member.info as I | undefined, connections: member.connections, verified: member.verified };
}

/**
 * The room's presence as the client keeps it: replaced by each `sync`,
 * changed by each `join` and `leave`, counted by each `count`. The room sends
 * a fresh `sync` on every connection, so after a reconnect the picture is
 * the room's again, whatever happened while the client was away.
 */
export class PresenceView<I> implements RoomPresence<I> {
  #count = 0;
  #members: Map<string, RoomMember<I>> | null = new Map();

  get count(): number {
    return this.#count;
  }

  get members(): ReadonlyMap<string, RoomMember<I>> | null {
    return this.#members;
  }

  apply(event: PresenceEvent): PresenceChange<I> {
    this.#count = event.count;
    switch (event.action) {
      case "sync":
        this.#members = event.members ? new Map(event.members.map((m) => [m.id, toMember<I>(m)])) : null;
        return { action: "sync", member: undefined };
      case "join": {
        const member = toMember<I>(event.member);
        this.#members?.set(member.id, member);
        return { action: "join", member };
      }
      case "leave": {
        const member = this.#members?.get(event.member.id) ?? { id: event.member.id, info: undefined, connections: 0, verified: false };
        this.#members?.delete(event.member.id);
        return { action: "leave", member };
      }
      case "count":
        return { action: "count", member: undefined };
    }
  }
}
