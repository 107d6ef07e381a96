import { defineBench } from "../src/kit/bench";
import { cpuMs, loadAverage } from "../src/kit/proc";
import { RawClient, type RawEvent } from "../src/kit/raw-client";
import { Server } from "../src/kit/server";
import { paced, sleep, waitFor } from "../src/kit/time";

const round = (n: number, digits = 0): number => Math.round(n * 10 ** digits) / 10 ** digits;
const idOf = (i: number): string => `u${String(i).padStart(5, "0")}`;

/** A member that keeps the room's presence as an app would: the count, the list (under the cap), the joins and leaves it saw. */
class Member {
  count = -1;
  members: Set<string> | null = null;
  readonly joins: string[] = [];
  readonly leaves: string[] = [];
  syncs = 0;
  bytes = 0;
  readonly client: RawClient;

  constructor(readonly url: string) {
    this.client = new RawClient(url, { onEvent: (event, frameBytes) => event.type === "presence" && this.apply(event, frameBytes) });
  }

  private apply(event: RawEvent, frameBytes: number): void {
    const e = event as RawEvent & { count: number; action: string; members?: Array<{ id: string }>; member: { id: string } };
    this.bytes += frameBytes;
    this.count = e.count;
    if (e.action === "sync") {
      this.syncs += 1;
      this.members = e.members ? new Set(e.members.map((m) => m.id)) : null;
    } else if (e.action === "join") {
      this.joins.push(e.member.id);
      this.members?.add(e.member.id);
    } else if (e.action === "leave") {
      this.leaves.push(e.member.id);
      this.members?.delete(e.member.id);
    }
  }
}

const memberUrl = (server: Server, room: string, id: string): string => `${server.wsUrl}/rooms/${room}/ws?member=${id}&info=${encodeURIComponent(JSON.stringify({ name: `User ${id}` }))}`;
const presenceEvents = async (server: Server, room: string): Promise<number> => ((await (await fetch(`${server.url}/rooms/${room}`)).json()) as { presenceEvents: number }).presenceEvents;

/** N members join one room over `seconds`, under a member cap. */
async function storm(port: number, cap: number, members: number, seconds: number) {
  const server = await Server.start({ kind: "ours", port, gate: "off", vars: { PRESENCE_MAX_MEMBERS: String(cap) } });
  const room = `storm-${cap}`;
  const clients: Member[] = [];
  try {
    const cpu0 = cpuMs(server.pid);
    const t0 = Date.now();
    // Opened on a schedule (not one after another), so a slow handshake does not stretch the storm.
    await paced(members, { rate: members / seconds }, async (i) => {
      const member = new Member(memberUrl(server, room, idOf(i)));
      clients.push(member);
      await member.client.open();
    });
    const joinedAt = Date.now();
    const right = (c: Member): boolean => c.count === members && (cap < members ? c.members === null : c.members?.size === members);
    if (!(await waitFor(() => clients.every(right), 120_000, 20))) throw new Error(`views not right after 120 s: ${clients.filter((c) => !right(c)).length} wrong`);
    const rightAt = Date.now();
    const cpu1 = cpuMs(server.pid);
    const events = await presenceEvents(server, room);
    return {
      cap,
      members,
      joinSeconds: round((joinedAt - t0) / 1000, 1),
      presenceEvents: events,
      eventsPerMember: round(events / members, 1),
      presenceMB: round(clients.reduce((s, c) => s + c.bytes, 0) / 1048576, 1),
      serverCpuMs: round(cpu1 - cpu0),
      allRightMsAfterLastJoin: rightAt - joinedAt,
      resyncs: clients.reduce((s, c) => s + c.syncs, 0) - members,
    };
  } finally {
    await Promise.all(clients.map((c) => c.client.close()));
    await server.stop();
  }
}

