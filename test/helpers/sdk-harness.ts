import type { RoomClient } from "../../client-sdk/src/index";
import type { ConnectionState, StateCause } from "../../client-sdk/src/events";
import { until } from "./wait";

/** Publishes `data` as JSON over HTTP; returns the message's seq. */
export async function publish(baseUrl: string, room: string, data: unknown): Promise<number> {
  const response = await fetch(`${baseUrl}/rooms/${encodeURIComponent(room)}/publish`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(data),
  });
  if (!response.ok) throw new Error(`publish failed: HTTP ${response.status} ${await response.text()}`);
  const body = (await response.json()) as { seq: number };
  return body.seq;
}

/** Polls `condition` until it holds; fails with `what` after `timeoutMs` (clients reconnect with backoff, so the default is generous). */
export function waitFor(condition: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  return until(condition, { what, timeoutMs, everyMs: 20 });
}

export interface StateChange {
  state: ConnectionState;
  cause: StateCause;
  code?: number;
  reason?: string;
  at: number;
}

/** Everything a client delivered to the application, in order. */
export class Recorder {
  readonly seqs: number[] = [];
  readonly data: unknown[] = [];
  readonly lost: Array<{ reason: string; from: number; to: number }> = [];
  readonly states: StateChange[] = [];
  readonly errors: string[] = [];

  constructor(client: RoomClient) {
    client.addEventListener("message", (e) => {
      this.seqs.push(e.seq);
      this.data.push(e.data);
    });
    client.addEventListener("lost", (e) => this.lost.push({ reason: e.reason, from: e.from, to: e.to }));
    client.addEventListener("state", (e) => this.states.push({ state: e.state, cause: e.cause, code: e.code, reason: e.reason, at: Date.now() }));
    client.addEventListener("error", (e) => this.errors.push(`${e.code}: ${e.message}`));
  }

  /** How many times the client went from open to reconnecting. */
  get reconnections(): number {
    return this.states.filter((s) => s.state === "reconnecting").length;
  }

  /** Asserts-friendly view: every seq from `from` to `to` exactly once, in order. */
  static range(from: number, to: number): number[] {
    return Array.from({ length: to - from + 1 }, (_, i) => from + i);
  }
}
