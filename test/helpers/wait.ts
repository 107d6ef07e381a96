/**
 * Waiting in tests: a pause, and polling until something holds. Plain timers
 * only (no Node import), so tests inside workerd and tests in Node share them.
 */

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export interface WaitOptions {
  /** How long to wait before failing. */
  timeoutMs?: number;
  /** What is waited for, named in the failure. */
  what?: string;
  /** Where things stood, added to the failure's message (the last frames, the server's output). */
  detail?: () => string;
}

export interface PollOptions extends WaitOptions {
  /** Pause between checks. */
  everyMs?: number;
}

function timedOut(timeoutMs: number, what: string, detail?: () => string): Error {
  return new Error(`timed out after ${timeoutMs} ms waiting for ${what}${detail ? `; ${detail()}` : ""}`);
}

/** Polls a synchronous `check` until it holds; throws after the timeout, naming what it waited for. */
export async function until(check: () => boolean, { timeoutMs = 5000, what = "condition", everyMs = 5, detail }: PollOptions = {}): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw timedOut(timeoutMs, what, detail);
    await sleep(everyMs);
  }
}

/** Polls an asynchronous `check` (a request, a query) until it resolves true; throws after the timeout. */
export async function eventually(check: () => Promise<boolean>, { timeoutMs = 5000, what = "condition", everyMs = 20, detail }: PollOptions = {}): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw timedOut(timeoutMs, what, detail);
    await sleep(everyMs);
  }
}

/**
 * Reads a value until `check` accepts it, and returns it; the failure shows the
 * last value read, so a test that times out says where things stood.
 */
export async function readUntil<T>(read: () => Promise<T>, check: (value: T) => boolean, { timeoutMs = 10_000, what = "condition", everyMs = 100 }: PollOptions = {}): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (check(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value).slice(0, 600)}`);
    await sleep(everyMs);
  }
}

/**
 * Waits on something that says when it changed (a socket's frames, a server's
 * requests): each wait's predicate is checked again on every `notify`, so it
 * ends as soon as it holds, with no polling interval. `detail` adds where
 * things stood to a timeout's message.
 */
export class Waiters {
  #waiters = new Set<() => void>();

  /** Resolves once `predicate` holds, re-checked on every `notify`; fails after the timeout. */
  async waitFor(predicate: () => boolean, { timeoutMs = 5000, what = "condition", detail }: WaitOptions = {}): Promise<void> {
    if (predicate()) return;
    await new Promise<void>((resolve, reject) => {
      const check = () => {
        if (!predicate()) return;
        clearTimeout(timer);
        this.#waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        reject(timedOut(timeoutMs, what, detail));
      }, timeoutMs);
      this.#waiters.add(check);
    });
  }

  /** Something changed: every wait checks its predicate again. */
  notify(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }
}
