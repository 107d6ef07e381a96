import type { ClientLedger } from "../stats/ledger";

export type ConnectOutcome = { ok: true } | { ok: false; cause: string };

/**
 * What a client process asks of one simulated client, whether it is a socket
 * to one room (LoadClient) or a multiplexed connection that follows several
 * (MuxLoadClient): its connection's state, and one ledger per subscription,
 * so every delivery is accounted for by room and seq either way.
 */
export interface SimulatedClient {
  readonly index: number;
  readonly group: "fast" | "slow";
  readonly isOpen: boolean;
  readonly isConnecting: boolean;
  /** Lost its socket and has a reconnect scheduled or under way. */
  readonly isReconnecting: boolean;
  /** Whether this client should be caught up with its rooms by the end of a run. */
  readonly expectedToKeepUp: boolean;
  /** Dropped (or told the server went away) and not back yet. */
  readonly waitingToComeBack: boolean;
  /** Opens the socket; resolves once it is usable (welcomed, and subscribed where it subscribes at once) or failed. */
  connect(): Promise<ConnectOutcome>;
  /** Each room it follows, with that subscription's ledger. */
  subscriptions(): Iterable<readonly [room: string, ledger: ClientLedger]>;
  tick(now: number): void;
  stall(): void;
  resume(): void;
  markDropped(at: number): void;
  drop(at: number): void;
  close(): void;
  terminate(): void;
}
