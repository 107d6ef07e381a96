import { Hono } from "hono";
import { parsePusherChannel, PUSHER_LIMITS, type PusherBatchAnswer, type PusherTriggerAnswer } from "../../protocol/pusher";
import { jsonError, refusedPublish } from "../errors";
import { pusherApiGuard, type PusherApiEnv } from "./api-guard";
import { parseAttributes } from "./channel-attributes";
import { CHANNEL_PREFIX_PATTERN, listChannels } from "./channel-list";
import { channelInfo, channelUsers } from "./channel-state";
import { parseBatch, parseTrigger } from "./event-bodies";
import { terminateUser } from "./terminate";
import { eventAttributes, publishEvents } from "./trigger";

/**
 * Pusher's HTTP API (docs/pusher.md#the-http-api), as the server SDKs call
 * it: `/apps/{app_id}/...`, every request signed (api-guard.ts), answered with
 * Pusher's statuses and bodies; a refusal is `{"error","message"}` like every
 * refusal of the service. Mounted at `/apps` by app.ts.
 */
export const pusherApi = new Hono<PusherApiEnv>();

pusherApi.use("/:appId/*", pusherApiGuard);

pusherApi.post("/:appId/events", async (c) => {
  const app = c.get("pusherApp");
  const parsed = parseTrigger(c.get("pusherBody"), c.get("limits").MAX_MESSAGE_BYTES);
  if (!parsed.ok) return jsonError(c, parsed.status, parsed.error, parsed.message);
  const refused = await publishEvents(c.env, app, [parsed.value]);
  if (refused) return refusedPublish(c, refused);
  const answer: PusherTriggerAnswer = parsed.value.info.size > 0 ? { channels: await eventAttributes(c.env, app, parsed.value) } : {};
  return c.json(answer);
});

pusherApi.post("/:appId/batch_events", async (c) => {
  const app = c.get("pusherApp");
  const parsed = parseBatch(c.get("pusherBody"), c.get("limits").MAX_MESSAGE_BYTES);
  if (!parsed.ok) return jsonError(c, parsed.status, parsed.error, parsed.message);
  const refused = await publishEvents(c.env, app, parsed.value);
  if (refused) return refusedPublish(c, refused);
  if (!parsed.value.some((event) => event.info.size > 0)) return c.json({} satisfies PusherBatchAnswer);
  // An event of a batch has one channel: its entry is that channel's attributes.
  const batch = await Promise.all(parsed.value.map(async (event) => Object.values(await eventAttributes(c.env, app, event))[0] ?? {}));
  return c.json({ batch } satisfies PusherBatchAnswer);
});

pusherApi.get("/:appId/channels", async (c) => {
  const params = c.get("pusherParams");
  const prefix = params.get("filter_by_prefix") ?? "";
  if (!CHANNEL_PREFIX_PATTERN.test(prefix)) return jsonError(c, 400, "bad_request", "filter_by_prefix must be the start of a channel name");
  const info = parseAttributes(params.get("info"), ["user_count", "subscription_count"]);
  if (!info.ok) return jsonError(c, 400, "bad_request", info.message);
  if (info.value.has("user_count") && !prefix.startsWith("presence-")) {
    return jsonError(c, 400, "bad_request", "info=user_count lists presence channels only: add filter_by_prefix=presence-");
  }
  return c.json(await listChannels(c.env, c.get("pusherApp"), prefix, info.value));
});

pusherApi.get("/:appId/channels/:channel", async (c) => {
  const channel = parsePusherChannel(c.req.param("channel"));
  if (!channel) return jsonError(c, 400, "bad_request", "invalid channel name: 1-164 characters of A-Z a-z 0-9 _ - = @ , . ;");
  const info = parseAttributes(c.get("pusherParams").get("info"), ["user_count", "subscription_count", "cache"]);
  if (!info.ok) return jsonError(c, 400, "bad_request", info.message);
  if (info.value.has("user_count") && channel.kind !== "presence") return jsonError(c, 400, "bad_request", "user_count is an attribute of presence channels only");
  if (info.value.has("cache") && !channel.cache) return jsonError(c, 400, "bad_request", "cache is an attribute of cache channels only");
  return c.json(await channelInfo(c.env, c.get("pusherApp"), channel, info.value));
});

pusherApi.get("/:appId/channels/:channel/users", async (c) => {
  const channel = parsePusherChannel(c.req.param("channel"));
  if (!channel) return jsonError(c, 400, "bad_request", "invalid channel name: 1-164 characters of A-Z a-z 0-9 _ - = @ , . ;");
  if (channel.kind !== "presence") return jsonError(c, 400, "bad_request", "only presence channels have users");
  return c.json(await channelUsers(c.env, c.get("pusherApp"), channel));
});

pusherApi.post("/:appId/users/:userId/terminate_connections", async (c) => {
  const user = c.req.param("userId");
  if (user === "" || user.length > PUSHER_LIMITS.maxUserIdLength) return jsonError(c, 400, "bad_request", `user ids are 1-${PUSHER_LIMITS.maxUserIdLength} characters`);
  const hubs = c.env.PUSHER_HUBS;
  if (!hubs) return jsonError(c, 404, "not_found", "the service binds no PUSHER_HUBS namespace: there are no Pusher connections");
  await terminateUser(hubs, c.get("limits").MULTIPLEX_HUBS, user);
  return c.json({});
});

pusherApi.all("/:appId/events", (c) => jsonError(c, 405, "method_not_allowed", "trigger events with POST", { Allow: "POST" }));
pusherApi.all("/:appId/batch_events", (c) => jsonError(c, 405, "method_not_allowed", "trigger a batch with POST", { Allow: "POST" }));
pusherApi.all("/:appId/channels", (c) => jsonError(c, 405, "method_not_allowed", "list channels with GET", { Allow: "GET" }));
pusherApi.all("/:appId/channels/:channel", (c) => jsonError(c, 405, "method_not_allowed", "read a channel with GET", { Allow: "GET" }));
pusherApi.all("/:appId/channels/:channel/users", (c) => jsonError(c, 405, "method_not_allowed", "read a channel's users with GET", { Allow: "GET" }));
pusherApi.all("/:appId/users/:userId/terminate_connections", (c) => jsonError(c, 405, "method_not_allowed", "terminate connections with POST", { Allow: "POST" }));
