import type { RoomCounterValues } from "../../protocol";
import { zeroCounters } from "../../common/counters";
import { leafName, PLACEMENT_HEADER, type Placement } from "../../common/edge-requests";
import { followerAt, hubName, isLeaf, type FollowerKind } from "../../common/followers";
import { logEvent } from "../../common/log";
import type { Message } from "../engine/message";
import type { Roster } from "../engine/presence";
import type { MessageSource } from "../engine/stream";
import type { RoomLeaf } from "../leaf/leaf";
import type { LeafHistory, LeafMember, LeafReport, LeafSnapshot, LeafStart, LostRange } from "../leaf/rpc";
import { LeafLink, type FollowerStub, type LinkHost } from "./leaf-link";

export interface LeavesOptions {
  /** ROOM_SHARD_SOCKETS: sockets the root takes itself, and each leaf before the next opens (0 = never shard). */
  shardSockets: number;
  /** ROOM_MAX_LEAVES. */
  maxLeaves: number;
  /** MAX_SOCKETS_PER_ROOM: the most any one object holds. */
  maxSocketsPerObject: number;
  /** PRESENCE_COUNT_INTERVAL_MS: the member count goes to the leaves at most this often. */
  countIntervalMs: number;
  /** ROOM_LEAF_RETIRE_MS: a leaf empty for this long is retired. */
  retireAfterMs: number;
}

/** What the leaves need from the root. */
export interface LeavesHost {
  roomName(): string;
  /** The LEAVES binding and the bindings of each kind of hub (any may be absent). */
  namespace(): DurableObjectNamespace<RoomLeaf> | null;
  hubs(kind: Exclude<FollowerKind, "leaf">): DurableObjectNamespace | null;
  /** The room's epoch (handed to clients through the leaves, so it is stored from now on). */
  epoch(): string;
  latest(): number;
  /** The room's member count, over every object. */
  members(): number;
  /** The room's roster, over every object. */
  roster(): Roster;
  read(from: number, budget: number): { messages: Message[]; lost: LostRange | null };
  /** The set of leaves changed: it is stored, so a root that restarts keeps pushing to them. */
  saveDirectory(indices: readonly number[]): void;
  /** Sockets on the leaves changed. */
  connectionsChanged(): void;
  membersReported(index: number, members: readonly LeafMember[], full: boolean): void;
  /** A leaf was retired, or is unreachable: its members are gone from the room. */
  leafDropped(index: number): void;
  countersReported(delta: RoomCounterValues): void;
  /** The room went from one object to several, or back. */
  shardedChanged(sharded: boolean): void;
}

/** `GET /rooms/{room}` of a sharded room: the root's own sockets and each leaf's. */
export interface LeavesSnapshot {
  leaves: (LeafSnapshot & { reachable: boolean })[];
}

/** What only leaves do (a hub holds sockets of other rooms too). */
type LeafOnly = Pick<DurableObjectStub<RoomLeaf>, "shutdown" | "abort">;

/** How long the edge may use a placement's grants. */
export const PLACEMENT_TTL_MS = 2000;
/**
 * Sockets one placement grants per leaf: a storm of connects costs the root
 * one placement per this many sockets (per leaf), and a leaf is overfilled by
 * at most the grants outstanding when its report arrives.
 */
export const PLACEMENT_GRANT = 64;
/** Leaves one placement may open before it settles for overfilling (a burst of upgrades opens them one by one). */
const PLACEMENT_OPENS = 4;
/** A leaf that has not answered pushes for this long is taken as lost: its sockets and members stop counting. */
const LOST_AFTER_MS = 30_000;
const SNAPSHOT_TIMEOUT_MS = 3000;

