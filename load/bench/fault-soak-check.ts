/**
 * The invariants of the fault soak (fault-soak.ts), as a pure function of what the soak recorded, so that a
 * test can feed it records that break them (load/test/fault-soak-check.test.ts) and see each reported.
 * Every message's data carries a unique `id`: `p:...` for publishes, `b:...` for broadcasts.
 */

/** What a message's data holds for the checker: its id (and whatever else was published). */
export type SoakData = { id?: string; [field: string]: unknown };

/** What a reader read, in order, over every connection (h: fnv1a of the message data's JSON text). */
export type ReaderEvent = { t: "welcome"; seq: number; epoch: string } | { t: "m"; seq: number; id: string | undefined; h?: string } | { t: "lost"; from: number; to: number; reason: string };

export interface SoakRecord {
  /** Each room's whole history, oldest first. */
  rooms: Record<string, { epoch: string; history: Array<{ seq: number; data: SoakData }> }>;
  /** Every acknowledged publish (data.id === id). */
  publishes: Array<{ room: string; id: string; key?: string; seq: number; data: SoakData }>;
  /** Publishes never answered (retries gave up). */
  unanswered?: Array<{ room: string; id: string; key?: string }>;
  /** complete: the last answer reached every room. */
  broadcasts?: Array<{ key: string; id: string; rooms: string[]; complete: boolean }>;
  readers: Array<{ name: string; room: string; events: ReaderEvent[] }>;
}

export interface SoakCheck {
  ok: boolean;
  counts: Record<"rooms" | "historyMessages" | "publishesAcknowledged" | "publishesChecked" | "broadcasts" | "broadcastDeliveries" | "readers" | "deliveriesChecked" | "lost" | "duplicates" | "outOfOrder" | "gaps" | "resumes", number>;
  /** Each broken invariant with its count, and a few instances of each. */
  violations: Record<string, number>;
  examples: Record<string, string[]>;
}

/** 32-bit FNV-1a of a string, as 8 hex digits: what a reader keeps of each message's data. */
export function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, "0");
}

/** The hash a reader records for a message's data. */
export const dataHash = (data: unknown): string => fnv1a(JSON.stringify(data));

const MAX_EXAMPLES = 20;

