import type { PresenceMember, PresencePage } from "../../protocol";
import type { LocalMember, Roster } from "../engine/presence";
import type { FollowerMember } from "../followers/contracts";

interface Entry {
  info: string | undefined;
  verified: boolean;
  /** The root's own view of the member (its sockets on the root), or null. */
  local: LocalMember | null;
  /** Sockets on each leaf that holds the member (0: the member is in its leave delay there). */
  leaves: Map<number, number>;
}

/** Who hears of members arriving in the room and leaving it (the room's webhooks). */
export interface MemberListener {
  /** A member is in the room that was not (`info` as JSON text, when it has one). */
  joined(id: string, info: string | undefined, verified: boolean): void;
  /** A member is gone from every object of the room. */
  left(id: string): void;
}

/**
 * The members of a sharded room, over the root and every leaf
 * (docs/sharded-rooms.md): a member whose tabs sit on different objects is
 * one member. The root's own presence reports its members here; each leaf
 * reports the members it holds, as their state (not as events), so a report
 * that is repeated or arrives twice changes nothing. A member is in the room
 * while any object holds it, which is also how a leave delay spans objects: a
 * member that reloads onto another leaf is held by the new one before the old
 * one lets it go.
 */
export class RoomMembers {
  readonly #entries = new Map<string, Entry>();
  readonly #changed: () => void;
  readonly #listener: MemberListener | null;

  /** `changed` runs when a member comes or goes, or its connections change; `listener` hears of each member that arrives or goes. */
  constructor(changed: () => void, listener: MemberListener | null = null) {
    this.#changed = changed;
    this.#listener = listener;
  }

  get count(): number {
    return this.#entries.size;
  }

  /** The root's own presence: a member appeared, changed or left (null). */
  setLocal(id: string, view: LocalMember | null): void {
    const before = this.#entries.size;
    const entry = this.#entries.get(id);
    if (view === null) {
      if (!entry) return;
      entry.local = null;
      this.#dropIfEmpty(id, entry);
    } else if (entry) {
      entry.local = view;
    } else {
      this.#entries.set(id, { info: view.info, verified: view.verified, local: view, leaves: new Map() });
      this.#listener?.joined(id, view.info, view.verified);
    }
    if (this.#entries.size !== before || view !== null) this.#changed();
  }

  /** A leaf's report of some of its members. */
  setLeaf(index: number, members: readonly FollowerMember[]): void {
    const before = this.#entries.size;
    for (const member of members) {
      const entry = this.#entries.get(member.id);
      if (!member.present) {
        if (!entry) continue;
        entry.leaves.delete(index);
        this.#dropIfEmpty(member.id, entry);
      } else if (entry) {
        entry.leaves.set(index, member.connections);
      } else {
        this.#entries.set(member.id, { info: member.info, verified: member.verified, local: null, leaves: new Map([[index, member.connections]]) });
        this.#listener?.joined(member.id, member.info, member.verified);
      }
    }
    if (this.#entries.size !== before || members.length > 0) this.#changed();
  }

  /** A leaf reported every member it holds: the ones it no longer lists are gone from it. */
  replaceLeaf(index: number, members: readonly FollowerMember[]): void {
    const listed = new Set(members.map((m) => m.id));
    const gone: FollowerMember[] = [];
    for (const [id, entry] of this.#entries) {
      if (entry.leaves.has(index) && !listed.has(id)) gone.push({ id, present: false, connections: 0, verified: entry.verified });
    }
    this.setLeaf(index, [...gone, ...members]);
  }

  /** A leaf was retired or lost: it holds nobody. */
  dropLeaf(index: number): void {
    this.replaceLeaf(index, []);
  }

  /** The room's roster for its objects' presence: every member while there are at most `cap`, else the count alone. */
  roster(cap: number): Roster {
    if (this.#entries.size > cap) return { members: null, count: this.#entries.size };
    return { members: [...this.#entries.entries()].map(([id, entry]) => this.#describe(id, entry)), count: this.#entries.size };
  }

  /** Members in id order after `cursor`, at most `limit` (`GET /rooms/{room}/presence`). */
  page(limit: number, cursor: string | null, connections: number): PresencePage {
    const ids = [...this.#entries.keys()].sort();
    const start = cursor === null ? 0 : ids.findIndex((id) => id > cursor);
    const chosen = start < 0 ? [] : ids.slice(start, start + limit);
    const members = chosen.map((id) => this.#describe(id, this.#entries.get(id) as Entry));
    const last = chosen[chosen.length - 1];
    return { count: this.count, connections, members, cursor: last !== undefined && start + limit < ids.length ? last : null };
  }

  #describe(id: string, entry: Entry): PresenceMember {
    let connections = entry.local?.connections ?? 0;
    for (const n of entry.leaves.values()) connections += n;
    const described: PresenceMember = { id, connections, verified: entry.verified };
    if (entry.info !== undefined) described.info = JSON.parse(entry.info) as unknown;
    return described;
  }

  #dropIfEmpty(id: string, entry: Entry): void {
    if (entry.local !== null || entry.leaves.size > 0) return;
    this.#entries.delete(id);
    this.#listener?.left(id);
  }
}
