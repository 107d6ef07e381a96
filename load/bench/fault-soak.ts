import { join } from "node:path";
import { adminClient } from "../../local-server/admin.mjs";
import { shouldReconnect } from "../../protocol";
import { defineBench, log } from "../src/kit/bench";
import { privateDirOf } from "../src/kit/proc";
import { RawClient } from "../src/kit/raw-client";
import { resultHeader, writeResult } from "../src/kit/results";
import { Server } from "../src/kit/server";
import { sleep, waitFor } from "../src/kit/time";
import { checkSoak, dataHash, selfCheck, type ReaderEvent, type SoakData, type SoakRecord } from "./fault-soak-check";

const SHARD_SOCKETS = 4;
const DRAIN_MS = 120_000;
const BIG = "soak-big";

/** Seeded randomness for what is injected, when and where (mulberry32). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A reader as docs/protocol.md's raw client is (ping, ack, resume with since/epoch), recording what it read. */
class Reader {
  readonly events: ReaderEvent[] = [];
  readonly errors: string[] = [];
  presence = 0;
  stalled = false;
  readonly client: RawClient;

  constructor(wsUrl: string, readonly room: string, readonly name: string, readonly member: string | null) {
    const url = new URL(`${wsUrl}/rooms/${room}/ws`);
    if (member) url.searchParams.set("member", member);
    this.client = new RawClient(url.toString(), {
      reconnectWithinMs: 1000,
      onEvent: (event) => {
        if (event.type === "welcome") this.events.push({ t: "welcome", seq: event.seq ?? 0, epoch: event.epoch ?? "" });
        else if (event.type === "lost") this.events.push({ t: "lost", from: event.from ?? 0, to: event.to ?? 0, reason: event.reason ?? "" });
        else if (event.type === "message") this.events.push({ t: "m", seq: event.seq ?? 0, id: (event.data as SoakData | undefined)?.id, h: dataHash(event.data) });
        else if (event.type === "presence") this.presence += 1;
        else if (event.type === "error") this.errors.push(`error ${event.code}`);
        else if (event.type === "invalid") this.errors.push(`frame not JSON: ${String(event.text)}`);
      },
    });
  }

  /** Stops reading (and so acknowledging) for `ms`; false when it is not connected or already stalled. */
  async stall(ms: number): Promise<boolean> {
    if (!this.client.ws || this.stalled) return false;
    this.stalled = true;
    this.client.pause();
    await sleep(ms);
    this.client.resume();
    this.stalled = false;
    return true;
  }
}

