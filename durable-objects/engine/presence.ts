import type { PresenceEvent, PresenceMember, PresencePage } from "../../protocol";
import { logEvent } from "../../common/log";
import { utf8Length } from "../../common/utf8";
import type { Cursor } from "./cursor";
import { TagSource } from "./message";
import type { Stream } from "./stream";

export interface PresenceOptions {
  /** PRESENCE_LEAVE_DELAY_MS: a member is announced as leaving only after this long without a socket. */
  leaveDelayMs: number;
  /** PRESENCE_MAX_MEMBERS: above this, sockets get counts instead of join and leave events. */
  maxMembers: number;
  /** PRESENCE_COUNT_INTERVAL_MS: counts are sent at most this often. */
  countIntervalMs: number;
}

export interface PresenceSink {
  /** Sends a presence event to one cursor's socket, when its window has room for it; false when it had none (or the send failed). */
  send(cursor: Cursor, text: string, bytes: number, tag: number): boolean;
  /** `events` presence events went out (for the room's counters). */
  counted(events: number): void;
  /**
   * A member appeared here, its connections here changed, or it left this
   * object (null, after the leave delay): what a room spread over several
   * objects gathers into its roster.
   */
  memberChanged?(id: string, member: LocalMember | null): void;
}

/** What this object knows of one of its own members. */
export interface LocalMember {
  info: string | undefined;
  verified: boolean;
  /** Its sockets on this object (0 during the leave delay: still a member). */
  connections: number;
}

/**
 * The room's members as the room's root gathers them over every object of a
 * room spread over several (its leaves, and objects holding multiplexed
 * connections that follow it): the list while the room is within the member
 * cap (null above it), and the count.
 */
export interface Roster {
  members: readonly PresenceMember[] | null;
  count: number;
}

interface Member {
  info: string | undefined;
  verified: boolean;
  connections: number;
  /** When the member's last socket left (it is announced as leaving after the delay), or null while it has one. */
  leftAt: number | null;
}

/** Milliseconds of count interval per socket in the room: a send (~25 µs) is then at most 5% of it. */
const COUNT_MS_PER_SOCKET = 0.5;

/**
 * Who is in a room, as the sockets of this object see it: members, not
 * sockets. A socket admitted with an identity (a token's `sub`, or a name it
 * chose in open mode) is that member; several sockets of one member are one
 * member with a connection count. This object's own members are rebuilt from
 * the sockets' attachments when it wakes, so they are right after
 * hibernation, and start empty after a restart (the sockets are gone; they
 * come back as clients reconnect).
 *
 * A room of one object shows its own members. A room spread over several
 * objects shows its roster (`share`): the members every object holds, as the
 * room's root gathers them, together with this object's own, so a member is
 * one member however many objects hold its sockets, and is in the room while
 * any of them does.
 *
 * Sockets see a **view**, and every event is a change of it: whatever changed
 * (a socket here, the roster), the members it concerns are looked at again,
 * and one that entered the view is a `join`, one that left it a `leave`.
 *
 * Presence events are not room messages: no seq, no history. They carry a
 * tag, are acknowledged like messages and go through each socket's window
 * (SendWindow.hasPresenceRoom): a socket that cannot take an event is marked
 * stale and, once an ack makes room, gets one fresh `sync` instead of every
 * event it missed, so no presence backlog is kept. Join and leave traffic
 * grows with the square of the room's size, so above PRESENCE_MAX_MEMBERS
 * sockets get only the count, at most once per PRESENCE_COUNT_INTERVAL_MS.
 */
export class Presence {
  readonly #options: PresenceOptions;
  readonly #stream: Stream;
  readonly #sink: PresenceSink;
  /** This object's own members (with sockets here, or in their leave delay here). */
  readonly #local = new Map<string, Member>();
  /** The room's roster when it spans several objects, as its root last said; null for a room of one object. */
  #roster: { members: Map<string, PresenceMember> | null; count: number } | null = null;
  /** The members sockets have been shown (lists mode), by id. */
  readonly #view = new Map<string, PresenceMember>();
  /** Whether sockets were last shown lists (rather than counts). */
  #lists = true;
  readonly #tags = new TagSource();
  #leaveTimer: ReturnType<typeof setTimeout> | null = null;
  #countTimer: ReturnType<typeof setTimeout> | null = null;
  #countSentAt = 0;
  #countSent = -1;

  constructor(options: PresenceOptions, stream: Stream, sink: PresenceSink) {
    this.#options = options;
    this.#stream = stream;
    this.#sink = sink;
  }

