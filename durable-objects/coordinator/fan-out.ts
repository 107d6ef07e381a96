import { forEachBounded, sleep } from "../../common/bounded";
import { fullJitter } from "../../common/jitter";

/** What one room answered a broadcast publish with (a subset of the Room's PublishOutcome). */
export type RoomDelivery = { recipients: number; duplicate: boolean } | { refused: { error: string; message: string } };

/** Totals of a fan-out to a set of rooms. */
export interface FanOutResult {
  /** Rooms that hold the message now: delivered by this call, or by an earlier one with the same key. */
  rooms: number;
  /** Sockets the message was sent to by this call. */
  sockets: number;
  /** Rooms that already had the idempotency key, so sent nothing. */
  duplicates: number;
  /** Rooms whose beforePublish hook refused the message (not retried: the same message would be refused again). */
  refused: number;
  /** Rooms still failing after every attempt. */
  failed: string[];
  /** Rooms reached at the pace of rooms without sockets (BROADCAST_IDLE_ROOMS_PER_SECOND). */
  paced: number;
}

export interface FanOutOptions {
  concurrency: number;
  /** Attempts per room, the first one included. */
  attempts: number;
  /** Base of the full-jitter pause between rounds. */
  backoffMs: number;
  /** Called with each error, for logging. */
  onError?: (room: string, attempt: number, error: unknown) => void;
  /** Awaited before each send, retries included: the rooms' pace (absent: as fast as `concurrency` allows). */
  pace?: () => Promise<void>;
  /** Called with each room that answered it holds the message (delivered now, or a duplicate). */
  delivered?: (room: string) => void;
}

/**
 * Publishes to every room with bounded concurrency. Rooms that throw are
 * retried in later rounds, after a jittered pause that lets a briefly
 * overloaded object recover. `send` must be idempotent (the Room dedupes by
 * idempotency key), because an attempt that failed may still have published.
 * A room whose hook refused the message is counted apart and not retried.
 */
export async function fanOut(
  rooms: readonly string[],
  send: (room: string) => Promise<RoomDelivery>,
  options: FanOutOptions,
): Promise<FanOutResult> {
  const result: FanOutResult = { rooms: 0, sockets: 0, duplicates: 0, refused: 0, failed: [], paced: options.pace ? rooms.length : 0 };
  let pending = rooms;
  for (let attempt = 0; attempt < options.attempts && pending.length > 0; attempt++) {
    if (attempt > 0) await sleep(fullJitter(attempt - 1, { baseMs: options.backoffMs, maxMs: options.backoffMs * 2 ** options.attempts }));
    const failed: string[] = [];
    await forEachBounded(pending, options.concurrency, async (room) => {
      try {
        await options.pace?.();
        const delivery = await send(room);
        if ("refused" in delivery) {
          // A hook that failed may succeed on a retry; a refusal is the room's answer.
          if (delivery.refused.error === "internal") throw new Error(`the room could not check the message: ${delivery.refused.message}`);
          result.refused += 1;
          return;
        }
        result.rooms += 1;
        result.sockets += delivery.recipients;
        if (delivery.duplicate) result.duplicates += 1;
        options.delivered?.(room);
      } catch (error) {
        options.onError?.(room, attempt + 1, error);
        failed.push(room);
      }
    });
    pending = failed;
  }
  result.failed = [...pending];
  return result;
}
