import type { LeafReport, LeafSnapshot } from "../leaf/rpc";
import { RoomFollower, type FollowerHost } from "../leaf/follower";
import { LeafReports, type ReportSource } from "../leaf/leaf-reports";
import { MEMORY_ONLY, RoomCounters } from "../engine/counters";
import type { StreamShape } from "../engine/stream-shape";
import type { SocketEngine } from "../engine/socket-engine";
import type { Room } from "../room/room";

/** What one followed room needs of the hub. */
export interface HubRoomHost extends FollowerHost {
  readonly engine: SocketEngine;
  /** For logs. */
  name(): string;
}

/**
 * One room as a hub of multiplexed connections follows it: its ring, pushes
 * and fetches (RoomFollower, as a leaf's), its stream of scoped events (every
 * event names the room), and the reports that tell the room's root how many
 * of the hub's connections follow it, which members they are, and what the
 * hub delivered of the room (its own counters, reported as a leaf reports
 * its).
 */
export class HubRoom implements ReportSource {
  readonly room: string;
  readonly follower: RoomFollower;
  readonly counters = new RoomCounters(MEMORY_ONLY);
  readonly #reports: LeafReports;
  readonly #host: HubRoomHost;
  readonly #startedAt = Date.now();

  constructor(room: string, host: HubRoomHost, shape: StreamShape, limits: { maxMessages: number; batch: { maxBytes: number; maxEvents: number } }) {
    this.room = room;
    this.#host = host;
    this.#reports = new LeafReports(this.counters, this);
    this.follower = new RoomFollower(
      room,
      host.engine,
      this.counters,
      { maxMessages: limits.maxMessages, batch: limits.batch, shape, counters: this.counters },
      host,
      { memberChanged: (id, view) => this.#reports.memberChanged(id, view) },
    );
  }

  get index(): number {
    return this.#host.index;
  }

  /** Subscribers of the room on this hub. */
  get subscribers(): number {
    return this.follower.stream.cursors.size;
  }

  /** The room's subscribers here changed: the root hears of it a moment later. */
  changed(): void {
    this.#reports.soon();
  }

  /** What a push's answer tells the root. */
  report(full: boolean): LeafReport {
    return this.#reports.take(full);
  }

  /** The root stops pushing: the room is forgotten here, unless a subscriber arrived since. */
  retire(): boolean {
    if (this.subscribers > 0) return false;
    this.follower.forget();
    this.#reports.clear();
    return true;
  }

  snapshot(): LeafSnapshot {
    const ring = this.follower.ring.size;
    let inFlight = 0;
    let max = 0;
    for (const cursor of this.follower.stream.cursors.values()) {
      const bytes = cursor.socket.window.inFlight;
      inFlight += bytes;
      if (bytes > max) max = bytes;
    }
    return {
      index: this.#host.index,
      connections: this.subscribers,
      members: this.#reports.members,
      behind: this.follower.stream.behind,
      seq: this.follower.ring.seq,
      windowBytesInFlight: inFlight,
      windowBytesMax: max,
      ringMessages: ring.messages,
      ringBytes: ring.bytes,
      instanceStartedAt: this.#startedAt,
      counters: this.counters.snapshot(),
      unreported: this.counters.unreported(),
    };
  }

  // The reports' source ---------------------------------------------------

  root(): DurableObjectStub<Room> {
    return this.#host.root(this.room);
  }

  seq(): number {
    return this.follower.ring.seq;
  }

  connections(): number {
    return this.subscribers;
  }

  behind(): number {
    return this.follower.stream.behind;
  }

  ready(): boolean {
    return this.follower.known;
  }

  roomMembers(): void {}

  name(): string {
    return `${this.#host.name()}:${this.room}`;
  }
}