  /** Members in the room (a member in its leave delay still counts: it has not left yet). */
  get count(): number {
    const roster = this.#roster;
    if (roster === null) return this.#local.size;
    if (roster.members === null) return Math.max(roster.count, this.#local.size);
    let count = roster.members.size;
    for (const id of this.#local.keys()) if (!roster.members.has(id)) count += 1;
    return count;
  }

  /** Whether `id` is a member of the room (here, or on another object as the roster says). */
  has(id: string): boolean {
    return this.#present(id);
  }

  /** This object's own members. */
  get localCount(): number {
    return this.#local.size;
  }

  /**
   * The room spans several objects and its roster is `roster` (null: it is
   * back to one object). Members that entered or left the view are announced;
   * crossing the member cap resyncs everyone.
   */
  share(roster: Roster | null): void {
    const before = new Set([...this.#view.keys(), ...(this.#roster?.members?.keys() ?? [])]);
    this.#roster = roster === null ? null : { members: roster.members === null ? null : new Map(roster.members.map((m) => [m.id, m])), count: roster.count };
    for (const id of this.#roster?.members?.keys() ?? []) before.add(id);
    this.#settle(before, null);
  }

  /** A socket that was already here when the object woke: it counts, nobody is told. */
  restore(cursor: Cursor): void {
    const identity = cursor.member;
    if (!identity) return;
    const member = this.#local.get(identity.id);
    if (member) member.connections += 1;
    else this.#local.set(identity.id, { info: identity.info, verified: identity.verified, connections: 1, leftAt: null });
    const lists = this.#wantsLists();
    if (lists !== this.#lists) {
      this.#lists = lists;
      this.#rebuildView();
    } else if (lists) {
      this.#view.set(identity.id, this.#describe(identity.id));
    }
    this.#changed(identity.id);
  }

  /** A socket joined: it gets the picture; the others hear of a new member. */
  join(cursor: Cursor): void {
    const identity = cursor.member;
    if (identity) {
      const member = this.#local.get(identity.id);
      if (member) {
        // Another tab, or back within the leave delay: no event either way.
        member.connections += 1;
        member.leftAt = null;
      } else {
        this.#local.set(identity.id, { info: identity.info, verified: identity.verified, connections: 1, leftAt: null });
      }
      this.#changed(identity.id);
      this.#settle([identity.id], cursor);
    }
    this.snapshot(cursor);
  }

  /** A socket left (closed by either side, reaped, or failed, or a subscription ended). */
  leave(cursor: Cursor, now: number): void {
    const identity = cursor.member;
    if (!identity) return;
    const member = this.#local.get(identity.id);
    if (!member) return;
    member.connections = Math.max(0, member.connections - 1);
    this.#changed(identity.id);
    if (member.connections > 0) return;
    member.leftAt = now;
    this.#armLeaveTimer(this.#options.leaveDelayMs);
  }

  /** Sends one socket the whole picture (members, or only the count above the cap). */
  snapshot(cursor: Cursor): void {
    const tag = this.#tags.next();
    const event: PresenceEvent = this.#lists
      ? { type: "presence", action: "sync", count: this.count, members: [...this.#view.values()], tag }
      : { type: "presence", action: "sync", count: this.count, tag };
    const text = this.#stream.shape.presence(event, cursor);
    if (text === null) {
      cursor.presenceStale = false;
      return;
    }
    if (this.#sink.send(cursor, text, utf8Length(text), tag)) {
      cursor.presenceStale = false;
      this.#sink.counted(1);
    } else {
      cursor.presenceStale = true;
    }
  }

  /** A socket has room again (an ack released frames): if it missed presence events, it gets a fresh picture. */
  refresh(cursor: Cursor): void {
    if (cursor.presenceStale) this.snapshot(cursor);
  }

  // -------------------------------------------------------------------------

  /**
   * Looks again at the members `ids`: one that entered the view is announced
   * as joining (to every socket but `joining`, which gets its own picture),
   * one that left it as leaving. Crossing the member cap either way resyncs
   * everyone; above it a change is a count.
   */
  #settle(ids: Iterable<string>, joining: Cursor | null): void {
    const lists = this.#wantsLists();
    if (lists !== this.#lists) {
      // Past the cap (or back under it): everyone gets a fresh picture in the new mode.
      this.#lists = lists;
      this.#rebuildView();
      this.#resync(joining);
      return;
    }
    if (!lists) {
      this.#scheduleCount();
      return;
    }
    for (const id of ids) {
      const now = this.#present(id) ? this.#describe(id) : null;
      const shown = this.#view.get(id);
      if (now !== null && shown === undefined) {
        this.#view.set(id, now);
        const tag = this.#tags.next();
        this.#broadcast({ type: "presence", action: "join", count: this.count, member: now, tag }, tag, joining);
      } else if (now === null && shown !== undefined) {
        this.#view.delete(id);
        const tag = this.#tags.next();
        this.#broadcast({ type: "presence", action: "leave", count: this.count, member: { id }, tag }, tag, null);
      } else if (now !== null) {
        // Still here (another tab, info from the roster): the view keeps it current without an event.
        this.#view.set(id, now);
      }
    }
  }

  /** Whether sockets are shown members (rather than counts): within the member cap, and the roster (if any) lists them. */
  #wantsLists(): boolean {
    return this.count <= this.#options.maxMembers && this.#roster?.members !== null;
  }

  #rebuildView(): void {
    this.#view.clear();
    if (!this.#lists) return;
    const ids = new Set([...this.#local.keys(), ...(this.#roster?.members?.keys() ?? [])]);
    for (const id of ids) this.#view.set(id, this.#describe(id));
  }

  /** Whether `id` is in the room: held here (a socket, or its leave delay), or by another object as the roster says. */
  #present(id: string): boolean {
    return this.#local.has(id) || (this.#roster?.members?.has(id) ?? false);
  }

  /** A member as sockets see it: the roster's word (over every object), or this object's own. */
  #describe(id: string): PresenceMember {
    const roster = this.#roster?.members?.get(id);
    const local = this.#local.get(id);
    if (roster) return local && roster.connections < local.connections ? { ...roster, connections: local.connections } : roster;
    return this.#describeLocal(id, local as Member);
  }

  #describeLocal(id: string, member: Member): PresenceMember {
    const described: PresenceMember = { id, connections: member.connections, verified: member.verified };
    if (member.info !== undefined) described.info = JSON.parse(member.info) as unknown;
    return described;
  }

  #changed(id: string): void {
    const hook = this.#sink.memberChanged;
    if (!hook) return;
    const member = this.#local.get(id);
    hook.call(this.#sink, id, member ? { info: member.info, verified: member.verified, connections: member.connections } : null);
  }

  #resync(except: Cursor | null): void {
    this.#countSent = this.count;
    for (const cursor of this.#stream.cursors.values()) if (cursor !== except) this.snapshot(cursor);
  }

  #broadcast(event: PresenceEvent, tag: number, except: Cursor | null): void {
    const text = this.#stream.shape.presence(event, null);
    if (text === null) return;
    const bytes = utf8Length(text);
    let sent = 0;
    for (const cursor of this.#stream.cursors.values()) {
      if (cursor === except) continue;
      // A socket that already missed events waits for its fresh picture rather than getting later ones.
      if (cursor.presenceStale) continue;
      if (this.#sink.send(cursor, text, bytes, tag)) sent += 1;
      else cursor.presenceStale = true;
    }
    this.#sink.counted(sent);
  }

  /**
   * Above the cap: the count, at most once per interval, and only when it
   * changed. A count goes to every socket, so in a large room the interval
   * grows with it: COUNT_MS_PER_SOCKET per socket keeps counts under ~5% of
   * the object's thread (~25 µs per send), e.g. every 16 s at 32,000 sockets.
   */
  #scheduleCount(): void {
    if (this.#countTimer !== null) return;
    const interval = Math.max(this.#options.countIntervalMs, this.#stream.cursors.size * COUNT_MS_PER_SOCKET);
    const wait = Math.max(0, this.#countSentAt + interval - Date.now());
    this.#countTimer = setTimeout(() => {
      this.#countTimer = null;
      try {
        if (this.#lists || this.count === this.#countSent) return;
        this.#countSent = this.count;
        this.#countSentAt = Date.now();
        const tag = this.#tags.next();
        this.#broadcast({ type: "presence", action: "count", count: this.count, tag }, tag, null);
      } catch (error) {
        logEvent("error", { room: this.#stream.room, where: "presence_count", error: String(error) });
      }
    }, wait);
  }

  #armLeaveTimer(delay: number): void {
    if (this.#leaveTimer !== null) return;
    this.#leaveTimer = setTimeout(() => {
      this.#leaveTimer = null;
      try {
        this.#expireLeaves(Date.now());
      } catch (error) {
        logEvent("error", { room: this.#stream.room, where: "presence_leave", error: String(error) });
      }
    }, delay);
  }

  /** Members whose last socket here left more than the delay ago are gone from here: announced once the view loses them. */
  #expireLeaves(now: number): void {
    let next = Number.POSITIVE_INFINITY;
    const gone: string[] = [];
    for (const [id, member] of this.#local) {
      if (member.leftAt === null) continue;
      const due = member.leftAt + this.#options.leaveDelayMs;
      if (due > now) {
        next = Math.min(next, due);
        continue;
      }
      this.#local.delete(id);
      gone.push(id);
      this.#changed(id);
    }
    if (gone.length > 0) this.#settle(gone, null);
    if (next !== Number.POSITIVE_INFINITY) this.#armLeaveTimer(next - now);
  }
}
