import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BroadcastResult, HistoryPage } from "../../protocol";
import { rssMb, startServer, type LocalServer } from "../helpers/server";
import { TestSocket } from "../helpers/socket";
import { sleep } from "../helpers/wait";

/**
 * A broadcast to thousands of rooms without sockets: each is woken (or
 * created) only to store the message, and the local server holds every room
 * it woke in one process for a while after. Such rooms are reached at
 * BROADCAST_IDLE_ROOMS_PER_SECOND (50), so the rooms in memory at once stay
 * bounded: the broadcast completes, nobody else gets a 500 meanwhile, and a
 * retry with the same key counts what is done and converges at once.
 *
 * 4,000 rooms (80 s at the pace) are enough to run the unpaced server out of
 * memory; the documented maximum, 10,000, is the broadcast-idle benchmark (load/bench/broadcast-idle.ts).
 */
const ROOMS = 4000;
let server: LocalServer;
beforeAll(async () => {
  server = await startServer({ vars: { BROADCAST_MAX_ROOMS: "10000" } });
});
afterAll(async () => {
  await server?.stop();
});

async function broadcast(rooms: string[], key: string): Promise<{ status: number; answer: BroadcastResult; ms: number }> {
  const started = Date.now();
  const res = await fetch(`${server.url}/broadcast`, {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify({ data: { notice: key }, rooms }),
  });
  return { status: res.status, answer: (await res.json()) as BroadcastResult, ms: Date.now() - started };
}

describe("a broadcast to rooms without sockets", () => {
  it(`reaches ${ROOMS.toLocaleString("en-US")} of them at their pace with bounded memory, no 500 for anyone else, and a retry that converges at once`, { timeout: 240_000 }, async () => {
    // Someone else on the server: a live room, published into and read while the broadcast runs.
    const reader = await TestSocket.open(`${server.wsUrl}/rooms/bi-live/ws`);
    await reader.waitFor((s) => s.events.some((e) => e.type === "welcome"), 10_000, "the welcome");
    const before = rssMb(server.workerdPid);
    let peak = before;
    let probing = true;
    const statuses: number[] = [];
    let published = 0;
    /** A request's status, or 0 when it got no answer at all. */
    const statusOf = async (request: Promise<Response>): Promise<number> => {
      try {
        const res = await request;
        await res.text();
        return res.status;
      } catch {
        return 0;
      }
    };
    const probe = (async () => {
      for (let i = 0; probing; i++) {
        const status = await statusOf(fetch(`${server.url}/rooms/bi-live/publish`, { method: "POST", body: String(i) }));
        if (status === 200) published += 1;
        statuses.push(status, await statusOf(fetch(`${server.url}/rooms/bi-live/messages?limit=10`)));
        peak = Math.max(peak, rssMb(server.workerdPid));
        await sleep(250);
      }
    })();

    const rooms = Array.from({ length: ROOMS }, (_, i) => `bi-${String(i).padStart(5, "0")}`);
    const first = await broadcast(rooms, "idle-1");
    const retry = await broadcast(rooms, "idle-1");
    probing = false;
    await probe;

    // Nobody else got a 500 (or anything but 200) while it ran.
    expect(statuses.length).toBeGreaterThan(20);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    await reader.waitForMessages(published);
    // Unpaced, the server held every room it woke (about 250 KB each), and near 1 GB it ran out.
    expect(peak - before).toBeLessThan(600);
    expect(first.status).toBe(200);
    expect(first.answer).toMatchObject({ rooms: ROOMS, sockets: 0, duplicates: 0, duplicate: false, failedCount: 0, failedShards: [], paced: ROOMS });
    // The retry: every room is known to hold it, so nothing is woken again and it answers at once.
    expect(retry.answer).toMatchObject({ rooms: ROOMS, sockets: 0, duplicates: ROOMS, duplicate: true, failedCount: 0, paced: 0 });
    expect(retry.ms).toBeLessThan(10_000);
    // Every room stored it once.
    for (const room of [rooms[0], rooms[ROOMS - 1]] as string[]) {
      const page = (await (await fetch(`${server.url}/rooms/${room}/messages`)).json()) as HistoryPage;
      expect(page.messages.map((m) => m.data)).toEqual([{ notice: "idle-1" }]);
    }
    reader.close();
  });
});
