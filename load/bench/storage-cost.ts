import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import WebSocket from "ws";
import { defineBench, log } from "../src/kit/bench";
import { REPO_ROOT } from "../src/kit/paths";
import { Server } from "../src/kit/server";
import { paced, sleep } from "../src/kit/time";

/** What counting.ts counts for one class of object. */
interface ObjectCounts {
  calls: Record<string, number>;
  rowsWritten: number;
  setAlarm: number;
  deleteAlarm: number;
  deleteAll: number;
}

type Lifetime = "published" | "socket";

/**
 * A worker config for `checkout`'s service with its room and coordinator classes counted
 * (counting.ts): the checkout's own wrangler.toml (every binding, var and migration it has),
 * its entry replaced by one that wraps the two classes and answers GET /__counts.
 */
function countingConfig(checkout: string): string {
  const dir = mkdtempSync(join(tmpdir(), "storage-cost-"));
  const service = JSON.stringify(join(resolve(checkout), "worker/index.ts"));
  const counting = JSON.stringify(join(REPO_ROOT, "load/bench/storage-cost/counting.ts"));
  writeFileSync(
    join(dir, "entry.ts"),
    `import service, { Room, Coordinator } from ${service};
import { counting, counts, countsResponse } from ${counting};
export * from ${service};
const CountedRoom = counting(Room, counts.room);
const CountedCoordinator = counting(Coordinator, counts.coordinator);
export { CountedRoom as Room, CountedCoordinator as Coordinator };
export default {
  fetch(request: Request, env: never, ctx: ExecutionContext) {
    return new URL(request.url).pathname === "/__counts" ? countsResponse() : service.fetch(request, env, ctx);
  },
};
`,
  );
  const toml = readFileSync(join(checkout, "wrangler.toml"), "utf8").replace(/^main = .*$/m, 'main = "entry.ts"').replace(/^\[build\][^[]*/m, "");
  writeFileSync(join(dir, "wrangler.toml"), toml);
  return join(dir, "wrangler.toml");
}

async function publish(url: string, room: string): Promise<void> {
  const res = await fetch(`${url}/rooms/${room}/publish`, { method: "POST", body: "once" });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`publish into ${room}: ${res.status}`);
}

/** A socket opens, one publish reaches it, the socket closes. */
function socketLifetime(server: Server, room: string): Promise<void> {
  return new Promise((done, fail) => {
    const ws = new WebSocket(`${server.wsUrl}/rooms/${room}/ws`);
    ws.once("error", fail);
    ws.once("message", () => {
      publish(server.url, room).then(() => {
        ws.once("close", () => done());
        ws.close(1000);
      }, fail);
    });
  });
}

const per = (n: number, rooms: number): number => Math.round((n / rooms) * 100) / 100;

interface PerRoom {
  calls: Record<string, number>;
  rowsWritten: number;
  setAlarm: number;
  deleteAll: number;
}

interface LifetimeResult {
  target: string;
  lifetime: Lifetime;
  rooms: number;
  age: number;
  stillStored: number;
  errorLines: number;
  perRoom: Record<string, PerRoom>;
}

function perRoom(counts: Record<string, ObjectCounts>, rooms: number): Record<string, PerRoom> {
  return Object.fromEntries(
    Object.entries(counts).map(([object, c]) => [
      object,
      {
        calls: Object.fromEntries(Object.entries(c.calls).map(([name, n]) => [name, per(n, rooms)])),
        rowsWritten: per(c.rowsWritten, rooms),
        setAlarm: per(c.setAlarm, rooms),
        deleteAll: per(c.deleteAll, rooms),
      },
    ]),
  );
}

/** Calls a lifetime's own traffic makes, not its storage's: the publish, and the socket's upgrade and close. */
const TRAFFIC = new Set(["fetch", "publish", "webSocketMessage", "webSocketClose", "webSocketError"]);

