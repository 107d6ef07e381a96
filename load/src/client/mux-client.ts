import { MULTIPLEX_PATH, type ErrorCode, type MultiplexEvent, type ServerEvent, type SubscribeFrame } from "../../../protocol";
import { ClientLedger } from "../stats/ledger";
import type { ClientStats } from "./client-stats";
import type { WorkerConfig } from "./messages";
import type { ConnectOutcome } from "./simulated";
import { SocketClient } from "./socket-client";

/** Refusals a subscribe is sent again after: the budget refills, or the root could not be reached this once. */
const RETRIED: ReadonlySet<ErrorCode> = new Set(["rate_limited", "internal"]);
/** Attempts of one room's subscribe on one socket before it counts as refused for good. */
const MAX_SUBSCRIBE_ATTEMPTS = 5;

/** What one subscribe storm of one connection came to. */
export interface SubscribeOutcome {
  asked: number;
  subscribed: number;
  /** The socket closed before every room had an answer. */
  closed: boolean;
}

/**
 * One simulated multiplexed connection (`GET /ws`): one socket that follows
 * `rooms`, with a ledger per subscription, so every delivery is matched by
 * (room, seq) and a loss, duplicate or reordering in one room is never
 * covered by another room's messages. Its ack names the newest message read,
 * with its room (one window covers the connection, and that ack releases every
 * frame sent before it, of every room); after a reconnect, every room is
 * subscribed again with `since` and `epoch` from its own ledger, and the
 * connection is back once they all are.
 */
export class MuxLoadClient extends SocketClient {
  /** Told to follow its rooms (at once, or by a subscribe storm): from then on a new socket subscribes them all. */
  private followsRooms: boolean;
  private readonly ledgers = new Map<string, ClientLedger>();
  /** Rooms subscribed on the current socket. */
  private readonly live = new Set<string>();
  /** Rooms asked for on the current socket and not answered yet, with their attempts. */
  private readonly pending = new Map<string, number>();
  private readonly retryTimers = new Set<ReturnType<typeof setTimeout>>();
  private settleSubscribing: ((outcome: SubscribeOutcome) => void) | undefined;
  private subscribingSince = 0;

  constructor(index: number, readonly rooms: readonly string[], group: "fast" | "slow", localAddress: string | undefined, config: WorkerConfig, stats: ClientStats) {
    super(index, group, localAddress, config, stats);
    for (const room of rooms) this.ledgers.set(room, new ClientLedger(config.deadlineMs, config.expectedMessages));
    this.followsRooms = config.subscribeOnOpen;
  }

  protected override get following(): boolean {
    return this.followsRooms;
  }

  /** Rooms subscribed on the current socket. */
  get liveSubscriptions(): number {
    return this.live.size;
  }

  *subscriptions(): Iterable<readonly [string, ClientLedger]> {
    yield* this.ledgers;
  }

  protected socketPath(): string {
    const search = new URLSearchParams(this.config.wsParams).toString();
    return MULTIPLEX_PATH + (search ? `?${search}` : "");
  }

  /** A refused subscribe leaves the connection open with its other rooms: it is counted apart, not as a failed connection. */
  protected override async afterWelcome(): Promise<ConnectOutcome> {
    if (!this.followsRooms) return { ok: true };
    const outcome = await this.subscribeAll();
    return outcome.closed ? { ok: false, cause: "closed while subscribing" } : { ok: true };
  }

  /**
   * Sends a subscribe for every room not yet followed on this socket, all at
   * once, each resuming from its ledger (`since` and `epoch`) when it had
   * one; resolves when every room is subscribed or refused for good.
   */
  subscribeAll(): Promise<SubscribeOutcome> {
    this.followsRooms = true;
    if (!this.isOpen) return Promise.resolve({ asked: this.rooms.length, subscribed: this.live.size, closed: true });
    const wanted = this.rooms.filter((room) => !this.live.has(room) && !this.pending.has(room));
    this.subscribingSince = performance.now();
    const done = new Promise<SubscribeOutcome>((resolve) => (this.settleSubscribing = resolve));
    for (const room of wanted) this.sendSubscribe(room, 1);
    this.checkSubscribed();
    return done;
  }

