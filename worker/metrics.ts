import { Hono } from "hono";
import type { ShardMetrics } from "../durable-objects/coordinator/coordinator";
import { readCoordinatorConfig } from "../common/coordinator-config";
import { shardStub } from "../common/coordinator-shards";
import { addTotals, zeroTotals, type ServiceTotals } from "../common/counters";
import type { Env } from "./env";
import { flushServiceCounters } from "./service-counters";

/**
 * GET /metrics in Prometheus text format: live rooms and connections from
 * the registry, and the service's cumulative counters (every room's, reported
 * with its registry reports, plus the worker's own). Room-level detail stays in
 * GET /rooms/{room}.
 *
 * Counters lag by up to one room heartbeat (IDLE_TIMEOUT_SECONDS): a room
 * reports what grew when it gains its first socket, loses its last, or sweeps.
 */
export const metricsRoutes = new Hono<{ Bindings: Env }>();

metricsRoutes.get("/metrics", async (c) => {
  await flushServiceCounters(c.env);
  const shards = readCoordinatorConfig(c.env).shards;
  const answers = await Promise.allSettled(
    Array.from({ length: shards }, (_, i) => shardStub(c.env.COORDINATOR, i).metrics() as Promise<ShardMetrics>),
  );
  let liveRooms = 0;
  let connections = 0;
  let members = 0;
  const multiplexed = { hubs: 0, connections: 0, subscriptions: 0 };
  const pusher = { hubs: 0, connections: 0, subscriptions: 0 };
  let unreachable = 0;
  const totals = zeroTotals();
  for (const answer of answers) {
    if (answer.status === "rejected") {
      unreachable += 1;
      continue;
    }
    liveRooms += answer.value.liveRooms;
    connections += answer.value.connections;
    members += answer.value.members;
    // A shard from before hubs reported has no such figures.
    for (const [sum, hubs] of [
      [multiplexed, answer.value.multiplexed],
      [pusher, answer.value.pusher],
    ] as const) {
      if (!hubs) continue;
      sum.hubs += hubs.hubs;
      sum.connections += hubs.connections;
      sum.subscriptions += hubs.subscriptions;
    }
    addTotals(totals, answer.value.totals);
  }
  return c.text(renderMetrics({ liveRooms, connections, members, multiplexed, pusher, totals, shards, unreachable }), 200, {
    "Content-Type": "text/plain; version=0.0.4; charset=utf-8",
    "Cache-Control": "no-store",
  });
});

interface Snapshot {
  liveRooms: number;
  connections: number;
  members: number;
  multiplexed: { hubs: number; connections: number; subscriptions: number };
  pusher: { hubs: number; connections: number; subscriptions: number };
  totals: ServiceTotals;
  shards: number;
  unreachable: number;
}

type Metric = [name: string, type: "gauge" | "counter", help: string, samples: [labels: string, value: number][]];

/** Renders the Prometheus exposition format (text 0.0.4). */
export function renderMetrics(s: Snapshot): string {
  const t = s.totals;
  const metrics: Metric[] = [
    ["fanout_rooms_live", "gauge", "Rooms with at least one socket, as the registry knows them.", [["", s.liveRooms]]],
    ["fanout_connections", "gauge", "Sockets in live rooms, as last reported (a multiplexed connection counts once per room it follows).", [["", s.connections]]],
    ["fanout_multiplexed_connections", "gauge", "Multiplexed connections (GET /ws) held by hubs, as last reported.", [["", s.multiplexed.connections]]],
    ["fanout_multiplexed_subscriptions", "gauge", "Room subscriptions of multiplexed connections, as last reported.", [["", s.multiplexed.subscriptions]]],
    ["fanout_hubs_live", "gauge", "Hubs holding at least one multiplexed connection, as last reported.", [["", s.multiplexed.hubs]]],
    ["fanout_pusher_connections", "gauge", "Pusher connections (/app/{key}) held by Pusher hubs, as last reported.", [["", s.pusher.connections]]],
    ["fanout_pusher_subscriptions", "gauge", "Channel subscriptions of Pusher connections, as last reported.", [["", s.pusher.subscriptions]]],
    ["fanout_presence_members", "gauge", "Presence members in live rooms (identities, however many sockets each has), as last reported.", [["", s.members]]],
    ["fanout_messages_published_total", "counter", "Messages published into rooms.", [["", t.published]]],
    ["fanout_frames_sent_total", "counter", "Frames sent to sockets (a frame may carry several messages).", [["", t.framesSent]]],
    ["fanout_bytes_sent_total", "counter", "Bytes of frames sent to sockets.", [["", t.bytesSent]]],
    ["fanout_deliveries_total", "counter", "Messages delivered, counted per socket.", [["", t.deliveries]]],
    ["fanout_catchup_frames_total", "counter", "Frames sent from history to sockets catching up (behind or resuming); part of frames sent.", [["", t.catchUpFrames]]],
    ["fanout_history_rows_read_total", "counter", "History rows read to send catch-up frames.", [["", t.historyRowsRead]]],
    ["fanout_history_rows_written_total", "counter", "History rows written (one per live frame).", [["", t.historyRowsWritten]]],
    ["fanout_messages_lost_total", "counter", "Messages reported lost to sockets because they aged out of history first, counted per socket.", [["", t.lostMessages]]],
    ["fanout_presence_events_total", "counter", "Presence events (sync, join, leave, count) sent, counted per socket.", [["", t.presenceEvents]]],
    ["fanout_webhook_events_total", "counter", "Webhook events recorded in rooms' outboxes.", [["", t.webhookEvents]]],
    ["fanout_webhook_delivered_total", "counter", "Webhook events the receiver acknowledged.", [["", t.webhookDelivered]]],
    ["fanout_webhook_requests_total", "counter", "Webhook requests sent.", [["", t.webhookRequests]]],
    ["fanout_webhook_failed_requests_total", "counter", "Webhook requests that failed (timeout, network error, or not 2xx); each is retried.", [["", t.webhookFailedRequests]]],
    ["fanout_webhook_dead_letters_total", "counter", "Webhook events that became dead letters (undelivered for WEBHOOK_RETRY_SECONDS, or past the outbox's bound).", [["", t.webhookDeadLetters]]],
    ["fanout_webhook_rows_written_total", "counter", "SQLite rows written for webhooks (outbox, record of members, dead letters).", [["", t.webhookRowsWritten]]],
    ["fanout_kicks_total", "counter", "Sockets closed as slow consumers (4008): behind with no acknowledged progress.", [["", t.kicks]]],
    [
      "fanout_refusals_total",
      "counter",
      "Requests refused and sockets closed by the service, by reason.",
      Object.entries(t.refusals)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([reason, count]) => [`{reason="${reason.replace(/["\\\n]/g, "_")}"}`, count]),
    ],
    ["fanout_broadcasts_total", "counter", "Cross-room broadcasts accepted.", [["", t.broadcasts]]],
    ["fanout_registry_shards", "gauge", "Coordinator shards.", [["", s.shards]]],
    ["fanout_registry_shards_unreachable", "gauge", "Shards that did not answer this scrape (their figures are missing).", [["", s.unreachable]]],
  ];
  const lines: string[] = [];
  for (const [name, type, help, samples] of metrics) {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [labels, value] of samples) lines.push(`${name}${labels} ${value}`);
  }
  return `${lines.join("\n")}\n`;
}