/** N members in one room; every second a share of them reload (close, and reconnect at once), for `seconds`. */
async function churn(port: number, delay: number, o: { members: number; share: number; seconds: number; cap: number }) {
  const server = await Server.start({ kind: "ours", port, gate: "off", vars: { PRESENCE_LEAVE_DELAY_MS: String(delay), PRESENCE_MAX_MEMBERS: String(o.cap) } });
  const room = `churn-${delay}`;
  const clients: Member[] = [];
  try {
    for (let i = 0; i < o.members; i++) {
      const member = new Member(memberUrl(server, room, idOf(i)));
      await member.client.open();
      clients.push(member);
    }
    // Everyone's view settled; from here on only reloads happen.
    await waitFor(() => clients.every((c) => c.count === o.members), 30_000, 50);
    const baseline = new Map<Member, { joins: number; leaves: number; fresh?: boolean }>(clients.map((c) => [c, { joins: c.joins.length, leaves: c.leaves.length }]));
    const events0 = await presenceEvents(server, room);
    const cpu0 = cpuMs(server.pid);
    const t0 = Date.now();
    let reloads = 0;
    let reloadMs = 0;
    for (let tick = 0; tick < o.seconds; tick++) {
      await sleep(t0 + tick * 1000 - Date.now());
      // A reload: the tab's socket closes and the new page's socket opens right away.
      const chosen = new Set<number>();
      while (chosen.size < Math.round(o.members * o.share)) chosen.add(Math.floor(Math.random() * o.members));
      await Promise.all(
        [...chosen].map(async (i) => {
          const old = clients[i] as Member;
          const begin = Date.now();
          await old.client.close();
          const fresh = new Member(old.url);
          await fresh.client.open();
          reloadMs += Date.now() - begin;
          clients[i] = fresh;
          baseline.set(fresh, { joins: 0, leaves: 0, fresh: true });
          reloads += 1;
        }),
      );
    }
    const churnSeconds = (Date.now() - t0) / 1000;
    // Leaves announced after the delay, and the last joins, arrive after the churn stops.
    await sleep(delay + 2000);
    const cpu1 = cpuMs(server.pid);
    const events1 = await presenceEvents(server, room);
    // What sockets that stayed through the whole run saw (every member only reloaded: any leave or join is spurious).
    const stayed = clients.filter((c) => !baseline.get(c)?.fresh);
    const seen = stayed.map((c) => ({ leaves: c.leaves.length - (baseline.get(c)?.leaves ?? 0), joins: c.joins.length - (baseline.get(c)?.joins ?? 0) }));
    const avg = (f: (x: { leaves: number; joins: number }) => number): number => round(seen.reduce((s, x) => s + f(x), 0) / Math.max(1, seen.length), 1);
    return {
      leaveDelayMs: delay,
      cap: o.cap,
      members: o.members,
      reloads,
      churnSeconds: round(churnSeconds, 1),
      meanReloadMs: round(reloadMs / Math.max(1, reloads)),
      socketsThatStayed: stayed.length,
      spuriousLeavesPerSocket: avg((x) => x.leaves),
      spuriousJoinsPerSocket: avg((x) => x.joins),
      presenceEvents: events1 - events0,
      serverCpuMs: round(cpu1 - cpu0),
      finalCountsRight: clients.filter((c) => c.count === o.members).length,
    };
  } finally {
    await Promise.all(clients.map((c) => c.client.close()));
    await server.stop();
  }
}

export default defineBench({
  name: "presence",
  title: "what joins, leaves and reconnects cost a room, and what the member cap and the leave delay buy",
  positionals: "storm|churn",
  about: `Every run starts its own local server (build first: npm run build) on 127.0.0.1 with a fresh data directory and
stops it at the end; server CPU comes from workerd's /proc entry.
  storm [--members 1000 --seconds 5 --caps 100,1000]
    N members join one room over S seconds, once per cap. Figures: presence events sent (the room's counter),
    bytes of presence received, workerd CPU, and the time from the last join until every socket's view is right
    (its count is N and, under the cap, it lists all N).
  churn [--members 1000 --share 0.1 --seconds 30 --cap 1000 --delays 3000,0]
    N members in one room; every second a share of them close and reconnect at once (a reload), for S seconds,
    once per leave delay. Figures: leave and join events each socket saw for members that were only reloading
    (spurious pairs), presence events sent, workerd CPU.
Clients follow docs/protocol.md: they ping, and ack the last message or presence event read per half window or
50 ms. Prints one JSON object on stdout.`,
  options: {
    members: { default: "1000", help: "members in the room" },
    seconds: { help: "storm: seconds the joins are spread over (default 5); churn: seconds of reloads (default 30)" },
    caps: { default: "100,1000", help: "storm: PRESENCE_MAX_MEMBERS, a run each" },
    share: { default: "0.1", help: "churn: share of the members reloading each second" },
    cap: { default: "1000", help: "churn: PRESENCE_MAX_MEMBERS" },
    delays: { default: "3000,0", help: "churn: PRESENCE_LEAVE_DELAY_MS, a run each" },
    port: { default: "18451", help: "port of the server" },
    "max-seconds": { default: "600", help: "the run gives up after this long" },
  },
  limitSeconds: (args) => args.number("max-seconds", { min: 1 }),
  async run(args) {
    const [scenario] = args.positionals;
    const port = args.int("port");
    const members = args.int("members", { min: 1 });
    const result = { scenario, at: new Date().toISOString(), node: process.version, runs: [] as unknown[], loadavg: "" };
    if (scenario === "storm") {
      const seconds = args.has("seconds") ? args.number("seconds", { min: 0.1 }) : 5;
      for (const cap of args.numbers("caps", { min: 0, integer: true })) result.runs.push(await storm(port, cap, members, seconds));
    } else if (scenario === "churn") {
      const options = { members, share: args.number("share", { min: 0, max: 1 }), seconds: args.has("seconds") ? args.int("seconds", { min: 1 }) : 30, cap: args.int("cap") };
      for (const delay of args.numbers("delays", { min: 0, integer: true })) result.runs.push(await churn(port, delay, options));
    } else throw new Error("presence takes storm or churn");
    result.loadavg = loadAverage();
    console.log(JSON.stringify(result, null, 2));
  },
});
