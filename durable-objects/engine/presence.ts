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
   * In a room spread over several objects (docs/sharded-rooms.md): the room's member count
   * over all of them, which events carry instead of this object's own. Absent or null: this
   * object's count.
   */
  roomCount?(): number | null;
  /** True while sockets get counts only, whatever the count: the room's members sit on several objects. */
  countsOnly?(): boolean;
  /** A member appeared here, its connections here changed, or it left (null, after the leave delay). */
  memberChanged?(id: string, member: LocalMember | null): void;
}

/** What this object knows of one member. */
export interface LocalMember {
  info: string | undefined;
  verified: boolean;
  /** Its sockets on this object (0 during the leave delay: still a member). */
  connections: number;
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
 * Who is in the room: members, not sockets. A socket admitted with an
 * identity (a token's `sub`, or a name it chose in open mode) is that
 * member; several sockets of one member are one member with a connection
 * count. Everything here is rebuilt from the sockets' attachments when the
 * room wakes, so it is right after hibernation, and starts empty after a
 * restart (the sockets are gone; they come back as clients reconnect).
 *
 * Presence events are not room messages: no seq, no history. They carry a
 * tag, are acknowledged like messages and go through each socket's window
 * (SendWindow.hasPresenceRoom): a socket that cannot take an event is marked
 * stale and, once an ack makes room, gets one fresh `sync` instead of every
 * event it missed, so the room never holds a presence backlog. Join and leave traffic grows with the square of the room's size,
 * so above PRESENCE_MAX_MEMBERS sockets get only the count, at most once per
 * PRESENCE_COUNT_INTERVAL_MS.
 */
export class Presence {
  readonly #options: PresenceOptions;
  readonly #stream: Stream;
  readonly #sink: PresenceSink;
  readonly #members = new Map<string, Member>();
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
    return this.#sink.roomCount?.() ?? this.#members.size;
  }

  /** The room-wide count changed on another object: sockets hear of it as of any count change. */
  countChanged(): void {
    if (!this.#lists()) this.#scheduleCount();
  }

  /** Every socket gets a fresh picture (the room went from one object to several, or back). */
  resync(): void {
    this.#resync(null);
  }

  /** A socket that was already in the room when it woke: it counts, nobody is told. */
  restore(cursor: Cursor): void {
    const identity = cursor.socket.attachment.member;
    if (!identity) return;
    const member = this.#members.get(identity.id);
    if (member) member.connections += 1;
    else this.#members.set(identity.id, { info: identity.info, verified: identity.verified, connections: 1, leftAt: null });
    this.#changed(identity.id);
  }

  /** A socket joined: it gets the picture; the others hear of a new member. */
  join(cursor: Cursor): void {
    const identity = cursor.socket.attachment.member;
    if (identity) {
      const member = this.#members.get(identity.id);
      if (member) {
        // Another tab, or back within the leave delay: no event either way.
        member.connections += 1;
        member.leftAt = null;
        this.#changed(identity.id);
      } else {
        this.#members.set(identity.id, { info: identity.info, verified: identity.verified, connections: 1, leftAt: null });
        this.#changed(identity.id);
        this.#announceJoin(identity.id, cursor);
      }
    }
    this.snapshot(cursor);
  }

  /** A socket left (closed by either side, reaped, or failed). */
  leave(cursor: Cursor, now: number): void {
    const identity = cursor.socket.attachment.member;
    if (!identity) return;
    const member = this.#members.get(identity.id);
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
    const event: PresenceEvent =
      this.#lists()
        ? { type: "presence", action: "sync", count: this.count, members: this.#list(), tag }
        : { type: "presence", action: "sync", count: this.count, tag };
    const text = JSON.stringify(event);
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

  /** Members in id order after `cursor`, at most `limit`. */
  page(limit: number, cursor: string | null, connections: number): PresencePage {
    const ids = [...this.#members.keys()].sort();
    const start = cursor === null ? 0 : ids.findIndex((id) => id > cursor);
    const chosen = start < 0 ? [] : ids.slice(start, start + limit);
    const members = chosen.map((id) => this.#describe(id, this.#members.get(id) as Member));
    const last = chosen[chosen.length - 1];
    return { count: this.count, connections, members, cursor: last !== undefined && start + limit < ids.length ? last : null };
  }

  // -------------------------------------------------------------------------

  /** Whether sockets get members (lists, joins, leaves) rather than counts only. */
  #lists(count = this.count): boolean {
    return count <= this.#options.maxMembers && !(this.#sink.countsOnly?.() ?? false);
  }

  #changed(id: string): void {
    const hook = this.#sink.memberChanged;
    if (!hook) return;
    const member = this.#members.get(id);
    hook.call(this.#sink, id, member ? { info: member.info, verified: member.verified, connections: member.connections } : null);
  }

  #list(): PresenceMember[] {
    return [...this.#members].map(([id, member]) => this.#describe(id, member));
  }

  #describe(id: string, member: Member): PresenceMember {
    const described: PresenceMember = { id, connections: member.connections, verified: member.verified };
    if (member.info !== undefined) described.info = JSON.parse(member.info) as unknown;
    return described;
  }

  #announceJoin(id: string, joining: Cursor): void {
    const count = this.count;
    const max = this.#options.maxMembers;
    const countsOnly = this.#sink.countsOnly?.() ?? false;
    if (this.#lists(count)) {
      const tag = this.#tags.next();
      const event: PresenceEvent = { type: "presence", action: "join", count, member: this.#describe(id, this.#members.get(id) as Member), tag };
      this.#broadcast(JSON.stringify(event), tag, joining);
    } else if (count === max + 1 && !countsOnly) {
      // Past the cap: everyone switches to counts, starting from a picture that has only the count.
      this.#resync(joining);
    } else {
      this.#scheduleCount();
    }
  }

  #announceLeave(id: string): void {
    const count = this.count;
    const max = this.#options.maxMembers;
    const countsOnly = this.#sink.countsOnly?.() ?? false;
    if (count < max && !countsOnly) {
      const tag = this.#tags.next();
      const event: PresenceEvent = { type: "presence", action: "leave", count, member: { id }, tag };
      this.#broadcast(JSON.stringify(event), tag, null);
    } else if (count === max && !countsOnly) {
      // Back under the cap: everyone gets the members again.
      this.#resync(null);
    } else {
      this.#scheduleCount();
    }
  }

  #resync(except: Cursor | null): void {
    this.#countSent = this.count;
    for (const cursor of this.#stream.cursors.values()) if (cursor !== except) this.snapshot(cursor);
  }

  #broadcast(text: string, tag: number, except: Cursor | null): void {
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
   * the room's thread (~25 µs per send), e.g. every 16 s at 32,000 sockets.
   */
  #scheduleCount(): void {
    if (this.#countTimer !== null) return;
    const interval = Math.max(this.#options.countIntervalMs, this.#stream.cursors.size * COUNT_MS_PER_SOCKET);
    const wait = Math.max(0, this.#countSentAt + interval - Date.now());
    this.#countTimer = setTimeout(() => {
      this.#countTimer = null;
      try {
        if (this.#lists() || this.count === this.#countSent) return;
        this.#countSent = this.count;
        this.#countSentAt = Date.now();
        const tag = this.#tags.next();
        const event: PresenceEvent = { type: "presence", action: "count", count: this.count, tag };
        this.#broadcast(JSON.stringify(event), tag, null);
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

  /** Members whose last socket left more than the delay ago are gone: announced, one by one. */
  #expireLeaves(now: number): void {
    let next = Number.POSITIVE_INFINITY;
    for (const [id, member] of this.#members) {
      if (member.leftAt === null) continue;
      const due = member.leftAt + this.#options.leaveDelayMs;
      if (due > now) {
        next = Math.min(next, due);
        continue;
      }
      this.#members.delete(id);
      this.#changed(id);
      this.#announceLeave(id);
    }
    if (next !== Number.POSITIVE_INFINITY) this.#armLeaveTimer(next - now);
  }
}