  private sendSubscribe(room: string, attempt: number): void {
    this.pending.set(room, attempt);
    this.send(this.subscribeFrame(room, (this.ledgers.get(room) as ClientLedger).resumePoint()));
  }

  /** The subscribe of `room`, resuming from `resume` when the ledger has one (a protocol that cannot resume leaves it out). */
  protected subscribeFrame(room: string, resume: { since: number; epoch: string } | undefined): string {
    const frame: SubscribeFrame = { type: "subscribe", room, ...(resume ? { since: resume.since, epoch: resume.epoch } : {}) };
    return JSON.stringify(frame);
  }

  /** Every room has its answer: the subscribe storm of this socket is over, and after a drop the connection is back. */
  private checkSubscribed(): void {
    if (this.pending.size > 0 || !this.settleSubscribing) return;
    const settle = this.settleSubscribing;
    this.settleSubscribing = undefined;
    if (this.live.size === this.rooms.length) {
      this.stats.subscribeMs.add(performance.now() - this.subscribingSince);
      this.cameBack(Date.now());
    }
    settle({ asked: this.rooms.length, subscribed: this.live.size, closed: false });
  }

  protected onEvent(raw: ServerEvent, now: number): boolean {
    const event = raw as unknown as MultiplexEvent;
    const s = this.stats;
    switch (event.type) {
      case "message": {
        s.events++;
        const ledger = this.ledgers.get(event.room);
        // A room this connection never asked for is a server fault, not a delivery.
        if (!ledger) {
          s.parseErrors++;
          return false;
        }
        this.toAck = { type: "ack", room: event.room, seq: event.seq, tag: event.tag };
        this.deliver(event.room, ledger, event, now);
        return false;
      }
      case "welcome":
        this.welcomed(event.window);
        return true;
      case "subscribed": {
        const ledger = this.ledgers.get(event.room);
        if (!ledger || !this.pending.has(event.room)) return false;
        ledger.welcome(event.epoch, event.seq);
        this.pending.delete(event.room);
        this.live.add(event.room);
        s.subscribed++;
        this.checkSubscribed();
        return false;
      }
      case "lost":
        this.ledgers.get(event.room)?.lostEvent(event.from, event.to);
        return false;
      case "unsubscribed":
        this.live.delete(event.room);
        s.errorEvents++;
        return false;
      case "error":
        s.errorEvents++;
        if (event.room !== undefined) this.refused(event.room, event.code);
        return false;
      default:
        return false;
    }
  }

  /** A subscribe was refused: counted by code, and sent again later when the refusal is one that passes. */
  private refused(room: string, code: ErrorCode): void {
    const attempt = this.pending.get(room);
    if (attempt === undefined) return;
    this.stats.subscribeRefusals[code] = (this.stats.subscribeRefusals[code] ?? 0) + 1;
    if (RETRIED.has(code) && attempt < MAX_SUBSCRIBE_ATTEMPTS) {
      const ws = this.ws;
      const timer = setTimeout(() => {
        this.retryTimers.delete(timer);
        if (this.ws === ws && this.isOpen && this.pending.get(room) === attempt) this.sendSubscribe(room, attempt + 1);
      }, 250 + Math.floor(Math.random() * 1000 * attempt));
      this.retryTimers.add(timer);
      return;
    }
    this.pending.delete(room);
    this.checkSubscribed();
  }

  /** The socket is gone: nothing is subscribed on it any more, and a subscribe storm on it ends. */
  protected override socketGone(): void {
    this.live.clear();
    this.pending.clear();
    for (const timer of this.retryTimers) clearTimeout(timer);
    this.retryTimers.clear();
    const settle = this.settleSubscribing;
    this.settleSubscribing = undefined;
    settle?.({ asked: this.rooms.length, subscribed: 0, closed: true });
  }
}