export default defineBench({
  name: "storage-cost",
  title: "what a room's storage lifecycle costs in calls, rows written and alarms, counted inside the worker",
  about: `Counted inside the worker (load/bench/storage-cost/counting.ts wraps the room and coordinator classes of a
checkout, and the entry it is bundled with answers GET /__counts): this checkout ("ours") against another one
(--before DIR: the code before a change, its worker/index.ts and wrangler.toml bundled here), each on a local
server of its own with the accept gate off and HISTORY_MAX_AGE_SECONDS=--age, one after the other.
Two lifetimes, each of --rooms rooms and a server of its own:
  published: one publish into a new room, nothing else;
  socket:    a socket opens, one publish, the socket closes.
Then nothing is asked of the server until each room's history has aged out and every room has given its storage
back (--age + 40 s), the counts are read, and only then is each room checked to be gone (404: those looks would
count too). Printed per room: calls into the room and the coordinator by method, rows their SQL wrote, alarms set.`,
  options: {
    targets: { default: "before,ours", help: "of before, ours" },
    before: { help: "the checkout the target before counts" },
    rooms: { default: "200", help: "rooms of each lifetime" },
    age: { default: "5", help: "HISTORY_MAX_AGE_SECONDS" },
    port: { default: "18751", help: "port of each server in turn" },
  },
  limitSeconds: (args) => 300 + args.list("targets").length * 2 * (args.int("age", { min: 1 }) + 100),
  async run(args) {
    const rooms = args.int("rooms", { min: 1 });
    const age = args.int("age", { min: 1 });
    const before = args.text("before");
    const results: LifetimeResult[] = [];
    for (const target of args.list("targets")) {
      if (target !== "ours" && target !== "before") throw new Error(`--targets takes before and ours, got ${target}`);
      if (target === "before" && before === undefined) throw new Error("the target before needs --before DIR");
      const checkout = target === "before" ? (before as string) : REPO_ROOT;
      for (const lifetime of ["published", "socket"] as const satisfies readonly Lifetime[]) {
        const server = await Server.start({
          kind: "ours",
          port: args.int("port"),
          gate: "off",
          build: true,
          args: ["--config", countingConfig(checkout)],
          vars: { HISTORY_MAX_AGE_SECONDS: String(age) },
          unsetEnv: ["PUBLISH_KEY", "TOKEN_SECRET", "WEBHOOK_URL"],
        });
        const tag = Math.random().toString(36).slice(2, 8);
        const names = Array.from({ length: rooms }, (_, i) => `cost-${tag}-${i}`);
        await paced(rooms, { concurrency: 10 }, (i) => (lifetime === "published" ? publish(server.url, names[i] as string) : socketLifetime(server, names[i] as string)));
        await sleep((age + 40) * 1000);
        const counts = (await (await fetch(`${server.url}/__counts`)).json()) as Record<string, ObjectCounts>;
        let stillStored = 0;
        await paced(rooms, { concurrency: 10 }, async (i) => {
          const res = await fetch(`${server.url}/rooms/${names[i]}`);
          await res.arrayBuffer();
          if (res.status !== 404) stillStored += 1;
        });
        const errorLines = server.output().split("\n").filter((line) => /"event":"error"| error: /.test(line)).length;
        await server.stop();
        const result: LifetimeResult = { target, lifetime, rooms, age, stillStored, errorLines, perRoom: perRoom(counts, rooms) };
        results.push(result);
        console.log(JSON.stringify(result));
      }
    }
    const line = (r: LifetimeResult): string => {
      const storageCalls = Object.values(r.perRoom)
        .flatMap((o) => Object.entries(o.calls))
        .filter(([name]) => !TRAFFIC.has(name))
        .reduce((sum, [, n]) => sum + n, 0);
      const rows = Object.values(r.perRoom).map((o) => o.rowsWritten);
      const alarms = Object.values(r.perRoom).reduce((sum, o) => sum + o.setAlarm, 0);
      const detail = Object.entries(r.perRoom).map(([object, o]) => `${object}: ${Object.entries(o.calls).map(([name, n]) => `${name} ${n}`).join(", ")}`).join("; ");
      return `${r.target.padEnd(7)} ${r.lifetime.padEnd(10)} ${storageCalls.toFixed(2).padStart(14)} ${rows.reduce((a, b) => a + b, 0).toFixed(2).padStart(8)} (${rows.map((n) => n.toFixed(2)).join(" + ")}) ${alarms.toFixed(2).padStart(6)} ${String(r.stillStored).padStart(6)} ${String(r.errorLines).padStart(6)}  ${detail}`;
    };
    log(["target  lifetime   calls (not the traffic's)  rows written (room + coordinator)  alarms set  still stored  error lines  calls per room by method"].concat(results.map(line)).join("\n"));
  },
});
