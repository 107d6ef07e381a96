import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ErrorBody, ErrorCode } from "../client-sdk/src/protocol";
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
