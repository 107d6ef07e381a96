import type { RoomCounters } from "./counters";
import type { BatchLimits, Run } from "./frames";
import type { Cursor } from "./cursor";
import { ROOM_SHAPE, type StreamEvent, type StreamShape } from "./stream-shape";

/** What a catch-up read returned. */
export interface SourceRead {
  /** Runs of consecutive messages from `from` (or from the oldest kept one), in order. */
  runs: Run[];
  /** Messages at the start of the request that are no longer kept, if any. */
  lost: { from: number; to: number } | null;
  /** The next seq to read, and the row that holds it (a hint for the next read). */
  nextSeq: number;
  nextRow: number;
  rowsRead: number;
}

/**
 * Where a room's messages are read from for catch-up and resume: the room's
 * own SQLite history (on the room's object), or a ring of recent messages (on
 * the objects that follow the room: a sharded room's leaves).
 */
export interface MessageSource {
  /** The latest seq the source holds. */
  readonly seq: number;
  /** The oldest seq it still serves, null when none, for a source that knows (a room's history; a leaf's ring does not). */
  oldest?(now?: number): number | null;
  /**
   * Messages from seq `from` on, as runs that each fit one frame, until at
   * least `budget` bytes are taken or the latest message is reached.
   * `hintRow` is where the previous read stopped (0 when unknown).
   */
  read(from: number, budget: number, limits: BatchLimits, hintRow?: number, now?: number): SourceRead;
}

/**
 * One room as an object that holds sockets sees it: where its messages come
 * from, the cursors of the sockets that follow it here, and how far the live
 * path has gone. The room's own object has one stream; so has each leaf of a
 * sharded room.
 */
export class Stream {
  readonly room: string;
  readonly source: MessageSource;
  /**
   * How its events look on its sockets' wire: with the room's name in every
   * event on a multiplexed connection, without it on a room's own socket,
   * Pusher's on the Pusher front door. The source's messages are already in
   * that shape (the object that follows the room stores them so).
   */
  readonly shape: StreamShape;
  /** The cursors of this room on this object, by socket. */
  readonly cursors = new Map<WebSocket, Cursor>();
  /** Highest seq handed to the live path; new sockets start level with it. */
  flushedSeq: number;
  /** Cursors catching up from the source right now. */
  behind = 0;
  /** Where deliveries of this room are counted, when not in the object's own counters (an object that follows many rooms counts each apart). */
  readonly counters: RoomCounters | null;

  constructor(room: string, source: MessageSource, shape: StreamShape = ROOM_SHAPE, counters: RoomCounters | null = null) {
    this.room = room;
    this.source = source;
    this.shape = shape;
    this.counters = counters;
    this.flushedSeq = source.seq;
  }

  /** `event` as text for `cursor`'s socket (null: this stream's sockets are not told of it). */
  text(event: StreamEvent, cursor: Cursor | null = null): string | null {
    return this.shape.event(event, cursor);
  }

  /** The source starts over (the room gave its storage back, or a leaf restarted): so does the live path. */
  reset(): void {
    this.flushedSeq = this.source.seq;
  }
}
