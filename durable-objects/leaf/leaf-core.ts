import { CloseCode, resumePointOf } from "../../protocol";
import { LEAF_FULL_HEADER, parseLeafName } from "../../common/edge-requests";
import { logEvent } from "../../common/log";
import { historyRules, readLimits, type Limits } from "../../common/settings";
import { retentionFor } from "../../common/retention";
import { attachmentFromEdge, type SocketAttachment } from "../engine/attachment";
import { MEMORY_ONLY, RoomCounters } from "../engine/counters";
import type { Cursor } from "../engine/cursor";
import { NO_FRAME_HOOKS, type FrameHooks } from "../engine/frame-hooks";
import type { PublishOutcome, RetryKey } from "../engine/publish-outcome";
import { SocketEngine, type EngineHost } from "../engine/socket-engine";
import { highestMark, SocketMark, type MarkedAttachment } from "../engine/socket-mark";
import type { SocketState } from "../engine/socket-state";
import { ROOM_SHAPE } from "../engine/stream-shape";
import { RoomFollower, type FollowerHost } from "../followers/follower";
import { endNameless, type FollowerCore } from "../followers/follower-object";
import { FollowerReports, type ReportSource } from "../followers/follower-reports";
import { rootOf, type FollowerBatch, type FollowerReport, type FollowerSnapshot, type FollowStart, type RootRpc } from "../followers/contracts";

/**
 * A leaf's parts and the one object they talk to: the socket engine, the
 * room it follows (RoomFollower: its ring, pushes and fetches) and its
 * reports to the room's root. It is the engine's host, the follower's host
 * and the reports' source.
 */
export class LeafCore implements EngineHost, FollowerHost, ReportSource, FollowerCore {
  readonly #ctx: DurableObjectState;
  readonly #env: Record<string, unknown>;
  readonly #limits: Limits;
  readonly room: string;
  readonly index: number;
  readonly #counters = new RoomCounters(MEMORY_ONLY);
  readonly engine: SocketEngine;
  readonly #reports: FollowerReports;
  readonly #follower: RoomFollower;
  readonly #instanceStartedAt = Date.now();
  /**
   * Where the leaf stands, in one socket's attachment, rewritten after every
   * push: a leaf woken from hibernation knows where its sockets are without
   * asking anyone.
   */
  readonly #mark: SocketMark;

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    this.#ctx = ctx;
    this.#env = env;
    const limits = readLimits(env);
    this.#limits = limits;
    // A leaf's name says which room and index it is: `<room>/<index>`. The runtime leaves an
    // instance that its alarm starts after a restart without a name (workerd 2026-04-26); such
    // an instance holds no sockets (they did not survive the restart) and ends itself (`nameless`).
    const address = parseLeafName(ctx.id.name ?? "");
    if (!address && ctx.id.name !== undefined) logEvent("error", { where: "leaf", problem: "a leaf must be addressed as <room>/<index>", name: ctx.id.name });
    this.room = address?.room ?? "";
    this.index = address?.index ?? -1;
    this.engine = new SocketEngine(ctx, limits, this.#counters, this);
    this.#mark = new SocketMark(this.engine.delivery);
    this.#reports = new FollowerReports(this.#counters, this);
    this.#follower = new RoomFollower(
      this.room,
      this.engine,
      this.#counters,
      // As far back as the room's history reaches (its HISTORY_RULES rule, by its name).
      { maxMessages: retentionFor(this.room, historyRules(env), limits).maxMessages, batch: { maxBytes: limits.BATCH_MAX_BYTES, maxEvents: limits.BATCH_MAX_EVENTS }, shape: ROOM_SHAPE, counters: null },
      this,
      // The leaf's members go to the root in reports; the room's roster comes back with pushes.
      { memberChanged: (id, view) => this.#reports.memberChanged(id, view) },
    );
    this.#restore();
  }

  // -------------------------------------------------------------------------
  // Sockets, from the edge
  // -------------------------------------------------------------------------

  /** Whether this instance does not know which leaf it is (see the constructor). */
  get nameless(): boolean {
    return this.index < 0;
  }

