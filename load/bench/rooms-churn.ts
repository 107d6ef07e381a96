import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { defineBench } from "../src/kit/bench";
import { countFds, rssMb } from "../src/kit/proc";
import { Server } from "../src/kit/server";
import { paced, sleep } from "../src/kit/time";

/** Files and MB under a directory (a file removed while it is read is skipped: an object closed its database). */
function disk(dir: string): { files: number; mb: number } {
  let files = 0;
  let bytes = 0;
  const walk = (at: string): void => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) walk(path);
      else {
        try {
          bytes += statSync(path).size;
          files += 1;
        } catch {
          // removed while we looked
        }
      }
    }
  };
  walk(dir);
  return { files, mb: Math.round((bytes / 1048576) * 10) / 10 };
}

export default defineBench({
  name: "rooms-churn",
  title: "what strangers' room names cost the local server's disk and memory",
  about: `N looks at rooms that do not exist, then N rooms that each get one message; files and bytes under the data
directory and workerd's RSS after each step, after the rooms' history has aged out (they give their storage
back), and after a restart (the launcher removes the empty database stubs). Starts its own server with
HISTORY_MAX_AGE_SECONDS=--age on 127.0.0.1 and a fresh data directory; stops it at the end. Build first:
npm run build.`,
  options: {
    rooms: { default: "1000", help: "rooms looked at, and rooms published into" },
    age: { default: "5", help: "HISTORY_MAX_AGE_SECONDS of the server" },
    port: { default: "18731", help: "port of the server" },
  },
  async run(args) {
    const rooms = args.int("rooms", { min: 1 });
    const age = args.int("age", { min: 1 });
    const server = await Server.start({ kind: "ours", port: args.int("port"), vars: { HISTORY_MAX_AGE_SECONDS: String(age) } });
    let failures = 0;
    const each = (work: (i: number) => Promise<void>): Promise<void> =>
      paced(rooms, { concurrency: 20 }, (i) => work(i).catch(() => void (failures += 1)));
    const now = (step: string, extra: Record<string, unknown> = {}) => ({ step, ...disk(server.dataDir), rssMb: Math.round(rssMb(server.pid)), ...extra });
    const report = [now("started")];
    await each(async (i) => void (await (await fetch(`${server.url}/rooms/look-${i}`)).arrayBuffer()));
    report.push(now(`${rooms} looks at rooms that do not exist`));
    await each(async (i) => void (await (await fetch(`${server.url}/rooms/used-${i}/publish`, { method: "POST", body: "once" })).arrayBuffer()));
    report.push(now(`${rooms} rooms with one message each`, { failedRequests: failures, fds: countFds(server.pid) }));
    if (!server.alive()) {
      console.error(server.output().slice(-3000));
      return 1;
    }
    // History ages out after --age s; each room's alarm then reports and gives its storage back.
    const deadline = Date.now() + (age + 60) * 1000;
    let known = rooms;
    while (known > 0 && Date.now() < deadline) {
      await sleep(2000);
      known = 0;
      for (let i = 0; i < rooms; i += Math.max(1, Math.floor(rooms / 50))) if ((await fetch(`${server.url}/rooms/used-${i}`)).status === 200) known += 1;
    }
    report.push(now(`after their history aged out (${age} s) and they gave their storage back`, { sampledStillKnown: known }));
    await server.restart();
    const removed = [...server.output().matchAll(/removed (\d+) empty room database files/g)].at(-1)?.[1] ?? "0";
    report.push(now("after a restart", { stubsRemoved: Number(removed) }));
    console.log(JSON.stringify(report, null, 2));
  },
});
