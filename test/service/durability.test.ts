import { describe, expect, it } from "vitest";
import type { ServerMessage } from "../../protocol";
import type { LocalServer } from "../helpers/server";
import { managedServers } from "../helpers/servers";
import { TestSocket } from "../helpers/socket";
import { sleep } from "../helpers/wait";

const serve = managedServers();

/** Every message a room still holds, read by a socket that resumes from 0 and acks as it goes. */
async function historyOf(server: LocalServer, room: string, count: number): Promise<ServerMessage[]> {
  const reader = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?since=0`);
  await reader.waitForMessages(count, 20_000);
  reader.close();
  return reader.messages;
}

describe("durability", () => {
  it("keeps every acknowledged publish through kill -9 of workerd and a restart, and resumes without duplicates", async () => {
    const vars = { HISTORY_MAX_MESSAGES: "10000" };
    const first = await serve({ vars });
    const room = "kill-nine";
    const live = await TestSocket.open(`${first.wsUrl}/rooms/${room}/ws`);
    // Ten publishers in flight: flushes coalesce, so acknowledged messages share rows and commits.
    const acknowledged = new Map<number, string>();
    let stop = false;
    let next = 0;
    const publishers = Array.from({ length: 10 }, async () => {
      while (!stop) {
        const data = JSON.stringify({ n: next++ });
        try {
          const res = await fetch(`${first.url}/rooms/${room}/publish`, { method: "POST", headers: { "content-type": "application/json" }, body: data });
          if (res.ok) acknowledged.set(((await res.json()) as { seq: number }).seq, data);
        } catch {
          // The server died under this request: it was never acknowledged.
        }
      }
    });
    await sleep(1500);
    await first.stop("SIGKILL");
    stop = true;
    await Promise.all(publishers);
    expect(acknowledged.size).toBeGreaterThan(100);

    // What the live socket saw before the kill: each seq once, in order.
    const seen = live.messages.map((m) => m.seq);
    expect(seen).toEqual(Array.from({ length: seen.length }, (_, i) => i + 1));

    const second = await serve({ vars, dataDir: first.dataDir, port: first.port });
    const highest = Math.max(...acknowledged.keys());
    const stored = await historyOf(second, room, highest);
    const bySeq = new Map(stored.map((m) => [m.seq, JSON.stringify(m.data)]));
    for (const [seq, data] of acknowledged) expect(bySeq.get(seq), `seq ${seq}`).toBe(data);
    expect(stored.map((m) => m.seq)).toEqual(Array.from({ length: stored.length }, (_, i) => i + 1));

    // A client that resumes from what it saw gets the rest, once each, and seq continues after a new publish.
    const last = seen.at(-1) ?? 0;
    const resumed = await TestSocket.open(`${second.wsUrl}/rooms/${room}/ws?since=${last}`);
    const answer = await fetch(`${second.url}/rooms/${room}/publish`, { method: "POST", body: "after restart" });
    const after = ((await answer.json()) as { seq: number }).seq;
    expect(after).toBe(stored.length + 1);
    await resumed.waitFor((s) => s.messages.some((m) => m.seq === after), 20_000, "the message published after the restart");
    const resumedSeqs = resumed.messages.map((m) => m.seq);
    expect(resumedSeqs).toEqual(Array.from({ length: after - last }, (_, i) => last + 1 + i));
    resumed.close();
  }, 90_000);
});
