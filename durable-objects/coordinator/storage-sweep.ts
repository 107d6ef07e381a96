import type { RoomCounterValues } from "../../protocol";
import { addCounters, zeroCounters } from "../../common/counters";
import { logEvent } from "../../common/log";
import type { GiveBackAnswer } from "./room-contract";
import type { Directory } from "./directory";

/** Rooms one sweep asks at most: with one call each, it bounds an invocation's subrequests. */
export const SWEEP_ROOMS = 200;
/** Calls in flight at once. */
const CONCURRENCY = 8;
/** Sweeps run at most this often: a burst of rooms falling due costs one invocation a second, not one per room. */
export const SWEEP_GAP_MS = 1000;
/**
 * A room that will say when it can be asked (it has sockets, or webhook events
 * waiting) is asked again after this long anyway, in case its report was lost.
 */
const UNTOLD_RECHECK_MS = 3_600_000;
/** A room whose call failed is asked again after this long. */
const FAILED_RETRY_MS = 60_000;

/** What the sweep needs of its shard. */
export interface SweepHost {
  readonly directory: Directory;
  /** Asks `room`, by name, to give its storage back if it can (Room.giveBack). */
  ask(room: string): Promise<GiveBackAnswer>;
  /** Counters the rooms that gave their storage back had not reported yet. */
  counted(delta: RoomCounterValues): void;
}

/**
 * The directory's rooms give their storage back when their shard asks them,
 * by name, once the time they gave has come (their newest message aged out of
 * the history bound, nothing else holding it). A room named by the call that
 * starts it always knows who it is, which one its own alarm may not: the
 * runtime starts an object for an alarm without its name.
 */
export class StorageSweep {
  readonly #host: SweepHost;
  /** Rooms being asked; true once one listed itself again meanwhile (it wrote after it was asked). */
  readonly #asking = new Map<string, boolean>();

  constructor(host: SweepHost) {
    this.#host = host;
  }

  /** A room reported that it holds storage (its instance's first write). */
  listed(room: string): void {
    if (this.#asking.has(room)) this.#asking.set(room, true);
  }

  /** Asks the rooms due by `now`; returns whether more were due than one sweep asks. */
  async run(now: number): Promise<boolean> {
    const directory = this.#host.directory;
    const rooms = directory.due(now, SWEEP_ROOMS).filter((room) => !this.#asking.has(room));
    const delta = zeroCounters();
    let counted = false;
    let next = 0;
    const askNext = async (): Promise<void> => {
      while (next < rooms.length) {
        const room = rooms[next++] as string;
        this.#asking.set(room, false);
        try {
          const answer = await this.#host.ask(room);
          if (!answer.gone) directory.setDue(room, answer.due ?? Date.now() + UNTOLD_RECHECK_MS);
          // A room that wrote again while it was asked holds storage again: asked once more, it gives its time.
          else if (this.#asking.get(room)) directory.setDue(room, Date.now());
          else directory.remove(room);
          if (answer.gone && answer.delta) {
            addCounters(delta, answer.delta);
            counted = true;
          }
        } catch (error) {
          directory.setDue(room, Date.now() + FAILED_RETRY_MS);
          logEvent("error", { where: "storage_sweep", room, error: String(error) });
        } finally {
          this.#asking.delete(room);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, rooms.length) }, askNext));
    if (counted) this.#host.counted(delta);
    return rooms.length === SWEEP_ROOMS;
  }
}
