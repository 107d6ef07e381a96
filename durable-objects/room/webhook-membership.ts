import type { WebhookRecorder } from "./webhook-recorder";
import type { WebhookRecord } from "./webhook-record";

export interface MembershipOptions {
  /** PRESENCE_LEAVE_DELAY_MS: the room is vacated after this long without a socket. */
  leaveDelayMs: number;
  /** How long after the room starts a recorded member may take to come back before it is announced as left. */
  restartGraceMs: number;
  /** Whether member events are sent (the record then holds members), and room events (it then holds the room). */
  members: boolean;
  rooms: boolean;
}

export interface MembershipHost {
  /** Members of the room now, over every object (members in their leave delay included). */
  memberCount(): number;
  /** A wait began that ends at `dueAt`: the alarm must come. */
  wantAlarm(): void;
}

/**
 * What the receiver is told about who is in the room: `room.occupied`,
 * `room.vacated`, `member.joined`, `member.left`, decided from the room's
 * sockets and members as the root sees them (its own, and its leaves'
 * reports: RoomMembers), against what the receiver was already told
 * (WebhookRecord).
 *
 * - `member.joined` when a member appears in the room and is not in the
 *   record; `member.left` when it is gone from the room (after the leave
 *   delay, on whichever object it was) and is in the record.
 * - `room.occupied` on the room's first socket; `room.vacated` when it has
 *   had no socket for the leave delay and every member's `member.left` went
 *   out (so a reload of the last tab is neither, and the vacated room comes
 *   after its members' leaves).
 * - After a start (a deploy, a crash, waking from hibernation) the record
 *   names members the room no longer sees: each is given the restart grace
 *   to come back (a restored socket or a leaf's report confirms it at once);
 *   one that does not is announced as left, `inferred`. A room recorded as
 *   occupied that finds no socket is vacated the same way.
 */
export class WebhookMembership {
  readonly #record: WebhookRecord;
  readonly #recorder: WebhookRecorder;
  readonly #options: MembershipOptions;
  readonly #host: MembershipHost;
  /** Recorded members not seen since this instance started. */
  readonly #unconfirmed: Set<string>;
  readonly #confirmBy: number;
  /** Since when the room has had no socket (null: it has some, or it is not recorded as occupied). */
  #emptySince: number | null;
  /** Whether that emptiness began when this instance started, rather than with a socket seen to leave. */
  #emptyAtStart: boolean;

  constructor(record: WebhookRecord, recorder: WebhookRecorder, options: MembershipOptions, host: MembershipHost, now: number) {
    this.#record = record;
    this.#recorder = recorder;
    this.#options = options;
    this.#host = host;
    this.#unconfirmed = new Set(options.members ? record.memberIds() : []);
    this.#confirmBy = now + options.restartGraceMs;
    this.#emptySince = options.rooms && record.occupied ? now : null;
    this.#emptyAtStart = this.#emptySince !== null;
  }

  /** A member appeared in the room: `info` as JSON text, when it has one. */
  joined(id: string, info: string | undefined, verified: boolean, now: number): void {
    if (!this.#options.members) return;
    // Recorded and back (a restored socket, a leaf's report, a reconnect within the grace): nothing to tell.
    if (this.#unconfirmed.delete(id) || this.#record.hasMember(id)) return;
    this.#record.addMember(id);
    this.#recorder.record({ change: { type: "member.joined", id, info, verified }, ts: now });
  }

  /** A member is gone from the room (its leave delay passed on the object that held it last). */
  left(id: string, now: number): void {
    if (!this.#options.members || !this.#record.hasMember(id)) return;
    this.#unconfirmed.delete(id);
    this.#record.removeMember(id);
    this.#recorder.record({ change: { type: "member.left", id, inferred: false }, ts: now });
    this.settle(now);
  }

  /** The room's sockets, over every object, after a change. */
  connections(count: number, now: number): void {
    if (!this.#options.rooms) return;
    if (count > 0) {
      this.#emptySince = null;
      this.#emptyAtStart = false;
      if (this.#record.occupied) return;
      this.#record.setOccupied(true);
      this.#recorder.record({ change: { type: "room.occupied" }, ts: now });
    } else if (this.#record.occupied && this.#emptySince === null) {
      this.#emptySince = now;
      this.#host.wantAlarm();
    }
  }

  /** When `settle` has work (null: none is due, or it waits for members to leave). */
  dueAt(now: number): number | null {
    let due: number | null = this.#unconfirmed.size > 0 ? this.#confirmBy : null;
    const vacate = this.#vacateAt();
    // Past the delay with members still in theirs: their leaves call settle.
    if (vacate !== null && (vacate > now || this.#host.memberCount() === 0)) due = due === null ? vacate : Math.min(due, vacate);
    return due === null ? null : Math.max(due, now);
  }

  /** Whether a decision is still to come (the room must keep its storage until it is made). */
  get waiting(): boolean {
    return this.#unconfirmed.size > 0 || this.#emptySince !== null;
  }

  /** Makes what is due: the leaves of members who did not come back, then the vacated room. */
  settle(now: number): void {
    if (this.#unconfirmed.size > 0 && now >= this.#confirmBy) {
      for (const id of this.#unconfirmed) {
        this.#record.removeMember(id);
        this.#recorder.record({ change: { type: "member.left", id, inferred: true }, ts: now });
      }
      this.#unconfirmed.clear();
    }
    const vacate = this.#vacateAt();
    if (vacate === null || now < vacate || this.#host.memberCount() > 0) return;
    this.#emptySince = null;
    this.#record.setOccupied(false);
    this.#recorder.record({ change: { type: "room.vacated", inferred: this.#emptyAtStart }, ts: now });
    this.#emptyAtStart = false;
  }

  /**
   * When the room is vacated if no socket comes: the leave delay after its last socket went, and
   * never before the members still unconfirmed are settled (their leaves go first).
   */
  #vacateAt(): number | null {
    if (this.#emptySince === null) return null;
    const vacate = this.#emptySince + this.#options.leaveDelayMs;
    return this.#unconfirmed.size > 0 ? Math.max(vacate, this.#confirmBy) : vacate;
  }

  /** After the room gave its storage back (deleteAll): nothing is recorded any more. */
  reset(): void {
    this.#unconfirmed.clear();
    this.#emptySince = null;
    this.#emptyAtStart = false;
  }
}