/** Checks a soak's record: every invariant it breaks, counted, with a few instances each. */
export function checkSoak(record: SoakRecord): SoakCheck {
  const violations: Record<string, number> = {};
  const examples: Record<string, string[]> = {};
  const fail = (kind: string, what: string): void => {
    violations[kind] = (violations[kind] ?? 0) + 1;
    const list = (examples[kind] ??= []);
    if (list.length < MAX_EXAMPLES) list.push(what);
  };
  const counts = {
    rooms: 0,
    historyMessages: 0,
    publishesAcknowledged: record.publishes.length,
    publishesChecked: 0,
    broadcasts: (record.broadcasts ?? []).length,
    broadcastDeliveries: 0,
    readers: record.readers.length,
    deliveriesChecked: 0,
    lost: 0,
    duplicates: 0,
    outOfOrder: 0,
    gaps: 0,
    resumes: 0,
  };

  // History: seqs 1..n, each once, each message's id once.
  const rooms = new Map<string, { bySeq: Map<number, SoakData>; byId: Map<string, number[]>; last: number }>();
  for (const [room, { history }] of Object.entries(record.rooms)) {
    counts.rooms += 1;
    const bySeq = new Map<number, SoakData>();
    const byId = new Map<string, number[]>();
    let expected = 1;
    for (const message of history) {
      counts.historyMessages += 1;
      if (bySeq.has(message.seq)) fail("history seq twice", `${room} seq ${message.seq}`);
      else if (message.seq !== expected) fail("history gap", `${room}: seq ${message.seq} where ${expected} was next`);
      bySeq.set(message.seq, message.data);
      expected = Math.max(expected, message.seq + 1);
      const id = message.data?.id;
      if (typeof id !== "string") {
        fail("history message without id", `${room} seq ${message.seq}`);
        continue;
      }
      const seqs = byId.get(id) ?? [];
      seqs.push(message.seq);
      byId.set(id, seqs);
    }
    for (const [id, seqs] of byId) if (seqs.length > 1) fail("message twice in history", `${room} ${id} at seqs ${seqs.join(",")}`);
    rooms.set(room, { bySeq, byId, last: expected - 1 });
  }

  // Every acknowledged publish: in its room's history once, at its seq, with its data.
  const known = new Map([...rooms.keys()].map((room) => [room, new Set<string>()]));
  const answeredSeqs = new Map<string, Map<number, string>>();
  for (const publish of record.publishes) {
    const room = rooms.get(publish.room);
    known.get(publish.room)?.add(publish.id);
    const seqs = answeredSeqs.get(publish.room) ?? new Map();
    answeredSeqs.set(publish.room, seqs);
    const other = seqs.get(publish.seq);
    if (other !== undefined && other !== publish.id) fail("two publishes answered one seq", `${publish.room} seq ${publish.seq}: ${other} and ${publish.id}`);
    seqs.set(publish.seq, publish.id);
    if (!room) {
      fail("acknowledged publish lost", `${publish.room} ${publish.id}: the room has no history`);
      continue;
    }
    counts.publishesChecked += 1;
    const at = room.bySeq.get(publish.seq);
    const found = room.byId.get(publish.id) ?? [];
    if (found.length === 0) fail("acknowledged publish lost", `${publish.room} ${publish.id} (answered seq ${publish.seq})`);
    else if (at === undefined || at.id !== publish.id) fail("acknowledged publish at another seq", `${publish.room} ${publish.id}: answered ${publish.seq}, in history at ${found.join(",")}`);
    else if (JSON.stringify(at) !== JSON.stringify(publish.data)) fail("acknowledged publish with other data", `${publish.room} ${publish.id} seq ${publish.seq}`);
  }
  for (const publish of record.unanswered ?? []) {
    known.get(publish.room)?.add(publish.id);
    fail("publish never answered", `${publish.room} ${publish.id}`);
  }

  // Broadcasts: at most once per room, and once in every room of a complete answer.
  for (const broadcast of record.broadcasts ?? []) {
    for (const name of Object.keys(record.rooms)) {
      known.get(name)?.add(broadcast.id);
      const n = (rooms.get(name)?.byId.get(broadcast.id) ?? []).length;
      counts.broadcastDeliveries += n;
      if (n > 1) fail("broadcast twice in a room", `${broadcast.key} in ${name} ${n} times`);
      if (n === 0 && broadcast.complete && broadcast.rooms.includes(name)) fail("broadcast missing from a room", `${broadcast.key} in ${name}`);
    }
  }

  // Nothing in history that nobody published.
  for (const [name, room] of rooms) {
    for (const id of room.byId.keys()) if (!known.get(name)?.has(id)) fail("message nobody published", `${name} ${id}`);
  }

  // Readers: from their first welcome, every seq once, in order, with the data history holds; gaps only where
  // a `lost` event said so (and in this soak, which keeps every message in history, there should be none).
  for (const reader of record.readers) {
    const room = rooms.get(reader.room);
    let expected: number | null = null;
    const seen = new Set<number>();
    let welcomes = 0;
    for (const event of reader.events) {
      if (event.t === "welcome") {
        welcomes += 1;
        if (expected === null) expected = event.seq + 1;
      } else if (event.t === "lost") {
        counts.lost += 1;
        fail("lost event", `${reader.name}: ${event.reason} ${event.from}-${event.to}`);
        expected = event.to + 1;
      } else if (event.t === "m") {
        if (expected === null) {
          fail("message before welcome", `${reader.name} seq ${event.seq}`);
          expected = event.seq;
        }
        counts.deliveriesChecked += 1;
        if (seen.has(event.seq)) {
          counts.duplicates += 1;
          fail("duplicate delivery", `${reader.name} seq ${event.seq}`);
          continue;
        }
        seen.add(event.seq);
        if (event.seq < expected) {
          counts.outOfOrder += 1;
          fail("out of order", `${reader.name} seq ${event.seq} after ${expected - 1}`);
          continue;
        }
        if (event.seq > expected) {
          counts.gaps += 1;
          fail("gap", `${reader.name}: ${expected}-${event.seq - 1} never delivered`);
        }
        expected = event.seq + 1;
        const data = room?.bySeq.get(event.seq);
        if (data === undefined) fail("delivered seq not in history", `${reader.name} seq ${event.seq}`);
        else if (data.id !== event.id || (event.h !== undefined && dataHash(data) !== event.h)) fail("delivered data differs from history", `${reader.name} seq ${event.seq}: ${event.id}, history ${data.id}`);
      }
    }
    counts.resumes += Math.max(0, welcomes - 1);
    if (expected === null) fail("reader never welcomed", reader.name);
    else if (room && expected - 1 < room.last) {
      counts.gaps += 1;
      fail("reader behind at the end", `${reader.name}: ${expected}-${room.last} never delivered`);
    }
  }

  return { ok: Object.keys(violations).length === 0, counts, violations, examples };
}

