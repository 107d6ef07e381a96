import { DurableObject } from "cloudflare:workers";
import { CloseCode, PING, PONG, type LostEvent, type WelcomeEvent } from "../../protocol";
import { logEvent } from "../../common/log";
import { readLimits, type Limits } from "../../common/settings";
import { ClientFrames } from "../room/client-frames";
import { RoomCounters } from "../room/counters";
import { Delivery } from "../room/delivery";
import { NO_FRAME_HOOKS } from "../room/hook-runner";
import { cutFrame, runOf } from "../room/frames";
import { CAN_PUBLISH_HEADER, LEAF_FULL_HEADER, LEAF_INDEX_HEADER, ROOM_NAME_HEADER, TOKEN_EXPIRES_HEADER } from "../../common/edge-requests";
import { memberFromHeaders } from "../../common/edge-requests";
import type { Message } from "../room/message";
import { Presence } from "../room/presence";
import type { PublishOutcome, Room } from "../room/room";
import { SocketState, type RatePolicy, type SocketAttachment } from "../room/socket-state";
import { Sweeper } from "../room/sweeper";
import { MessageRing } from "./ring";
import type { LeafAddress, LeafBatch, LeafMember, LeafReport, LeafSnapshot, LeafStart, LostRange } from "./rpc";

/** A leaf socket's attachment: the room's, plus which leaf it is on and where the leaf stood. */
interface LeafAttachment extends SocketAttachment {
  room: string;
  leaf: number;
  /**
   * Where the leaf stood when this was written. One socket (the holder) is rewritten after
   * every push, so the highest mark over the open sockets is where the leaf is: a leaf woken
   * from hibernation knows where its sockets are without asking anyone.
   */
  mark?: { seq: number; epoch: string };
}

/** Bytes a leaf keeps in its ring (live part, and a backfill beside it). */
export const RING_MAX_BYTES = 8 * 1024 * 1024;
/** Bytes of history a leaf asks the root for at once. */
const FETCH_BYTES = 2 * 1024 * 1024;
/** Reports outside pushes go out this long after a change, so a burst of connects is one report. */
const REPORT_DELAY_MS = 200;
/** A fetch that made no progress is retried after this long. */
const FETCH_RETRY_MS = 500;

/** A leaf never stores anything: what the sweeper asks of storage has one answer. */
const NO_STORAGE = { exists: false, latestTs: 0, newestKeyTs: () => 0 };
/**
 * Counters live in memory and reach the root in reports: nothing is persisted,
 * so no write timer either (a pending timer keeps an object from hibernating,
 * and is billed as duration).
 */
class LeafCounters extends RoomCounters {
  constructor() {
    super({ meta: () => null, setMeta: () => {} });
  }

  override changed(): void {}

  override persistNow(): void {}
}

/**
 * One leaf of a sharded room (docs/sharded-rooms.md): it holds sockets, and
 * only that. The room's root assigns seqs, stores history and pushes every
 * flush to each leaf; the leaf keeps a ring of recent messages and runs the
 * same delivery engine as a room (a cursor and a window per socket, live
 * frames, catch-up from the ring, slow-consumer kicks, idle reaping), so a
 * socket cannot tell a leaf from a room.
 *
 * - Pushes arrive one at a time (the root waits for each answer) and are
 *   applied in seq order: what the leaf already has is dropped, a gap is
 *   fetched from the root's history first, and the answer is the leaf's
 *   report. Nothing is stored: after a restart the ring starts empty.
 * - Resumes and sockets behind read the ring; what it does not hold is
 *   fetched from the root once and kept, so a reconnect storm costs the root
 *   a few fetches per leaf rather than one per socket.
 * - Presence: the leaf's members go to the root in reports; the room's count
 *   comes back with pushes, and sockets get counts (docs/protocol.md).
 * - Publishes from the leaf's sockets are forwarded to the root.
 */