/**
 * The root's leaves: which exist, where new sockets go, the pushes to each
 * (LeafLink), their reports, and their retirement.
 *
 * - Placement: the root takes sockets until it holds `shardSockets`; after
 *   that, and while the room has leaves (until it is below half the
 *   threshold), the edge gets a placement: grants of sockets on leaves with
 *   room, and opens the socket there. A new leaf is opened (first called by the
 *   root, which places it near the root) when every leaf is full, up to
 *   `maxLeaves`; past that leaves fill up to `maxSocketsPerObject`.
 * - Directory: the set of leaves is stored with the room (one row, written
 *   when a leaf opens or retires), so a root that restarts finds its leaves
 *   and asks each for its whole picture.
 * - Retirement: a leaf empty for `retireAfterMs` is retired, unless it got a
 *   socket meanwhile (it refuses then). A retired leaf that is handed a socket
 *   later (an edge reused an old placement) asks the root to start again.
 */
export class Leaves {
  readonly #options: LeavesOptions;
  readonly #host: LeavesHost;
  readonly #links = new Map<number, LeafLink>();
  readonly #linkHost: LinkHost;
  #opening: Promise<LeafLink | null> | null = null;
  #retireTimer: ReturnType<typeof setTimeout> | null = null;
  #membersTimer: ReturnType<typeof setTimeout> | null = null;
  #membersSentAt = 0;
  #retiredPushes = 0;

