/** Concurrency and waiting, for code that fans work out (broadcasts, listings, retries). */

/** Runs `task` over `items` with at most `limit` in flight; resolves when all have settled. */
export async function forEachBounded<T>(items: readonly T[], limit: number, task: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      await task(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(Math.max(1, limit), items.length) }, worker));
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Hands out at most `perSecond` turns a second, in the order they are asked
 * for, to whoever shares it (0: every turn at once). The first is immediate.
 */
export class Pacer {
  readonly #intervalMs: number;
  #nextAt = 0;

  constructor(perSecond: number) {
    this.#intervalMs = perSecond > 0 ? 1000 / perSecond : 0;
  }

  /** Resolves when the caller's turn has come. */
  async turn(): Promise<void> {
    if (this.#intervalMs === 0) return;
    const now = Date.now();
    const at = Math.max(now, this.#nextAt);
    this.#nextAt = at + this.#intervalMs;
    if (at > now) await sleep(at - now);
  }
}