export class RoomLeaf extends DurableObject<Record<string, unknown>> {
  readonly #limits: Limits;
  readonly #rate: RatePolicy;
  readonly #ring: MessageRing;
  readonly #counters = new LeafCounters();
  readonly #delivery: Delivery;
  readonly #presence: Presence;
  readonly #frames: ClientFrames;
  readonly #sweeper: Sweeper;
  readonly #instanceStartedAt = Date.now();
  /** Members held here, as reports describe them (present, or in their leave delay). */
  readonly #members = new Map<string, LeafMember>();
  /** Members changed since the last report. */
  readonly #dirty = new Map<string, LeafMember>();
  #address: LeafAddress | null = null;
  #epoch = "";
  /** Whether the ring's seq is where this leaf's sockets are (false: ask the root before serving). */
  #known = false;
  #roomMembers = 0;
  #syncing: Promise<void> | null = null;
  #pushes: Promise<unknown> = Promise.resolve();
  /** The socket whose attachment carries the leaf's mark. */
  #markHolder: SocketState | null = null;
  #reportTimer: ReturnType<typeof setTimeout> | null = null;
  #reporting = false;
  #reportAgain = false;
  #fetching = false;
  #fetchFrom = Number.POSITIVE_INFINITY;

  constructor(ctx: DurableObjectState, env: Record<string, unknown>) {
    super(ctx, env);
    const limits = readLimits(env);
    this.#limits = limits;
    this.#rate = { perSecond: limits.CLIENT_FRAMES_PER_SECOND, burst: Math.max(1, limits.CLIENT_FRAME_BURST) };
    this.#ring = new MessageRing({ maxMessages: limits.HISTORY_MAX_MESSAGES, maxBytes: RING_MAX_BYTES }, (from) => this.#fetch(from));
    const roomName = (): string | null => this.#address?.room ?? null;
    this.#delivery = new Delivery(
      this.#ring,
      this.#counters,
      {
        windowBytes: limits.WINDOW_BYTES,
        graceMs: limits.SLOW_GRACE_MS,
        batch: { maxBytes: limits.BATCH_MAX_BYTES, maxEvents: limits.BATCH_MAX_EVENTS },
      },
      {
        roomName,
        occupancyChanged: (connections) => {
          if (connections === 0) this.#background(this.#sweeper.ensureAlarm());
        },
        left: (_ws, state) => {
          this.#presence.leave(state, Date.now());
          // The mark moves to another socket before this one's attachment is gone.
          if (state === this.#markHolder) {
            this.#markHolder = null;
            this.#writeMark();
          }
          this.#reportSoon();
        },
        released: (ws, state) => this.#presence.refresh(ws, state),
      },
    );
    this.#presence = new Presence(
      {
        leaveDelayMs: limits.PRESENCE_LEAVE_DELAY_MS,
        maxMembers: limits.PRESENCE_MAX_MEMBERS,
        countIntervalMs: limits.PRESENCE_COUNT_INTERVAL_MS,
      },
      {
        roomName,
        sockets: () => this.#delivery.entries(),
        socketCount: () => this.#delivery.size,
        send: (ws, state, text, bytes, tag) => this.#delivery.sendPresence(ws, state, text, bytes, tag),
        counted: (events) => {
          if (events === 0) return;
          this.#counters.values.presenceEvents += events;
        },
        // The room's count comes from the root; a member that just arrived here counts before the root has heard of it.
        roomCount: () => Math.max(this.#roomMembers, this.#members.size),
        countsOnly: () => true,
        memberChanged: (id, view) => {
          const member: LeafMember = view
            ? { id, present: true, connections: view.connections, verified: view.verified, ...(view.info === undefined ? {} : { info: view.info }) }
            : { id, present: false, connections: 0, verified: false };
          if (view) this.#members.set(id, member);
          else this.#members.delete(id);
          this.#dirty.set(id, member);
          this.#reportSoon();
        },
      },
    );
    this.#frames = new ClientFrames(
      this.#delivery,
      { publish: (dataJson) => this.#publish(dataJson) },
      this.#counters,
      limits,
      this.#rate,
      {
        roomName: () => this.#address?.room ?? "",
        persistAttachment: (ws, state) => ws.serializeAttachment(state.attachment),
      },
      NO_FRAME_HOOKS,
    );
    this.#sweeper = new Sweeper(
      ctx,
      this.#delivery,
      NO_STORAGE,
      this.#counters,
      { idleTimeoutMs: limits.IDLE_TIMEOUT_SECONDS * 1000, historyMaxAgeMs: limits.HISTORY_MAX_AGE_SECONDS * 1000 },
      {
        roomName,
        heartbeat: () => this.#reportSoon(),
        reportEmpty: () => this.#reportSoon(),
        quiet: () => true,
        reclaimed: async () => {},
      },
    );
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(PING, PONG));
    this.#restore();
  }

  // -------------------------------------------------------------------------
  // Sockets (from the edge, placed here by the root)
  // -------------------------------------------------------------------------

  /** Accepts a WebSocket upgrade the edge placed on this leaf (already validated there). */
  override async fetch(request: Request): Promise<Response> {
    try {
      const room = request.headers.get(ROOM_NAME_HEADER);
      const index = Number(request.headers.get(LEAF_INDEX_HEADER) ?? "-1");
      if (room === null || !Number.isSafeInteger(index) || index < 0) {
        return Response.json({ error: "bad_request", message: "not an upgrade placed by the edge" }, { status: 400 });
      }
      this.#learn({ room, index });
      if (this.#delivery.size >= this.#limits.MAX_SOCKETS_PER_ROOM) {
        // The edge asks the root again, telling it this leaf is full.
        return Response.json(
          { error: "room_full", message: "this leaf is full" },
          { status: 503, headers: { [LEAF_FULL_HEADER]: `${index}:${this.#delivery.size}`, "Retry-After": "1" } },
        );
      }
      await this.#ensureKnown();
      const url = new URL(request.url);
      const since = parseSeqParam(url.searchParams.get("since"));
      const epoch = url.searchParams.get("epoch");
      const expires = Number(request.headers.get(TOKEN_EXPIRES_HEADER));
      const pair = new WebSocketPair();
      const client = pair[0];
      const server = pair[1];
      const now = Date.now();
      const attachment: LeafAttachment = {
        id: crypto.randomUUID(),
        connectedAt: now,
        canPublish: request.headers.get(CAN_PUBLISH_HEADER) !== "false",
        expiresAt: Number.isSafeInteger(expires) && expires > 0 ? expires : null,
        room,
        leaf: index,
        mark: { seq: this.#ring.seq, epoch: this.#epoch },
      };
      const member = memberFromHeaders(request.headers);
      if (member) attachment.member = member;
      this.ctx.acceptWebSocket(server);
      server.serializeAttachment(attachment);

      const latest = this.#ring.seq;
      const welcome: WelcomeEvent = { type: "welcome", room, seq: latest, epoch: this.#epoch, window: this.#limits.WINDOW_BYTES, rate: this.#rate };
      server.send(JSON.stringify(welcome));
      let start = latest;
      if (since !== null) {
        if ((epoch !== null && epoch !== this.#epoch) || since > latest) {
          const lost: LostEvent = { type: "lost", reason: "epoch", from: 1, to: latest };
          server.send(JSON.stringify(lost));
        } else {
          start = since;
        }
      }
      const state = new SocketState(attachment, start);
      this.#delivery.join(server, state, now);
      if (this.#delivery.get(server) === state) this.#presence.join(server, state);
      this.#reportSoon();
      await this.#sweeper.ensureAlarm();
      return new Response(null, { status: 101, webSocket: client });
    } catch (error) {
      logEvent("error", { room: this.#address?.room ?? null, leaf: this.#address?.index ?? null, where: "leaf_upgrade", error: String(error) });
      return Response.json({ error: "internal", message: "could not accept the socket" }, { status: 500 });
    }
  }

  override async webSocketMessage(ws: WebSocket, message: string | ArrayBuffer): Promise<void> {
    const state = this.#delivery.get(ws);
    if (!state) return;
    try {
      // An ack is checked against the socket's cursor, so the cursor must be where the socket is.
      await this.#ensureKnown();
    } catch (error) {
      logEvent("error", { room: this.#address?.room ?? null, leaf: this.#address?.index ?? null, where: "leaf_sync", error: String(error) });
      this.#delivery.close(ws, CloseCode.INTERNAL_ERROR, "internal error");
      return;
    }
    await this.#frames.handle(ws, state, message);
  }

  override async webSocketClose(ws: WebSocket, code: number, reason: string): Promise<void> {
    this.#delivery.peerClosed(ws, code, reason);
  }

  override async webSocketError(ws: WebSocket, error: unknown): Promise<void> {
    const state = this.#delivery.failed(ws, error);
    logEvent("socket_error", { room: this.#address?.room ?? null, leaf: this.#address?.index ?? null, socket: state?.attachment.id ?? null, error: String(error) });
  }

  override async alarm(): Promise<void> {
    try {
      await this.#sweeper.alarm();
    } catch (error) {
      logEvent("error", { room: this.#address?.room ?? null, leaf: this.#address?.index ?? null, where: "leaf_alarm", error: String(error) });
    }
  }

  // -------------------------------------------------------------------------
  // From the root
  // -------------------------------------------------------------------------

  /** The root opens this leaf (its first call, which places the leaf near the root). */
  async open(address: LeafAddress, start: LeafStart): Promise<void> {
    this.#learn(address);
    await this.#serial(async () => {
      if (this.#known && start.epoch === this.#epoch) return;
      this.#restart(start);
    });
  }

  /** One push: the room's next messages (and member count). Answered with this leaf's report. */
  async push(address: LeafAddress, batch: LeafBatch): Promise<LeafReport> {
    this.#learn(address);
    return this.#serial(async () => {
      if (!this.#known || batch.epoch !== this.#epoch) this.#restart({ epoch: batch.epoch, seq: batch.after, members: batch.members });
      if (batch.members !== this.#roomMembers) {
        this.#roomMembers = batch.members;
        this.#presence.countChanged();
      }
      const before = this.#ring.seq;
      await this.#apply(batch.lost, batch.messages, Date.now());
      if (this.#ring.seq !== before) this.#writeMark();
      return this.#takeReport(batch.full);
    });
  }

  /** The root retires this leaf: it forgets where the room stands, unless a socket arrived since its last report. */
  async retire(address: LeafAddress): Promise<boolean> {
    this.#learn(address);
    if (this.#delivery.size > 0) return false;
    this.#known = false;
    this.#ring.reset(0);
    this.#dirty.clear();
    return true;
  }

  /** This leaf's figures for `GET /rooms/{room}`. */
  async snapshot(address: LeafAddress): Promise<LeafSnapshot> {
    this.#learn(address);
    let inFlight = 0;
    let inFlightMax = 0;
    for (const [, state] of this.#delivery.entries()) {
      inFlight += state.inFlight;
      inFlightMax = Math.max(inFlightMax, state.inFlight);
    }
    const ring = this.#ring.size;
    return {
      index: address.index,
      connections: this.#delivery.size,
      members: this.#members.size,
      behind: this.#delivery.behind,
      seq: this.#ring.seq,
      windowBytesInFlight: inFlight,
      windowBytesMax: inFlightMax,
      ringMessages: ring.messages,
      ringBytes: ring.bytes,
      instanceStartedAt: this.#instanceStartedAt,
      counters: this.#counters.values,
      unreported: this.#counters.unreported(),
    };
  }

  /** Closes every socket with `code` so clients reconnect and resume; returns how many. */
  async shutdown(address: LeafAddress, code: number, reason: string): Promise<number> {
    this.#learn(address);
    let closed = 0;
    for (const ws of this.ctx.getWebSockets()) {
      this.#delivery.close(ws, code, reason);
      closed += 1;
    }
    return closed;
  }

  /** Aborts this object as a crash would: its sockets drop (for fault tests on the local server). */
  async abort(address: LeafAddress): Promise<void> {
    this.#learn(address);
    this.ctx.abort("leaf aborted on request");
  }

  // -------------------------------------------------------------------------

  /** Sockets that were here when the leaf woke: level where the leaf last wrote it stood. */
  #restore(): void {
    const now = Date.now();
    let mark: { seq: number; epoch: string } | null = null;
    for (const ws of this.ctx.getWebSockets()) {
      const attachment = ws.deserializeAttachment() as LeafAttachment | null;
      if (!attachment || ws.readyState !== WebSocket.OPEN) continue;
      this.#address ??= { room: attachment.room, index: attachment.leaf };
      if (attachment.mark && (mark === null || attachment.mark.seq > mark.seq)) mark = attachment.mark;
      const state = new SocketState(attachment, 0);
      this.#delivery.join(ws, state, now);
      this.#presence.restore(state);
    }
    // Without a mark (no socket holds one) the root says where the leaf is, on first use.
    if (mark) this.#restart({ epoch: mark.epoch, seq: mark.seq, members: this.#members.size }, false);
  }

  /**
   * The leaf is level with the room at `start.seq`. A leaf that had sockets
   * of another history closes them (their seqs mean nothing now): they
   * reconnect and are told so.
   */
  #restart(start: LeafStart, closeStale = true): void {
    if (closeStale && this.#known && start.epoch !== this.#epoch) {
      for (const ws of this.ctx.getWebSockets()) this.#delivery.close(ws, CloseCode.SERVICE_RESTART, "room history restarted: resume");
    }
    this.#epoch = start.epoch;
    this.#ring.reset(start.seq);
    for (const [, state] of this.#delivery.entries()) state.sentSeq = start.seq;
    this.#delivery.reset();
    this.#roomMembers = start.members;
    this.#known = true;
    this.#writeMark();
  }

  /** Makes sure the leaf knows where the room stands, asking the root once however many callers wait. */
  async #ensureKnown(): Promise<void> {
    if (this.#known) return;
    this.#syncing ??= (async () => {
      const address = this.#address;
      if (!address) throw new Error("leaf does not know its room");
      const start = await this.#root(address.room).leafSync(address);
      // A push may have arrived meanwhile; it knows better.
      if (!this.#known) this.#restart(start as LeafStart);
    })().finally(() => (this.#syncing = null));
    return this.#syncing;
  }

  /** Applies pushed (or fetched) messages in seq order: drops what the leaf has, fetches a gap first, fans out the rest. */
  async #apply(lost: LostRange | null, pushed: readonly Message[], now: number): Promise<void> {
    if (lost && lost.to > this.#ring.seq) this.#skipLost(Math.max(lost.from, this.#ring.seq + 1), lost.to);
    let messages = pushed.filter((m) => m.seq > this.#ring.seq);
    const first = messages[0];
    if (first !== undefined && first.seq > this.#ring.seq + 1) {
      const address = this.#address as LeafAddress;
      const got = (await this.#root(address.room).leafHistory(address, this.#ring.seq + 1, FETCH_BYTES)) as { epoch: string; lost: LostRange | null; messages: Message[] };
      if (got.epoch === this.#epoch) await this.#apply(got.lost, got.messages.filter((m) => m.seq < first.seq), now);
      messages = messages.filter((m) => m.seq > this.#ring.seq);
      // Still a gap: the report says where the leaf is, and the root catches it up from history.
      if (messages[0] !== undefined && (messages[0] as Message).seq !== this.#ring.seq + 1) return;
    }
    if (messages.length === 0) return;
    this.#ring.append(messages);
    const runs = messages.map(runOf);
    const batch = { maxBytes: this.#limits.BATCH_MAX_BYTES, maxEvents: this.#limits.BATCH_MAX_EVENTS };
    for (let i = 0; i < runs.length; ) {
      const { frame, end } = cutFrame(runs, i, batch);
      this.#delivery.fanOut(frame, 0, now);
      i = end;
    }
  }

  /** History lost seqs `from`..`to` before this leaf had them: sockets level here are told, as catch-up tells a socket. */
  #skipLost(from: number, to: number): void {
    const level = this.#ring.seq;
    const event: LostEvent = { type: "lost", reason: "history", from, to };
    const text = JSON.stringify(event);
    for (const [ws, state] of [...this.#delivery.entries()]) {
      if (state.sentSeq !== level || state.behind) continue;
      if (!this.#delivery.sendControl(ws, text)) continue;
      state.sentSeq = to;
      this.#counters.values.lostMessages += to - from + 1;
    }
    this.#ring.skipLost(to);
    this.#delivery.reset();
  }

  /**
   * A socket needs a message the ring does not hold: fetch it from the root
   * (one fetch at a time, from the lowest seq asked for), then resume every
   * socket that is behind.
   */
  #fetch(from: number): void {
    this.#fetchFrom = Math.min(this.#fetchFrom, from);
    if (this.#fetching || !this.#address) return;
    this.#fetching = true;
    const address = this.#address;
    const epoch = this.#epoch;
    const run = async (): Promise<boolean> => {
      let progressed = true;
      while (this.#fetchFrom !== Number.POSITIVE_INFINITY) {
        const want = this.#fetchFrom;
        this.#fetchFrom = Number.POSITIVE_INFINITY;
        if (this.#ring.covers(want)) continue;
        const got = (await this.#root(address.room).leafHistory(address, want, FETCH_BYTES)) as { epoch: string; lost: LostRange | null; messages: Message[] };
        if (got.epoch !== epoch || got.epoch !== this.#epoch) return false;
        this.#ring.backfill(got.messages, got.lost);
        progressed = this.#ring.covers(want);
      }
      return progressed;
    };
    run()
      .catch((error: unknown) => {
        logEvent("error", { room: address.room, leaf: address.index, where: "leaf_fetch", error: String(error) });
        return false;
      })
      .then((progressed) => {
        this.#fetching = false;
        const resume = (): void => {
          const now = Date.now();
          for (const [ws, state] of [...this.#delivery.entries()]) if (state.behind) this.#delivery.catchUp(ws, state, now);
        };
        // Sockets that get nothing for long enough are closed as slow consumers, and resume.
        if (progressed) resume();
        else setTimeout(resume, FETCH_RETRY_MS);
      });
  }

  async #publish(dataJson: string): Promise<PublishOutcome> {
    const address = this.#address;
    if (!address) throw new Error("leaf does not know its room");
    // The root runs beforePublish, if its class has one, and may refuse.
    return (await this.#root(address.room).publish(address.room, dataJson, { source: "leaf" })) as PublishOutcome;
  }

  /** What the root learns with each push answer (and in reports between pushes). */
  #takeReport(full: boolean): LeafReport {
    const members = full ? [...this.#members.values()] : [...this.#dirty.values()];
    this.#dirty.clear();
    const delta = this.#counters.unreported();
    // Counted as reported once it leaves: a lost answer loses these counts, never doubles them.
    if (delta) this.#counters.reported(delta);
    return { seq: this.#ring.seq, connections: this.#delivery.size, behind: this.#delivery.behind, members, full, delta };
  }

  /** Reports a change of sockets or members when no push is flowing to carry it. */
  #reportSoon(): void {
    if (this.#reporting) {
      this.#reportAgain = true;
      return;
    }
    if (this.#reportTimer !== null || !this.#address || !this.#known) return;
    this.#reportTimer = setTimeout(() => {
      this.#reportTimer = null;
      const address = this.#address;
      if (!address) return;
      this.#reporting = true;
      const report = this.#takeReport(false);
      (this.#root(address.room).leafReport(address, report) as Promise<number>)
        .then(
          (members) => {
            if (members !== this.#roomMembers) {
              this.#roomMembers = members;
              this.#presence.countChanged();
            }
          },
          (error: unknown) => {
            // The changes go with the next report.
            for (const member of report.members) if (!this.#dirty.has(member.id)) this.#dirty.set(member.id, member);
            logEvent("error", { room: address.room, leaf: address.index, where: "leaf_report", error: String(error) });
          },
        )
        .finally(() => {
          this.#reporting = false;
          if (this.#reportAgain) {
            this.#reportAgain = false;
            this.#reportSoon();
          }
        });
    }, REPORT_DELAY_MS);
  }

  /** Writes where the leaf stands into the holder socket's attachment (one write per push, however many sockets). */
  #writeMark(): void {
    if (!this.#known) return;
    let holder: [WebSocket, SocketState] | undefined;
    for (const entry of this.#delivery.entries()) {
      if (this.#markHolder === null || entry[1] === this.#markHolder) {
        holder = entry;
        break;
      }
    }
    // The holder left without the hook running (it cannot): start over with the first socket.
    holder ??= this.#delivery.entries().next().value;
    if (!holder) {
      this.#markHolder = null;
      return;
    }
    const [ws, state] = holder;
    this.#markHolder = state;
    (state.attachment as LeafAttachment).mark = { seq: this.#ring.seq, epoch: this.#epoch };
    try {
      ws.serializeAttachment(state.attachment);
    } catch {
      // Closing meanwhile: its leave moves the mark on.
    }
  }

  /** Pushes run one after another, in arrival order, even when one waits for a fetch. */
  #serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.#pushes.then(work, work);
    this.#pushes = next.catch(() => undefined);
    return next;
  }

  #learn(address: LeafAddress): void {
    if (!this.#address) this.#address = { room: address.room, index: address.index };
  }

  #root(room: string): DurableObjectStub<Room> {
    const namespace = this.env.ROOMS as DurableObjectNamespace<Room>;
    return namespace.get(namespace.idFromName(room));
  }

  #background(work: Promise<unknown>): void {
    this.ctx.waitUntil(
      work.catch((error: unknown) => logEvent("error", { room: this.#address?.room ?? null, where: "leaf_background", error: String(error) })),
    );
  }
}

function parseSeqParam(value: string | null): number | null {
  if (value === null || !/^\d{1,15}$/.test(value)) return null;
  return Number(value);
}