  /** `directory` is the stored set of leaves; `seq`, the seq the room stands at (its leaves are level with it). */
  constructor(options: LeavesOptions, host: LeavesHost, directory: string | null, seq: number) {
    this.#options = options;
    this.#host = host;
    this.#linkHost = {
      stub: (index) => this.#stub(index),
      roomName: () => host.roomName(),
      epoch: () => host.epoch(),
      latest: () => host.latest(),
      members: () => host.members(),
      roster: () => host.roster(),
      read: (from, budget) => host.read(from, budget),
      reported: (link, report) => this.#reported(link, report),
      failed: (link, error) => this.#failed(link, error),
    };
    for (const index of parseDirectory(directory)) {
      // A root only goes idle once every leaf was level, so they are level with its stored seq.
      this.#links.set(index, new LeafLink(index, this.#linkHost, seq, true));
    }
  }

  /** Leaves the room has. */
  get size(): number {
    return this.#links.size;
  }

  /** Whether the room is spread over several objects. */
  get sharded(): boolean {
    return this.#links.size > 0;
  }

  /** Sockets on the leaves, as of their last reports. */
  get connections(): number {
    let sum = 0;
    for (const link of this.#links.values()) sum += link.connections;
    return sum;
  }

  /** Pushes sent to leaves by this instance (live and catch-up). */
  get pushes(): number {
    let sum = this.#retiredPushes;
    for (const link of this.#links.values()) sum += link.pushes;
    return sum;
  }

  /** Sockets catching up on the leaves, as of their last reports. */
  get behind(): number {
    let sum = 0;
    for (const link of this.#links.values()) sum += link.behindSockets;
    return sum;
  }

  /** After a restart that found leaves: each is asked for its whole picture (its first push does). */
  wake(): void {
    for (const link of this.#links.values()) link.pump();
  }

  /**
   * Where a new socket goes: null when the root takes it itself, else the
   * edge's placement answer. `full` is the edge's note that a leaf refused a
   * socket as full (`<index>:<sockets>`).
   */
  async place(rootSockets: number, full: string | null): Promise<Response | null> {
    const limit = this.#options.shardSockets;
    if (limit === 0 || rootSockets >= this.#options.maxSocketsPerObject) return null;
    // One object: the root takes sockets up to the threshold. Sharded: the leaves take them, so
    // a reconnect storm costs the root placements only, until the room is below half the
    // threshold; then the root takes them again and the leaves drain and retire.
    if (this.#leafCount() === 0 ? rootSockets < limit : rootSockets + this.#leafConnections() < limit / 2) return null;
    this.#noteFull(full);
    // Concurrent upgrades share an opening; each takes what is left of it, or opens the next.
    for (let opened = 0; opened <= PLACEMENT_OPENS; opened++) {
      const candidates = this.#withRoom(limit);
      if (candidates.length > 0) return this.#grant(candidates);
      if (this.#leafCount() >= this.#options.maxLeaves || opened === PLACEMENT_OPENS) break;
      if ((await this.#openNext()) === null) break;
    }
    // Every leaf full and no more allowed: fill them up to the platform's bound.
    const overfill = this.#withRoom(this.#options.maxSocketsPerObject);
    if (overfill.length > 0) return this.#grant(overfill);
    // No leaf can take it (none opens, or all are at the bound): the root's own bound decides.
    return null;
  }

  /**
   * A flush's messages (stored, in seq order), pushed to every leaf before the
   * root sends them to its own sockets. Returns the sockets the leaves hold
   * that will get them live (as of the leaves' last reports).
   */
  push(messages: readonly Message[]): number {
    let reached = 0;
    for (const link of this.#links.values()) if (link.offer(messages)) reached += link.connections;
    return reached;
  }

  /**
   * The room's members changed. While the room lists its members (`listing`)
   * the leaves hear of it with the next push; above the cap, where only the
   * count changes, at most once per count interval.
   */
  membersChanged(listing: boolean): void {
    if (this.#links.size === 0) return;
    if (listing) {
      for (const link of this.#links.values()) link.membersChanged();
      return;
    }
    if (this.#membersTimer !== null) return;
    const wait = Math.max(0, this.#membersSentAt + this.#options.countIntervalMs - Date.now());
    this.#membersTimer = setTimeout(() => {
      this.#membersTimer = null;
      this.#membersSentAt = Date.now();
      for (const link of this.#links.values()) link.membersChanged();
    }, wait);
  }

  /**
   * A leaf that does not know where the room stands (it restarted, or was
   * retired and got a socket): it is level where the root believes, and the
   * root pushes to it from there.
   */
  sync(index: number): LeafStart {
    const link = this.#links.get(index) ?? this.#adopt(index, this.#host.latest());
    return { room: this.#host.roomName(), epoch: this.#host.epoch(), seq: link.acked, members: this.#host.members(), roster: this.#host.roster() };
  }

  /** A leaf's report outside a push (its sockets changed while no message flowed). Returns the room's member count. */
  report(index: number, report: LeafReport): number {
    const link = this.#links.get(index) ?? (report.connections > 0 ? this.#adopt(index, report.seq) : null);
    if (link) this.#reported(link, report);
    return this.#host.members();
  }

  /** History for a leaf's ring: a backfill for its sockets, or a push it missed. */
  history(from: number, budget: number): LeafHistory {
    const latest = this.#host.latest();
    const read = from > latest ? { messages: [], lost: null } : this.#host.read(from, budget);
    return { epoch: this.#host.epoch(), latest, lost: read.lost, messages: read.messages };
  }

  /** Every leaf's figures, asked now (a leaf that does not answer in time shows its last report). */
  async snapshot(): Promise<LeavesSnapshot> {
    const links = [...this.#links.values()].sort((a, b) => a.index - b.index);
    const answers = await Promise.all(
      links.map(async (link): Promise<LeafSnapshot & { reachable: boolean }> => {
        let timer: ReturnType<typeof setTimeout> | null = null;
        try {
          const snap = (await Promise.race([
            link.stub.snapshot(this.#host.roomName()),
            new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("timed out")), SNAPSHOT_TIMEOUT_MS))),
          ])) as LeafSnapshot;
          return { ...snap, reachable: true };
        } catch {
          return {
            index: link.index,
            connections: link.connections,
            members: 0,
            behind: link.behindSockets,
            seq: link.acked,
            windowBytesInFlight: 0,
            windowBytesMax: 0,
            ringMessages: 0,
            ringBytes: 0,
            instanceStartedAt: 0,
            counters: zeroCounters(),
            unreported: null,
            reachable: false,
          };
        } finally {
          if (timer !== null) clearTimeout(timer);
        }
      }),
    );
    return { leaves: answers };
  }

  /** Closes every socket of every leaf (a restart of the service); returns how many. Hubs hold other rooms too: they close their own. */
  async shutdown(code: number, reason: string): Promise<number> {
    const leaves = [...this.#links.values()].filter((link) => isLeaf(link.index));
    const results = await Promise.allSettled(leaves.map((link) => (link.stub as unknown as LeafOnly).shutdown(code, reason)));
    let closed = 0;
    for (const result of results) if (result.status === "fulfilled") closed += result.value as number;
    return closed;
  }

  /** Test and operations hook: the leaf's object is aborted, as a crash would (its sockets drop). */
  async abortLeaf(index: number): Promise<boolean> {
    const link = this.#links.get(index);
    if (!link || !isLeaf(index)) return false;
    try {
      await (link.stub as unknown as LeafOnly).abort();
    } catch {
      // The abort breaks the call itself.
    }
    return true;
  }

  // -------------------------------------------------------------------------

  #stub(index: number): FollowerStub {
    const follower = followerAt(index);
    if (follower.kind !== "leaf") {
      const hubs = this.#host.hubs(follower.kind);
      if (!hubs) throw new Error(`no namespace for ${follower.kind} hubs`);
      return hubs.get(hubs.idFromName(hubName(follower.kind, follower.n))) as unknown as FollowerStub;
    }
    const namespace = this.#host.namespace();
    if (!namespace) throw new Error("no LEAVES binding");
    return namespace.get(namespace.idFromName(leafName(this.#host.roomName(), index))) as unknown as FollowerStub;
  }

  /** Leaves the room has (followers that hold its own sockets, not hubs). */
  #leafCount(): number {
    let count = 0;
    for (const index of this.#links.keys()) if (isLeaf(index)) count += 1;
    return count;
  }

  /** Sockets on the room's leaves. */
  #leafConnections(): number {
    let sum = 0;
    for (const link of this.#links.values()) if (isLeaf(link.index)) sum += link.connections;
    return sum;
  }

  #grant(candidates: readonly { index: number; free: number }[]): Response {
    const until = Date.now() + PLACEMENT_TTL_MS;
    const leaves = candidates.map(({ index, free }) => {
      const grant = Math.min(free, PLACEMENT_GRANT);
      const link = this.#links.get(index);
      if (link) {
        link.placed += grant;
        link.placedUntil = until;
      }
      return { index, grant };
    });
    const placement: Placement = { leaves, ttlMs: PLACEMENT_TTL_MS };
    return new Response(JSON.stringify(placement), { status: 200, headers: { [PLACEMENT_HEADER]: "1", "content-type": "application/json" } });
  }

  #withRoom(limit: number): { index: number; free: number }[] {
    const out: { index: number; free: number }[] = [];
    const now = Date.now();
    for (const link of this.#links.values()) {
      if (link.failingSince !== null || !isLeaf(link.index)) continue;
      // Grants the edge did not use lapse with their placement.
      if (link.placedUntil < now) link.placed = 0;
      const free = limit - link.connections - link.placed;
      if (free > 0) out.push({ index: link.index, free });
    }
    return out;
  }

  #noteFull(full: string | null): void {
    const match = full === null ? null : /^(\d{1,4}):(\d{1,6})$/.exec(full);
    if (!match) return;
    const link = this.#links.get(Number(match[1]));
    if (link) link.connections = Math.max(link.connections, Number(match[2]));
  }

  /** Opens the lowest free index; concurrent upgrades share one opening. */
  #openNext(): Promise<LeafLink | null> {
    this.#opening ??= (async () => {
      let index = 0;
      while (this.#links.has(index)) index += 1;
      const link = this.#adopt(index, this.#host.latest());
      try {
        // The root calls the leaf first, so the leaf is created near the root (pushes stay short).
        await link.stub.open({ room: this.#host.roomName(), epoch: this.#host.epoch(), seq: link.acked, members: this.#host.members(), roster: this.#host.roster() });
        return link;
      } catch (error) {
        logEvent("error", { room: this.#host.roomName(), where: "leaf_open", leaf: index, error: String(error) });
        this.#drop(link);
        return null;
      }
    })().finally(() => (this.#opening = null));
    return this.#opening;
  }

  #adopt(index: number, acked: number): LeafLink {
    const wasSharded = this.#links.size > 0;
    const link = new LeafLink(index, this.#linkHost, acked, true);
    this.#links.set(index, link);
    this.#host.saveDirectory([...this.#links.keys()]);
    if (!wasSharded) this.#host.shardedChanged(true);
    if (acked < this.#host.latest()) link.catchUp();
    else link.pump();
    return link;
  }

  #drop(link: LeafLink): void {
    link.close();
    if (this.#links.get(link.index) !== link) return;
    this.#retiredPushes += link.pushes;
    this.#links.delete(link.index);
    this.#host.saveDirectory([...this.#links.keys()]);
    this.#host.leafDropped(link.index);
    this.#host.connectionsChanged();
    if (this.#links.size === 0) this.#host.shardedChanged(false);
  }

  #reported(link: LeafLink, report: LeafReport): void {
    if (this.#links.get(link.index) !== link) return;
    const before = link.connections;
    link.connections = report.connections;
    link.behindSockets = report.behind;
    // Sockets that arrived were granted: they are counted now, no longer as on their way.
    link.placed = Math.max(0, link.placed - Math.max(0, report.connections - before));
    if (report.members.length > 0 || report.full) this.#host.membersReported(link.index, report.members, report.full);
    if (report.delta) this.#host.countersReported(report.delta);
    if (report.connections === 0) {
      link.emptySince ??= Date.now();
      this.#armRetire();
    } else {
      link.emptySince = null;
    }
    if (before !== report.connections) this.#host.connectionsChanged();
  }

  #failed(link: LeafLink, error: unknown): void {
    logEvent("error", { room: this.#host.roomName(), where: "leaf_push", leaf: link.index, error: String(error) });
    if (link.failingSince !== null && Date.now() - link.failingSince >= LOST_AFTER_MS && link.connections > 0) {
      // Unreachable for long: its sockets are gone or will reconnect elsewhere; they stop counting.
      link.connections = 0;
      link.behindSockets = 0;
      this.#host.leafDropped(link.index);
      this.#host.connectionsChanged();
    }
  }

  /** Retires leaves that stayed empty for RETIRE_AFTER_MS. */
  #armRetire(): void {
    if (this.#retireTimer !== null) return;
    this.#retireTimer = setTimeout(() => {
      this.#retireTimer = null;
      void this.#retireEmpty().catch((error: unknown) => logEvent("error", { room: this.#host.roomName(), where: "leaf_retire", error: String(error) }));
    }, this.#options.retireAfterMs);
  }

  async #retireEmpty(): Promise<void> {
    const now = Date.now();
    let waiting = false;
    for (const link of [...this.#links.values()]) {
      if (link.emptySince === null) continue;
      if (now - link.emptySince < this.#options.retireAfterMs || link.busy || (link.placed > 0 && link.placedUntil >= now)) {
        waiting = true;
        continue;
      }
      let retired = false;
      try {
        // The leaf refuses when a socket arrived since its last report.
        retired = (await link.stub.retire(this.#host.roomName())) as boolean;
      } catch {
        waiting = true;
        continue;
      }
      if (retired) this.#drop(link);
      else link.emptySince = null;
    }
    if (waiting) this.#armRetire();
  }
}

/**
 * Messages from `from` on, about `budget` bytes, from the room's history as
 * they were stored (each event as serialized at publish), for a leaf; `lost`
 * is what history no longer holds. Nothing past `latest` (the live path's seq).
 */
export function historyMessages(
  history: Pick<MessageSource, "read">,
  from: number,
  budget: number,
  latest: number,
): { messages: Message[]; lost: LostRange | null; rowsRead: number } {
  // One event per run: leaves cut their own frames, and keep messages one by one in their rings.
  const read = history.read(from, budget, { maxBytes: Number.MAX_SAFE_INTEGER, maxEvents: 1 });
  const messages = read.runs
    .filter((run) => run.lastSeq <= latest)
    .map((run): Message => ({ seq: run.firstSeq, tag: run.lastTag, event: run.text, bytes: run.bytes }));
  const lost = read.lost && read.lost.from <= latest ? { from: read.lost.from, to: Math.min(read.lost.to, latest) } : null;
  return { messages, lost, rowsRead: read.rowsRead };
}

function parseDirectory(stored: string | null): number[] {
  if (stored === null) return [];
  try {
    const parsed: unknown = JSON.parse(stored);
    return Array.isArray(parsed) ? parsed.filter((n): n is number => Number.isSafeInteger(n) && n >= 0) : [];
  } catch {
    return [];
  }
}
