/**
 * Waiting in tests: a pause, and polling until something holds. Plain timers
 * only (no Node import), so tests inside workerd and tests in Node share them.
 */

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export interface PollOptions {
  /** How long to wait before failing. */
  timeoutMs?: number;
  /** What is waited for, named in the failure. */
  what?: string;
  /** Pause between checks. */
  everyMs?: number;
}

/** Polls a synchronous `check` until it holds; throws after the timeout, naming what it waited for. */
export async function until(check: () => boolean, { timeoutMs = 5000, what = "condition", everyMs = 5 }: PollOptions = {}): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Polls an asynchronous `check` (a request, a query) until it resolves true; throws after the timeout. */
export async function eventually(check: () => Promise<boolean>, { timeoutMs = 5000, what = "condition", everyMs = 20 }: PollOptions = {}): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
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