  end(): Promise<void> {
    return endNameless(this.#ctx, "leaf");
  }

  get logFields(): Record<string, unknown> {
    return { room: this.room, leaf: this.index };
  }

  /** An upgrade the edge placed on this leaf (validated there). */
  async upgrade(request: Request): Promise<Response> {
    if (this.engine.size >= this.#limits.MAX_SOCKETS_PER_ROOM) {
      // The edge asks the root again, telling it this leaf is full.
      return Response.json(
        { error: "room_full", message: "this leaf is full" },
        { status: 503, headers: { [LEAF_FULL_HEADER]: `${this.index}:${this.engine.size}`, "Retry-After": "1" } },
      );
    }
    await this.#follower.ensureKnown();
    const attachment: MarkedAttachment = attachmentFromEdge(request.headers, Date.now());
    attachment.mark = { seq: this.#follower.ring.seq, epoch: this.#follower.epoch };
    const answer = await this.engine.accept(this.#follower.stream, {
      attachment,
      resume: resumePointOf(new URL(request.url).searchParams),
      epoch: this.#follower.epoch,
    });
    this.#reports.soon();
    return answer;
  }

  /** Before a socket's frame: an ack is checked against the socket's cursor, so the cursor must be where the socket is. */
  async beforeFrame(socket: SocketState): Promise<boolean> {
    try {
      await this.#follower.ensureKnown();
      return true;
    } catch (error) {
      logEvent("error", { room: this.room, leaf: this.index, where: "leaf_sync", error: String(error) });
      this.engine.delivery.close(socket.ws, CloseCode.INTERNAL_ERROR, "internal error");
      return false;
    }
  }

  // -------------------------------------------------------------------------
  // From the root
  // -------------------------------------------------------------------------

  open(start: FollowStart): Promise<void> {
    return this.#follower.open(start);
  }

  async push(batch: FollowerBatch): Promise<FollowerReport> {
    await this.#follower.push(batch);
    return this.#reports.take(batch.full);
  }

  /** The root retires this leaf: it forgets where the room stands, unless a socket arrived since its last report. */
  retire(_room?: string): boolean {
    if (this.engine.size > 0) return false;
    this.#follower.forget();
    this.#reports.clear();
    return true;
  }

  snapshot(_room?: string): FollowerSnapshot {
    const window = this.engine.delivery.windowFigures();
    const ring = this.#follower.ring.size;
    return {
      index: this.index,
      connections: this.engine.size,
      members: this.#reports.members,
      behind: this.engine.delivery.behind,
      seq: this.#follower.ring.seq,
      windowBytesInFlight: window.inFlight,
      windowBytesMax: window.max,
      ringMessages: ring.messages,
      ringBytes: ring.bytes,
      instanceStartedAt: this.#instanceStartedAt,
      counters: this.#counters.snapshot(),
      unreported: this.#counters.unreported(),
    };
  }

  abort(): void {
    this.#ctx.abort("leaf aborted on request");
  }

  // -------------------------------------------------------------------------
  // The engine's host
  // -------------------------------------------------------------------------

  name(): string {
    return this.room;
  }

  get hooks(): FrameHooks {
    return NO_FRAME_HOOKS;
  }

  /** A socket here publishes: the root runs beforePublish, if its class has one, and may refuse. */
  async publishFrom(_cursor: Cursor, dataJson: string, retry?: RetryKey): Promise<PublishOutcome> {
    // The root hashes the data itself (it arrives as the socket sent it) and looks the key up.
    return this.root().publish(dataJson, retry ? { source: "leaf", retryKey: retry.key } : { source: "leaf" });
  }

  occupancyChanged(): void {}

  left(socket: SocketState): void {
    // The mark moves to another socket before this one's attachment is gone.
    if (this.#mark.left(socket)) this.moved();
    this.#reports.soon();
  }

  heartbeat(): void {
    this.#reports.soon();
  }

  otherSockets(): number {
    return 0;
  }

  /** A leaf stores nothing: it has no work of its own on its alarm. */
  alarmWanted(): null {
    return null;
  }

  async onAlarm(): Promise<void> {}

  // -------------------------------------------------------------------------
  // The follower's host and the reports' source
  // -------------------------------------------------------------------------

  root(): RootRpc {
    return rootOf(this.#env, this.room);
  }

  async sync(): Promise<FollowStart> {
    return this.root().followerSync(this.index);
  }

  /** Writes where the leaf stands into the holder socket's attachment (one write per push, however many sockets). */
  moved(): void {
    if (!this.#follower?.known) return;
    this.#mark.write({ seq: this.#follower.ring.seq, epoch: this.#follower.epoch });
  }

  seq(): number {
    return this.#follower.ring.seq;
  }

  connections(): number {
    return this.engine.size;
  }

  behind(): number {
    return this.engine.delivery.behind;
  }

  ready(): boolean {
    return this.#follower.known;
  }

  /** The root's answer to a report: the room's count, which the next push's roster also carries. */
  roomMembers(): void {}

  // -------------------------------------------------------------------------

  /** Sockets that were here when the leaf woke: level where the leaf last wrote it stood. */
  #restore(): void {
    const attachments: SocketAttachment[] = [];
    this.engine.restore((attachment) => {
      attachments.push(attachment);
      return [{ stream: this.#follower.stream, seq: 0 }];
    });
    // Without a mark (no socket holds one) the root says where the leaf is, on first use.
    const found = highestMark(attachments);
    // Until the root's next push brings the roster, the leaf shows the members it holds.
    if (found) this.#follower.restart({ room: this.room, epoch: found.epoch, seq: found.seq, members: this.#reports.members, roster: { members: null, count: this.#reports.members } }, false);
  }
}