export default defineBench({
  name: "fault-soak",
  title: "the local server held to its guarantees while it is crashed, restarted, cut and stalled",
  about: `A soak under faults against the local server (build first: npm run build), on one data directory for the whole
run: many rooms, each with a few raw readers (some of them presence members) and a publisher, one room large
enough to shard into a root and leaves, and broadcasts, while at seeded random moments it injects:
  crash    kill -9 of workerd; the launcher exits with it, and the server starts again on the same data directory
  restart  SIGTERM to the launcher (every socket closed with 1012), then a start on the same data directory
  cut      a few readers' TCP connections destroyed by the client (no close frame)
  stall    a few readers stop reading (and so acknowledging) for 6-12 s: past SLOW_GRACE_MS the room closes
           them with 4008
  leaf     one leaf of the sharded room aborted (the local server's admin route /__local/leaf-abort)
With --hold-answer-ms (250 by default) every HTTP publish's answer is held that long after its commit, so most
crashes land between some publish's commit and its answer. Publishers send every publish with an
Idempotency-Key and retry it with the same key on any failure until it is answered; broadcasts likewise.
At the end, with every reader level, the checker (load/bench/fault-soak-check.ts) holds the record to the
invariants: every acknowledged publish in its room's history exactly once with its data; every reader saw every
seq once, in order, with no gap and no lost (history keeps the whole run); every broadcast at most once per
room; nothing in history that nobody published; each room's presence is its member readers.
--self-check runs the checker on corrupted records only (no server). Prints a summary on stderr, one JSON object
on stdout (also written to load/results/fault-soak-<time>.json), and exits 1 when an invariant failed. Bounded:
faults end after --seconds, the drain after 120 s, the whole run at --seconds + 420 s.`,
  options: {
    "self-check": { flag: true, help: "only feed the checker corrupted records" },
    seconds: { default: "240", help: "seconds of faults" },
    crashes: { default: "20", help: "kill -9 of workerd" },
    rooms: { default: "20", help: "rooms besides the sharded one" },
    seed: { help: "seed of the fault schedule (default: from the clock)" },
    readers: { default: "3", help: "readers per room" },
    "sharded-readers": { default: "14", help: "readers of the sharded room" },
    rate: { default: "3", help: "publishes per second per room" },
    restarts: { default: "3", help: "SIGTERM restarts" },
    cuts: { default: "20", help: "connection cuts" },
    stalls: { default: "12", help: "reader stalls" },
    "leaf-kills": { default: "6", help: "leaves aborted" },
    "broadcast-every-ms": { default: "8000", help: "mean interval of the broadcasts" },
    "hold-answer-ms": { default: "250", help: "each HTTP publish's answer held this long after its commit" },
    port: { default: "18911", help: "port of the server" },
    "keep-data": { flag: true, help: "keep the data directory" },
  },
  limitSeconds: (args) => (args.flag("self-check") ? 60 : args.number("seconds", { min: 1 }) + 420),
  async run(args) {
    if (args.flag("self-check")) {
      const cases = selfCheck();
      for (const c of cases) log(`${c.ok ? "ok  " : "FAIL"} ${c.name}: expected ${c.expect}, reported ${c.reported.join(", ") || "nothing"}`);
      const failed = cases.filter((c) => !c.ok).length;
      log(failed === 0 ? `the checker reported every corruption (${cases.length - 1}) and passed the clean record` : `${failed} case(s) not as expected`);
      return failed === 0 ? 0 : 1;
    }
    const header = resultHeader("fault-soak", args.argv);
    const o = {
      seconds: args.number("seconds", { min: 10 }),
      crashes: args.int("crashes"),
      rooms: args.int("rooms", { min: 1 }),
      seed: args.has("seed") ? args.int("seed") : Date.now() % 1_000_000,
      readers: args.int("readers", { min: 1 }),
      shardedReaders: args.int("sharded-readers", { min: 1 }),
      rate: args.number("rate", { min: 0.01 }),
      restarts: args.int("restarts"),
      cuts: args.int("cuts"),
      stalls: args.int("stalls"),
      leafKills: args.int("leaf-kills"),
    };
    const holdAnswerMs = args.int("hold-answer-ms");
    const broadcastEveryMs = args.int("broadcast-every-ms", { min: 1 });
    const random = prng(o.seed);
    const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T;
    const started = Date.now();
    const elapsed = (): number => Date.now() - started;
    const stamp = (): string => `${(elapsed() / 1000).toFixed(1).padStart(6)} s`;
    const vars = {
      // One object takes 4 sockets: the big room becomes a root and leaves, the others stay one object.
      ROOM_SHARD_SOCKETS: String(SHARD_SOCKETS),
      ROOM_LEAF_RETIRE_MS: "10000",
      // A small window and a short grace, so that a stalled reader falls behind and is closed with 4008.
      WINDOW_BYTES: "4096",
      SLOW_GRACE_MS: "3000",
      // History and keys that outlive the run: every message can be checked, every retry recognised.
      HISTORY_MAX_MESSAGES: "20000",
      HISTORY_MAX_AGE_SECONDS: "86400",
      PUBLISH_DEDUPE_SECONDS: "86400",
      PRESENCE_LEAVE_DELAY_MS: "500",
      // Each HTTP publish's answer held this long after its row is on disk (durable-objects/room/fault-hold.ts; the
      // local server only): a kill -9 then often lands between a commit and its answer, and the retry must get the first seq.
      ...(holdAnswerMs > 0 ? { FAULT_HOLD_PUBLISH_ANSWER_MS: String(holdAnswerMs) } : {}),
    };
    const roomNames = [...Array.from({ length: o.rooms }, (_, i) => `soak-r${String(i).padStart(2, "0")}`), BIG];
    const faults = { crash: 0, restart: 0, cut: 0, stall: 0, leaf: 0, leafMissed: 0 };
    const downtimes: number[] = [];

    /** Starts the server, or starts it again on the same data directory, retrying a start that fails. */
    let server: Server | undefined;
    const start = async (pauseMs = 0): Promise<Server> => {
      for (let attempt = 1; ; attempt++) {
        try {
          if (server) await server.restart(attempt === 1 ? pauseMs : 0);
          else server = await Server.start({ kind: "ours", port: args.int("port"), gate: "off", vars });
          return server;
        } catch (error) {
          if (attempt >= 5) throw error;
          log(`${stamp()} start failed (attempt ${attempt}): ${String(error).slice(0, 300)}`);
          await sleep(1000);
        }
      }
    };
    const live = await start();
    const getJson = async <T>(path: string): Promise<T> => {
      const res = await fetch(`${live.url}${path}`, { signal: AbortSignal.timeout(10_000) });
      if (res.status !== 200) throw new Error(`GET ${path}: ${res.status}`);
      return (await res.json()) as T;
    };

    // Readers: every one but the last of each room is a member (open mode: ?member=).
    log(`fault-soak: seed ${o.seed}, ${o.seconds} s, ${o.rooms} rooms × ${o.readers} readers + ${BIG} × ${o.shardedReaders}, ${o.rate} msg/s per room, faults: ${o.crashes} crashes, ${o.restarts} restarts, ${o.cuts} cuts, ${o.stalls} stalls, ${o.leafKills} leaf kills`);
    const readers: Reader[] = [];
    for (const room of roomNames) {
      const count = room === BIG ? o.shardedReaders : o.readers;
      for (let i = 0; i < count; i++) {
        const reader = new Reader(live.wsUrl, room, `${room}#${i}`, i < count - 1 ? `${room}-m${i}` : null);
        readers.push(reader);
        void reader.client.open().catch(() => undefined);
        if (room === BIG) await sleep(100);
      }
    }
    // Every reader welcomed before the first publish: each one's record starts at seq 0.
    await waitFor(() => readers.every((r) => r.events.length > 0), 30_000);
    const bigStats = await getJson<{ rootConnections?: number; connections: number; leaves?: Array<{ index: number; connections: number }> }>(`/rooms/${BIG}`);
    log(`${stamp()} ${readers.length} readers in; ${BIG}: root ${bigStats.rootConnections ?? bigStats.connections}, leaves ${(bigStats.leaves ?? []).map((l) => l.connections).join("/") || "none"}`);

    // Publishers and broadcasts, retried with their key until answered.
    const publishes: Array<SoakRecord["publishes"][number] & { attempts: number; duplicate: boolean }> = [];
    const unanswered: NonNullable<SoakRecord["unanswered"]> = [];
    const refusals: Array<{ room: string; id: string; key: string; status: number; text: string | undefined }> = [];
    const publishStats = { attempts: 0, retries: 0, failures: {} as Record<string, number> };
    let publishing = true;
    const countFailure = (what: string): void => void (publishStats.failures[what] = (publishStats.failures[what] ?? 0) + 1);
    type Answer = { status: number; attempts: number; json?: { seq: number; duplicate?: boolean; rooms: number; failedCount: number; failedShards: unknown[] }; text?: string };
    /** POSTs until answered 200 (or refused with a 4xx that a retry would not change). */
    const postUntilAnswered = async (path: string, key: string, body: string, deadline: number): Promise<Answer> => {
      for (let attempt = 0; ; attempt++) {
        if (attempt > 0) {
          publishStats.retries += 1;
          await sleep(Math.min(2000, 100 * 2 ** Math.min(attempt, 5)) * (0.5 + Math.random() / 2));
        }
        if (Date.now() > deadline) return { status: 0, attempts: attempt };
        publishStats.attempts += 1;
        try {
          const res = await fetch(`${live.url}${path}`, { method: "POST", headers: { "content-type": "application/json", "idempotency-key": key }, body, signal: AbortSignal.timeout(15_000) });
          const text = await res.text();
          if (res.status === 200) return { status: 200, json: JSON.parse(text) as Answer["json"], attempts: attempt + 1 };
          countFailure(`http ${res.status}`);
          if (res.status < 500 && res.status !== 408 && res.status !== 429) return { status: res.status, text, attempts: attempt + 1 };
        } catch (error) {
          countFailure(String((error as { cause?: { code?: string }; name?: string }).cause?.code ?? (error as { name?: string }).name ?? error).slice(0, 40));
        }
      }
    };
    const publisher = async (room: string, lane: number): Promise<void> => {
      for (let n = 1; publishing; n++) {
        const id = `p:${room}:${lane}:${n}`;
        const data = { id, room, lane, n, text: `message ${n} of ${room}/${lane}`.padEnd(500, ".") };
        const key = `soak-${o.seed}-${room}-${lane}-${n}`;
        const answer = await postUntilAnswered(`/rooms/${room}/publish`, key, JSON.stringify(data), Date.now() + 180_000);
        if (answer.status === 200 && answer.json) publishes.push({ room, id, key, seq: answer.json.seq, data, attempts: answer.attempts, duplicate: answer.json.duplicate === true });
        else if (answer.status === 0) unanswered.push({ room, id, key });
        else refusals.push({ room, id, key, status: answer.status, text: answer.text?.slice(0, 200) });
        await sleep((1000 / o.rate) * (0.5 + Math.random()));
      }
    };
    const broadcasts: Array<NonNullable<SoakRecord["broadcasts"]>[number] & { requests: number; answer: unknown }> = [];
    const broadcaster = async (): Promise<void> => {
      for (let n = 1; publishing; n++) {
        await sleep(broadcastEveryMs * (0.5 + Math.random()));
        if (!publishing) break;
        const key = `soak-b-${o.seed}-${n}`;
        const id = `b:${key}`;
        const body = JSON.stringify({ data: { id, b: key }, rooms: roomNames });
        const deadline = Date.now() + 180_000;
        let answer: Answer;
        let requests = 0;
        // A 200 may name rooms that failed: the same key again delivers to them and to nobody twice.
        do {
          answer = await postUntilAnswered("/broadcast", key, body, deadline);
          requests += 1;
        } while (answer.status === 200 && answer.json && (answer.json.failedCount > 0 || answer.json.failedShards.length > 0) && Date.now() < deadline);
        const complete = answer.status === 200 && answer.json?.rooms === roomNames.length && answer.json.failedCount === 0;
        broadcasts.push({ key, id, rooms: roomNames, complete, requests, answer: answer.json ?? { status: answer.status } });
      }
    };

    // Faults at seeded moments: crashes one in each of --crashes equal slots, somewhere in its middle; the others anywhere.
    const span = o.seconds * 1000;
    const anywhere = (): number => 5000 + random() * (span - 10_000);
    const plan = [
      ...Array.from({ length: o.crashes }, (_, i) => ({ kind: "crash", at: ((i + 0.25 + random() * 0.5) * span) / o.crashes })),
      ...(["restart", "cut", "stall", "leaf"] as const).flatMap((kind) => Array.from({ length: { restart: o.restarts, cut: o.cuts, stall: o.stalls, leaf: o.leafKills }[kind] }, () => ({ kind, at: anywhere() }))),
    ].sort((a, b) => a.at - b.at);
    const leafKills: Array<{ at: number; index: number; connections: number; aborted: boolean }> = [];
    const stalls: Array<{ reader: string; ms: number }> = [];
    const down = async (pauseMs: number, kill: boolean): Promise<void> => {
      const at = Date.now();
      // A killed workerd takes its launcher with it; restart waits for that, then starts on the same data directory.
      if (kill) process.kill(live.pid, "SIGKILL");
      await start(pauseMs);
      downtimes.push(Date.now() - at);
    };
    const killLeaf = async (): Promise<void> => {
      const stats = await getJson<{ leaves?: Array<{ index: number; connections: number }> }>(`/rooms/${BIG}`);
      const leaves = (stats.leaves ?? []).filter((leaf) => leaf.connections > 0);
      if (leaves.length === 0) return void (faults.leafMissed += 1);
      const victim = pick(leaves);
      const dir = privateDirOf(live.pid);
      if (!dir) throw new Error("no admin socket");
      const admin = adminClient(join(dir, "admin.sock"));
      try {
        const answer = (await admin.call("POST", "/leaf-abort", { room: BIG, index: victim.index })) as { json?: { aborted?: boolean } };
        const aborted = answer.json?.aborted === true;
        leafKills.push({ at: elapsed(), index: victim.index, connections: victim.connections, aborted });
        if (aborted) faults.leaf += 1;
        else faults.leafMissed += 1;
      } finally {
        admin.close();
      }
    };
    const inject = async (): Promise<void> => {
      for (const fault of plan) {
        await sleep(fault.at - elapsed());
        try {
          if (fault.kind === "crash") (await down(200 + random() * 1300, true), (faults.crash += 1));
          else if (fault.kind === "restart") (await down(200 + random() * 800, false), (faults.restart += 1));
          else if (fault.kind === "cut") {
            const victims = Array.from({ length: 1 + Math.floor(random() * 4) }, () => pick(readers));
            for (const reader of victims) reader.client.cut();
            faults.cut += victims.length;
          } else if (fault.kind === "stall") {
            const victims = [...new Set(Array.from({ length: 1 + Math.floor(random() * 3) }, () => pick(readers)))];
            const ms = 6000 + random() * 6000;
            // Stalls run beside the next faults.
            for (const reader of victims) void reader.stall(ms).then((did) => did && stalls.push({ reader: reader.name, ms: Math.round(ms) }));
            faults.stall += victims.length;
          } else await killLeaf();
          log(`${stamp()} ${fault.kind}`);
        } catch (error) {
          log(`${stamp()} ${fault.kind} failed: ${String(error).slice(0, 200)}`);
          if (!live.alive()) await start();
        }
      }
    };

    const workers = [...roomNames.map((room) => publisher(room, 0)), publisher(BIG, 1), broadcaster()];
    await inject();
    await sleep(span - elapsed());
    const faultsEndedAt = elapsed();
    publishing = false;
    log(`${stamp()} faults over; waiting for publishers to be answered`);
    await Promise.all(workers);

    // Drain: every reader level with its room's newest seq.
    const newest = new Map<string, number>();
    for (const room of roomNames) newest.set(room, (await getJson<{ messages: Array<{ seq: number }> }>(`/rooms/${room}/messages?limit=1`)).messages[0]?.seq ?? 0);
    const behind = (): Reader[] => readers.filter((r) => (r.client.since ?? -1) < (newest.get(r.room) ?? 0));
    await waitFor(() => behind().length === 0, DRAIN_MS, 250);
    log(`${stamp()} drained (${behind().length} readers behind)`);

    // Presence: each room's members are its member readers (anyone gone left after the delay).
    const presenceMismatch: Array<{ room: string; expected: string[]; members: string[] }> = [];
    for (const room of roomNames) {
      const expected = readers.filter((r) => r.room === room && r.member).map((r) => r.member as string).sort();
      const until = Date.now() + 15_000;
      let ids: string[];
      for (;;) {
        ids = (await getJson<{ members: Array<{ id: string }> }>(`/rooms/${room}/presence?limit=1000`)).members.map((m) => m.id).sort();
        if (JSON.stringify(ids) === JSON.stringify(expected) || Date.now() > until) break;
        await sleep(500);
      }
      if (JSON.stringify(ids) !== JSON.stringify(expected)) presenceMismatch.push({ room, expected, members: ids });
    }

    const rooms: SoakRecord["rooms"] = {};
    for (const room of roomNames) {
      const history: Array<{ seq: number; data: SoakData }> = [];
      let epoch = "";
      for (let query = "?after=0&limit=1000"; ; ) {
        const page = await getJson<{ epoch: string; lost?: unknown; messages: Array<{ seq: number; data: SoakData }>; cursor: string | null }>(`/rooms/${room}/messages${query}`);
        epoch = page.epoch;
        if (page.lost) throw new Error(`${room}: history reports lost ${JSON.stringify(page.lost)}`);
        history.push(...page.messages.map((m) => ({ seq: m.seq, data: m.data })));
        if (page.cursor === null) break;
        query = `?cursor=${encodeURIComponent(page.cursor)}&limit=1000`;
      }
      rooms[room] = { epoch, history };
    }
    const finalBig = await getJson<{ rootConnections?: number; leaves?: unknown[] }>(`/rooms/${BIG}`);
    // Told not to reconnect: a close whose code means stop, before the run closed them itself.
    const stopped = readers.filter((r) => r.client.closes.some((code) => !shouldReconnect(code)));
    await Promise.all(readers.map((r) => r.client.close()));
    const serverLog = live.output();
    await live.stop({ keepData: args.flag("keep-data") });

    const result = checkSoak({ rooms, publishes, unanswered, broadcasts, readers: readers.map((r) => ({ name: r.name, room: r.room, events: r.events })) });
    const violations = { ...result.violations };
    const examples = { ...result.examples };
    const add = (kind: string, list: string[]): void => {
      if (list.length === 0) return;
      violations[kind] = list.length;
      examples[kind] = list.slice(0, 20);
    };
    add("publish refused", refusals.map((r) => `${r.id}: ${r.status} ${r.text}`));
    add("presence is not the member readers", presenceMismatch.map((p) => `${p.room}: ${p.members.join(",")} (expected ${p.expected.join(",")})`));
    add("reader told not to reconnect", stopped.map((r) => `${r.name}: closed with ${r.client.closes.filter((code) => !shouldReconnect(code)).join(",")}`));
    if (faults.crash < o.crashes) violations["fewer crashes than asked"] = o.crashes - faults.crash;
    const ok = Object.keys(violations).length === 0;
    const closes: Record<string, number> = {};
    for (const r of readers) for (const code of r.client.closes) closes[code] = (closes[code] ?? 0) + 1;
    const report = {
      ...header,
      scenario: "fault-soak",
      seed: o.seed,
      seconds: o.seconds,
      faultsEndedAtMs: faultsEndedAt,
      totalMs: elapsed(),
      options: { ...o, vars },
      faults,
      downtimeMs: { count: downtimes.length, total: downtimes.reduce((a, b) => a + b, 0), max: Math.max(0, ...downtimes) },
      leafKills,
      stalls: stalls.length,
      publishes: { acknowledged: publishes.length, duplicateAnswers: publishes.filter((p) => p.duplicate).length, attempts: publishStats.attempts, retries: publishStats.retries, failures: publishStats.failures, unanswered: unanswered.length, refused: refusals.length },
      broadcasts: { sent: broadcasts.length, complete: broadcasts.filter((b) => b.complete).length, requests: broadcasts.reduce((a, b) => a + b.requests, 0) },
      readers: { count: readers.length, connects: readers.reduce((a, r) => a + r.client.connects, 0), closes, presenceEvents: readers.reduce((a, r) => a + r.presence, 0), errors: readers.flatMap((r) => r.errors.map((e) => `${r.name}: ${e}`)).slice(0, 50) },
      sharded: { leavesAtStart: (bigStats.leaves ?? []).length, leavesAtEnd: (finalBig.leaves ?? []).length, rootConnectionsAtEnd: finalBig.rootConnections ?? null },
      counts: result.counts,
      ok,
      violations,
      examples,
      presenceMismatch,
      serverLogTail: ok ? undefined : serverLog.slice(-4000),
    };
    const c = result.counts;
    const rows: Array<[string, string | number]> = [
      ["faults: kill -9 of workerd", faults.crash],
      ["faults: SIGTERM restarts", faults.restart],
      ["faults: connections cut", faults.cut],
      ["faults: readers stalled", faults.stall],
      ["faults: leaves aborted", `${faults.leaf}${faults.leafMissed ? ` (${faults.leafMissed} found no leaf with sockets)` : ""}`],
      ["server down, total / longest", `${(report.downtimeMs.total / 1000).toFixed(1)} s / ${(report.downtimeMs.max / 1000).toFixed(1)} s`],
      ["publishes acknowledged", c.publishesAcknowledged],
      ["  answered as duplicates", report.publishes.duplicateAnswers],
      ["  retries", publishStats.retries],
      ["  unanswered / refused", `${unanswered.length} / ${refusals.length}`],
      ["broadcasts (complete)", `${broadcasts.length} (${report.broadcasts.complete}), ${c.broadcastDeliveries} room deliveries`],
      ["messages in history", c.historyMessages],
      [`${BIG} leaves, start / end`, `${report.sharded.leavesAtStart} / ${report.sharded.leavesAtEnd}`],
      ["readers / connects / resumes", `${readers.length} / ${report.readers.connects} / ${c.resumes}`],
      ["close codes seen", Object.entries(closes).map(([k, v]) => `${k}:${v}`).join(" ")],
      ["presence events", report.readers.presenceEvents],
      ["deliveries checked", c.deliveriesChecked],
      ["lost", c.lost],
      ["duplicates", c.duplicates],
      ["out of order", c.outOfOrder],
      ["gaps", c.gaps],
      ["time", `${(report.totalMs / 1000).toFixed(0)} s (faults for ${(faultsEndedAt / 1000).toFixed(0)} s)`],
      ["result", ok ? "every invariant held" : `FAILED: ${Object.entries(violations).map(([k, v]) => `${k} ${v}`).join("; ")}`],
    ];
    const width = Math.max(...rows.map((r) => r[0].length));
    log("");
    for (const [k, v] of rows) log(`${k.padEnd(width)}  ${v}`);
    for (const [kind, list] of Object.entries(examples)) log(`  ${kind}: ${list.slice(0, 5).join(" | ")}`);
    log(`wrote ${writeResult(report)}`);
    process.stdout.write(`${JSON.stringify(report)}\n`);
    return ok ? 0 : 1;
  },
});
