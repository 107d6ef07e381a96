import { roomSocketPath, type ServerEvent } from "../../../protocol";
import { ClientLedger } from "../stats/ledger";
import type { ClientStats } from "./client-stats";
import type { WorkerConfig } from "./messages";
import { SocketClient } from "./socket-client";

/**
 * One simulated subscriber on a socket of its own to one room: it resumes
 * with `since` and `epoch` in the URL from its ledger, which survives
 * reconnects, and acks the last message of what it read, with its tag.
 */
export class RoomLoadClient extends SocketClient {
  readonly ledger: ClientLedger;

  constructor(index: number, readonly room: string, group: "fast" | "slow", localAddress: string | undefined, config: WorkerConfig, stats: ClientStats) {
    super(index, group, localAddress, config, stats);
    this.ledger = new ClientLedger(config.deadlineMs, config.expectedMessages);
  }

  *subscriptions(): Iterable<readonly [string, ClientLedger]> {
    yield [this.room, this.ledger];
  }

  protected socketPath(): string {
    const query = new URLSearchParams(this.config.wsParams);
    const resume = this.ledger.resumePoint();
    if (resume) {
      query.set("since", String(resume.since));
      query.set("epoch", resume.epoch);
    }
    const search = query.toString();
    return roomSocketPath(this.room) + (search ? `?${search}` : "");
  }

  protected onEvent(event: ServerEvent, now: number): boolean {
    switch (event.type) {
      case "message":
        this.stats.events++;
        // An ack names the last message of a frame, with its tag (proof it was read).
        this.toAck = { type: "ack", seq: event.seq, tag: event.tag };
        this.deliver(this.room, this.ledger, event, now);
        return false;
      case "welcome":
        this.ledger.welcome(event.epoch, event.seq);
        this.welcomed(event.window);
        this.cameBack(now);
        return true;
      case "lost":
        this.ledger.lostEvent(event.from, event.to);
        return false;
      case "error":
        this.stats.errorEvents++;
        return false;
      default:
        return false;
    }
  }
}
