import { logEvent } from "../../common/log";
import type { RoomCounters } from "../engine/counters";
import type { LocalMember } from "../engine/presence";
import type { FollowerMember, FollowerReport, RootRpc } from "./contracts";

/** Reports outside pushes go out this long after a change, so a burst of connects is one report. */
const REPORT_DELAY_MS = 200;

/** What a leaf's reports are made of, and where they go. */
export interface ReportSource {
  root(): RootRpc;
  readonly index: number;
  /** Where the leaf's sockets are level, how many it holds, how many are behind. */
  seq(): number;
  connections(): number;
  behind(): number;
  /** Reports go out only while the leaf knows where the room stands. */
  ready(): boolean;
  /** The root answered a report with the room's member count. */
  roomMembers(count: number): void;
  name(): string;
}

/**
 * What a leaf tells its root: its sockets, its members (as their state, not
 * as events, so a report repeated or lost changes nothing for good) and the
 * counters that grew since it last said. Each push's answer is a report; when
 * no push is flowing, a change is reported on its own a moment later.
 */
export class FollowerReports {
  /** Members held here, as reports describe them (present, or in their leave delay). */
  readonly #members = new Map<string, FollowerMember>();
  /** Members changed since the last report. */
  readonly #dirty = new Map<string, FollowerMember>();
  readonly #counters: RoomCounters;
  readonly #source: ReportSource;
  #timer: ReturnType<typeof setTimeout> | null = null;
  #reporting = false;
  #again = false;

  constructor(counters: RoomCounters, source: ReportSource) {
    this.#counters = counters;
    this.#source = source;
  }

  /** Members this leaf holds. */
  get members(): number {
    return this.#members.size;
  }

  /** A member appeared here, its connections here changed, or it left (null, after the leave delay). */
  memberChanged(id: string, view: LocalMember | null): void {
    const member: FollowerMember = view
      ? { id, present: true, connections: view.connections, verified: view.verified, ...(view.info === undefined ? {} : { info: view.info }) }
      : { id, present: false, connections: 0, verified: false };
    if (view) this.#members.set(id, member);
    else this.#members.delete(id);
    this.#dirty.set(id, member);
    this.soon();
  }

  /** The root retired the leaf: what it had not said is moot. */
  clear(): void {
    this.#dirty.clear();
  }

  /** What the root learns with a push's answer (and in reports between pushes). */
  take(full: boolean): FollowerReport {
    const members = full ? [...this.#members.values()] : [...this.#dirty.values()];
    this.#dirty.clear();
    const delta = this.#counters.unreported();
    // Counted as reported once it leaves: a lost answer loses these counts, never doubles them.
    if (delta) this.#counters.reported(delta);
    return { seq: this.#source.seq(), connections: this.#source.connections(), behind: this.#source.behind(), members, full, delta };
  }

  /** Reports a change of sockets or members when no push is flowing to carry it. */
  soon(): void {
    if (this.#reporting) {
      this.#again = true;
      return;
    }
    if (this.#timer !== null || !this.#source.ready()) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#reporting = true;
      const report = this.take(false);
      this.#source.root().followerReport(this.#source.index, report)
        .then(
          (members) => this.#source.roomMembers(members),
          (error: unknown) => {
            // The changes go with the next report.
            for (const member of report.members) if (!this.#dirty.has(member.id)) this.#dirty.set(member.id, member);
            logEvent("error", { room: this.#source.name(), leaf: this.#source.index, where: "leaf_report", error: String(error) });
          },
        )
        .finally(() => {
          this.#reporting = false;
          if (this.#again) {
            this.#again = false;
            this.soon();
          }
        });
    }, REPORT_DELAY_MS);
  }
}
