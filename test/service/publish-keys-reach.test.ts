import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PublishedEvent, ServerError } from "../../protocol";
import { startServer, type LocalServer } from "../helpers/server";
import { roomStats, TestSocket } from "../helpers/socket";

/**
 * An idempotency key is recognised for as long as docs/history.md promises
 * (the shortest of PUBLISH_DEDUPE_SECONDS, the age bound, and its row's life
 * in the ring), however many other keys the room was sent meanwhile: the
 * room's memory holds the newest keys, and a key it no longer holds there is
 * looked up in the rows. Through a restart too, when the keys are rebuilt.
 */
const OTHER_KEYS = 60_000;
const BURST = 2_000;
let server: LocalServer;
beforeAll(async () => {
  // A ring of 32,768 rows, ten minutes of reach, and flushes that wait 20 ms to coalesce a burst into few rows:
  // the first key's row stays within reach for the whole test.
  server = await startServer({
    vars: { HISTORY_MAX_MESSAGES: "32768", PUBLISH_DEDUPE_SECONDS: "600", HISTORY_MAX_AGE_SECONDS: "600", FLUSH_DELAY_MS: "20", CLIENT_FRAMES_PER_SECOND: "0" },
  });
});
afterAll(async () => {
  await server?.stop();
});

/** Publishes from `socket` with `key`, and returns its answer (`published`, or an `error`). */
async function keyed(socket: TestSocket, key: string, data: unknown): Promise<PublishedEvent | ServerError> {
  const id = `${key}-${socket.events.length}`;
  const answer = () => socket.events.find((e): e is PublishedEvent | ServerError => (e.type === "published" || e.type === "error") && e.id === id);
  socket.send({ type: "publish", data, key, id });
  await socket.waitFor(() => answer() !== undefined, 20_000, `the answer to ${key}`);
  return answer() as PublishedEvent | ServerError;
}


describe("a publish key", () => {
  it(`is recognised after ${OTHER_KEYS.toLocaleString("en-US")} other keys within reach, and after a restart`, { timeout: 300_000 }, async () => {
    const room = "keys-many";
    const url = `${server.wsUrl}/rooms/${room}/ws`;
    const socket = await TestSocket.open(url);
    await socket.waitFor((s) => s.events.some((e) => e.type === "welcome"), 10_000, "the welcome");
    expect(await keyed(socket, "first", { n: 0 })).toMatchObject({ seq: 1 });
    // Answers counted as they come (a filter over every event on every frame would take minutes).
    let answered = 0;
    let scanned = socket.events.length;
    const answers = (): number => {
      for (; scanned < socket.events.length; scanned++) if (socket.events[scanned]?.type === "published") answered += 1;
      return answered;
    };
    // Bursts of keyed publishes, each burst answered before the next.
    for (let from = 1; from <= OTHER_KEYS; from += BURST) {
      for (let n = from; n < from + BURST; n++) socket.send({ type: "publish", data: { n }, key: `other-${n}` });
      await socket.waitFor(() => answers() >= from + BURST - 1, 60_000, `answers through ${from + BURST - 1}`);
    }
    expect(socket.events.at(-1)).toMatchObject({ type: "published", seq: OTHER_KEYS + 1 });
    // Its row is still in the ring (fewer rows written than the ring holds): the promise says it is still recognised.
    const rows = (await roomStats(server.url, room)).historyRowsWritten;
    expect(rows).toBeLessThan(32_768);
    expect(await keyed(socket, "first", { n: 0 })).toEqual({ type: "published", id: expect.any(String), seq: 1, duplicate: true });
    expect(await keyed(socket, "other-2", { n: 2 })).toMatchObject({ seq: 3, duplicate: true });
    expect(await keyed(socket, "first", { n: "another body" })).toMatchObject({ type: "error", code: "conflict" });
    socket.close();

    // A restart: the keys are rebuilt from the rows, the oldest of them as well.
    await server.restart();
    const again = await TestSocket.open(url);
    await again.waitFor((s) => s.events.some((e) => e.type === "welcome"), 10_000, "the welcome");
    expect(await keyed(again, "first", { n: 0 })).toMatchObject({ seq: 1, duplicate: true });
    expect(await keyed(again, `other-${OTHER_KEYS}`, { n: OTHER_KEYS })).toMatchObject({ seq: OTHER_KEYS + 1, duplicate: true });
    expect(await keyed(again, "new", { n: -1 })).toEqual({ type: "published", id: expect.any(String), seq: OTHER_KEYS + 2 });
    again.close();
  });
});
