/**
 * Structured logs: one JSON object per line, so `wrangler tail` and log
 * pipelines can filter by event, room and reason.
 */
export type LogEventName =
  | "error"
  | "kick"
  | "refusal"
  | "socket_error"
  | "socket_dropped"
  | "bad_config"
  | "broadcast"
  | "open_mode"
  /** A room's hook threw or answered something it may not (durable-objects/room/hook-runner.ts). */
  | "hook_error"
  /** A webhook request failed and will be retried, or events became dead letters (docs/webhooks.md). */
  | "webhook_failed"
  | "webhook_dead_letter"
  /** The local server's fault tests only: a publish is durable and its answer held (durable-objects/room/fault-hold.ts). */
  | "fault_hold"
  /**
   * The local server only: a hub's instance started (its first connection, or woken from
   * hibernation by an alarm or a frame the runtime did not answer), so that what wakes an idle
   * hub can be counted (npm run bench -- pusher --table wakeups).
   */
  | "instance_started";

export function logEvent(event: LogEventName, fields: Record<string, unknown>): void {
  const line = JSON.stringify({ event, ...fields });
  if (event === "error" || event === "socket_error" || event === "hook_error") console.error(line);
  else if (event === "open_mode") console.warn(line);
  else console.log(line);
}
