import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ErrorBody, ErrorCode } from "../client-sdk/src/protocol";

/** Every refusal the service makes is a status with a JSON body of this shape. */
export function jsonError(
  c: Context,
  status: ContentfulStatusCode,
  error: ErrorCode,
  message: string,
  headers?: Record<string, string>,
): Response {
  const body: ErrorBody = { error, message };
  return c.json(body, status, headers);
}
