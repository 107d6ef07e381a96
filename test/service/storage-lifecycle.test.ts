import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type LocalServer } from "../helpers/server";
import { publish, roomStats, TestSocket } from "../helpers/socket";
import { readUntil } from "../helpers/wait";

let server: LocalServer;

beforeAll(async () => {
  server = await startServer({ vars: { HISTORY_MAX_AGE_SECONDS: "2" } });
});

afterAll(async () => {
  await server?.stop();
});

/** Room databases on disk and their total size (each object has one .sqlite file, with -wal/-shm while open). */
function roomFiles(): { files: number; bytes: number; sizes: Map<string, number> } {
  const dir = readdirSync(server.dataDir).find((d) => d.endsWith("-Room"));
  if (!dir) return { files: 0, bytes: 0, sizes: new Map() };
  const sizes = new Map<string, number>();
  for (const name of readdirSync(join(server.dataDir, dir))) {
    if (name.startsWith("metadata")) continue;
    sizes.set(name, statSync(join(server.dataDir, dir, name)).size);
  }
  return { files: sizes.size, bytes: [...sizes.values()].reduce((a, b) => a + b, 0), sizes };
}

describe("room storage lifecycle", () => {
  it("creates nothing for rooms that are only looked at: 404, and no file", async () => {
    const before = roomFiles();
    for (let i = 0; i < 50; i++) {
      const res = await fetch(`${server.url}/rooms/nobody-${i}`);
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ error: "not_found" });
    }
    expect(roomFiles().files).toBe(before.files);
  });

  it("shows a room once it holds something, and gives its storage back when it is empty and its history aged out", async () => {
    const room = "short-lived";
    const answer = await publish(server.url, room, { once: true });
    expect(answer.status).toBe(200);
    // Known at once: the publish was answered after the directory learned of the room.
    const stats = await roomStats(server.url, room);
    expect(stats).toMatchObject({ room, seq: 1, published: 1 });
    const grown = roomFiles();
    expect(grown.bytes).toBeGreaterThan(8192);

    // No socket, and its one message is older than HISTORY_MAX_AGE_SECONDS soon: the room reports
    // its counters, deletes its storage and leaves the directory.
    const status = await readUntil(async () => (await fetch(`${server.url}/rooms/${room}`)).status, (s) => s === 404, { timeoutMs: 40_000, everyMs: 200, what: "the room's storage to go" });
    expect(status).toBe(404);
    // What is left on disk is an empty database stub of one page.
    const after = roomFiles();
    expect(after.bytes).toBeLessThan(grown.bytes);
    // Its counters reached the service-wide metrics before the storage went.
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(Number(/^fanout_messages_published_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(1);

    // The launcher removes such stubs when it next starts (no object has them open then).
    const stubs = [...after.sizes].filter(([name, size]) => name.endsWith(".sqlite") && size <= 4096).length;
    expect(stubs).toBeGreaterThan(0);
    await server.restart();
    expect(server.output()).toMatch(/removed \d+ empty room database files/);
    expect(roomFiles().files).toBeLessThanOrEqual(after.files - stubs);

    // Used again, it starts a new history under a new epoch.
    const s = await TestSocket.open(`${server.wsUrl}/rooms/${room}/ws?since=1&epoch=${stats.epoch}`);
    await s.waitFor((x) => x.events.some((e) => e.type === "lost"));
    expect(s.events.find((e) => e.type === "lost")).toMatchObject({ reason: "epoch" });
    s.close();
  }, 60_000);
});