/** A small record that passes: two rooms, two publishes and a broadcast each, readers that resumed once. */
export function cleanRecord(): SoakRecord & { unanswered: []; broadcasts: NonNullable<SoakRecord["broadcasts"]> } {
  const p = (room: string, n: number): SoakData => ({ id: `p:${room}:${n}`, n });
  const b = { id: "b:k1", b: "k1" };
  const history = (room: string): Array<{ seq: number; data: SoakData }> => [
    { seq: 1, data: p(room, 1) },
    { seq: 2, data: b },
    { seq: 3, data: p(room, 2) },
  ];
  const rooms = { a: { epoch: "e-a", history: history("a") }, z: { epoch: "e-z", history: history("z") } };
  const publishes = ["a", "z"].flatMap((room): SoakRecord["publishes"] => [
    { room, id: `p:${room}:1`, key: `k-${room}-1`, seq: 1, data: p(room, 1) },
    { room, id: `p:${room}:2`, key: `k-${room}-2`, seq: 3, data: p(room, 2) },
  ]);
  const message = (room: "a" | "z", seq: number): ReaderEvent => {
    const data = rooms[room].history[seq - 1]?.data ?? {};
    return { t: "m", seq, id: data.id, h: dataHash(data) };
  };
  const readers = (["a", "z"] as const).flatMap((room): SoakRecord["readers"] => [
    { name: `${room}-0`, room, events: [{ t: "welcome", seq: 0, epoch: `e-${room}` }, message(room, 1), message(room, 2), message(room, 3)] },
    // Cut after seq 1, resumed with since=1.
    { name: `${room}-1`, room, events: [{ t: "welcome", seq: 0, epoch: `e-${room}` }, message(room, 1), { t: "welcome", seq: 2, epoch: `e-${room}` }, message(room, 2), message(room, 3)] },
  ]);
  return { rooms, publishes, unanswered: [], broadcasts: [{ key: "k1", id: "b:k1", rooms: ["a", "z"], complete: true }], readers };
}

type Clean = ReturnType<typeof cleanRecord>;
const reader = (r: Clean, i: number) => r.readers[i] as SoakRecord["readers"][number];

/** Corruptions of `cleanRecord()`, each with the violation the checker must report for it. */
export const CORRUPTIONS: ReadonlyArray<{ name: string; expect: string; corrupt: (r: Clean) => void }> = [
  {
    name: "a reader skips one seq",
    expect: "gap",
    corrupt: (r) => void reader(r, 0).events.splice(2, 1),
  },
  {
    name: "a reader gets one delivery twice",
    expect: "duplicate delivery",
    corrupt: (r) => void reader(r, 1).events.splice(4, 0, { ...(reader(r, 1).events[3] as ReaderEvent) }),
  },
  {
    name: "a reader gets two messages swapped",
    expect: "out of order",
    corrupt: (r) => {
      const e = reader(r, 0).events;
      [e[2], e[3]] = [e[3] as ReaderEvent, e[2] as ReaderEvent];
    },
  },
  {
    name: "a reader stops before the room's last message",
    expect: "reader behind at the end",
    corrupt: (r) => void reader(r, 0).events.pop(),
  },
  {
    name: "a reader is told `lost`",
    expect: "lost event",
    corrupt: (r) => void reader(r, 0).events.splice(2, 1, { t: "lost", from: 2, to: 2, reason: "history" }),
  },
  {
    name: "a reader gets other data at a seq",
    expect: "delivered data differs from history",
    corrupt: (r) => void (reader(r, 0).events[1] = { ...(reader(r, 0).events[1] as ReaderEvent & { t: "m" }), h: "00000000" }),
  },
  {
    name: "an acknowledged publish is missing from history",
    expect: "acknowledged publish lost",
    corrupt: (r) => {
      // History without seq 3, and readers that never saw it.
      r.rooms.a?.history.pop();
      for (const reader of r.readers.filter((x) => x.room === "a")) reader.events.pop();
    },
  },
  {
    name: "a message is in history twice",
    expect: "message twice in history",
    corrupt: (r) => {
      const first = r.rooms.a?.history[0]?.data ?? {};
      r.rooms.a?.history.push({ seq: 4, data: first });
      for (const reader of r.readers.filter((x) => x.room === "a")) reader.events.push({ t: "m", seq: 4, id: "p:a:1", h: dataHash(first) });
    },
  },
  {
    name: "a broadcast is delivered twice in a room",
    expect: "broadcast twice in a room",
    corrupt: (r) => {
      r.rooms.z?.history.push({ seq: 4, data: { id: "b:k1", b: "k1" } });
      for (const reader of r.readers.filter((x) => x.room === "z")) reader.events.push({ t: "m", seq: 4, id: "b:k1", h: dataHash({ id: "b:k1", b: "k1" }) });
    },
  },
  {
    name: "an acknowledged publish holds other data",
    expect: "acknowledged publish with other data",
    corrupt: (r) => void ((r.publishes[0] as SoakRecord["publishes"][number]).data = { ...r.publishes[0]?.data, n: 99 }),
  },
];

/**
 * Runs the checker on the clean record (it must pass) and on each corruption (it must report the corruption's
 * violation). Returns one line per case: `{ name, expect, reported, ok }`.
 */
export function selfCheck(): Array<{ name: string; expect: string; reported: string[]; ok: boolean }> {
  const results = [];
  const clean = checkSoak(cleanRecord());
  results.push({ name: "the clean record", expect: "no violation", reported: Object.keys(clean.violations), ok: clean.ok });
  for (const corruption of CORRUPTIONS) {
    const record = cleanRecord();
    corruption.corrupt(record);
    const result = checkSoak(record);
    results.push({ name: corruption.name, expect: corruption.expect, reported: Object.keys(result.violations), ok: !result.ok && (result.violations[corruption.expect] ?? 0) > 0 });
  }
  return results;
}
