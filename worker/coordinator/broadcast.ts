import type { BroadcastResult } from "../../protocol";
import { logEvent } from "../../common/log";
import { forEachBounded, sleep } from "../../common/bounded";
import { fullJitter } from "../../common/jitter";
import { FANOUT_PAGE_ROOMS, type CoordinatorConfig } from "../../common/coordinator-config";
import { FAILED_NAMES_MAX, SHARD_ATTEMPTS, SHARD_CONCURRENCY } from "./policy";
import type { BroadcastMessage, PageFanOutResult, RegistryPage } from "../../durable-objects/coordinator/coordinator";
import type { FanOutResult } from "../../durable-objects/coordinator/fan-out";
import type { BroadcastTarget } from "./requests";
import { groupByShard, shardStub } from "../../common/coordinator-shards";
import type { CoordinatorNamespace } from "../env";

/** The per-room idempotency key of a broadcast: the same on every retry of the same request. */
export function roomKey(idempotencyKey: string): string {
  return `broadcast:${idempotencyKey}`;
}

/**
 * Runs a broadcast from the worker. Both kinds of target go through the
 * coordinator shards, which do the fan-out to rooms (bounded concurrency,
 * retries):
 * - an explicit list is split by shard (the shard a room hashes to), one call
 *   per shard, no registry lookup;
 * - a prefix (or everything) asks every shard to deliver to its live rooms,
 *   page by page, so no single invocation makes more than a page's worth of
 *   subrequests.
 * A shard call that throws is repeated (rooms dedupe by key, so this is safe).
 */
export async function runBroadcast(
  namespace: CoordinatorNamespace,
  config: CoordinatorConfig,
  target: BroadcastTarget,
  dataJson: string,
  idempotencyKey: string,
): Promise<BroadcastResult> {
  const message: BroadcastMessage = { dataJson, key: roomKey(idempotencyKey) };
  const total: FanOutResult = { rooms: 0, sockets: 0, duplicates: 0, refused: 0, failed: [], paced: 0 };
  let failedCount = 0;
  const failedShards: number[] = [];
  const add = (part: FanOutResult) => {
    total.rooms += part.rooms;
    total.sockets += part.sockets;
    total.duplicates += part.duplicates;
    total.refused += part.refused;
    total.paced += part.paced;
    failedCount += part.failed.length;
    for (const room of part.failed) if (total.failed.length < FAILED_NAMES_MAX) total.failed.push(room);
  };

  if (target.kind === "rooms") {
    // Chunks of a page at most, so one shard invocation's subrequests stay bounded here too.
    const groups = [...groupByShard(target.rooms, config.shards)].flatMap(([index, rooms]) =>
      chunks(rooms, FANOUT_PAGE_ROOMS).map((chunk) => [index, chunk] as const),
    );
    await forEachBounded(groups, SHARD_CONCURRENCY, async ([index, rooms]) => {
      const part = await withRetries(index, () => shardStub(namespace, index).deliver(message, rooms));
      if (part) add(part);
      else {
        if (!failedShards.includes(index)) failedShards.push(index);
        add({ rooms: 0, sockets: 0, duplicates: 0, refused: 0, failed: [...rooms], paced: 0 });
      }
    });
  } else {
    const shards = Array.from({ length: config.shards }, (_, i) => i);
    await forEachBounded(shards, SHARD_CONCURRENCY, async (index) => {
      let after: string | null = null;
      do {
        const page: RegistryPage = { prefix: target.prefix, after };
        const part: PageFanOutResult | null = await withRetries(index, () => shardStub(namespace, index).deliverPage(message, page));
        if (!part) {
          failedShards.push(index);
          return;
        }
        add(part);
        after = part.next;
      } while (after !== null);
    });
  }

  failedShards.sort((a, b) => a - b);
  return {
    idempotencyKey,
    rooms: total.rooms,
    sockets: total.sockets,
    duplicates: total.duplicates,
    duplicate: total.rooms > 0 && total.duplicates === total.rooms,
    refused: total.refused,
    paced: total.paced,
    failed: total.failed,
    failedCount,
    failedShards,
  };
}

/** Calls a shard up to SHARD_ATTEMPTS times; null when every attempt threw. */
async function withRetries<T>(shard: number, call: () => Promise<T>): Promise<T | null> {
  for (let attempt = 0; attempt < SHARD_ATTEMPTS; attempt++) {
    if (attempt > 0) await sleep(fullJitter(attempt - 1, { baseMs: 100, maxMs: 100 * 2 ** SHARD_ATTEMPTS }));
    try {
      return await call();
    } catch (error) {
      logEvent("error", { where: "broadcast_shard", shard, attempt: attempt + 1, error: String(error) });
    }
  }
  return null;
}

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
