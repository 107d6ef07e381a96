import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ErrorBody, ErrorCode } from "../protocol";
import type { PublishRefused } from "../durable-objects/engine/publish-outcome";
import { countRefusal } from "./service-counters";

/**
 * Every refusal the service makes is a status with a JSON body of this shape,
 * and is counted for /metrics under `reason` (the error code unless a finer
 * reason is given).
 */
export function jsonError(
  c: Context,
  status: ContentfulStatusCode,
  error: ErrorCode,
  message: string,
  headers?: Record<string, string>,
  reason: string = error,
): Response {
  countRefusal(reason);
  const body: ErrorBody = { error, message };
  return c.json(body, status, headers);
}

/** The status an HTTP publisher gets for each refusal a room's beforePublish hook can give. */
const REFUSED_PUBLISH_STATUS: Readonly<Record<PublishRefused["error"], ContentfulStatusCode>> = {
  bad_request: 400,
  forbidden: 403,
  rate_limited: 429,
  too_large: 413,
  conflict: 409,
  over_capacity: 503,
  internal: 500,
};

/**
 * Answers an HTTP publish the room refused (its beforePublish hook) with the
 * refusal's status and `{"error","message"}`. Not counted here: the room
 * counted it, and /metrics sums the rooms' counts.
 */
export function refusedPublish(c: Context, refusal: PublishRefused): Response {
  const body: ErrorBody = { error: refusal.error, message: refusal.message };
  return c.json(body, REFUSED_PUBLISH_STATUS[refusal.error]);
}
