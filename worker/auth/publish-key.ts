import type { MiddlewareHandler } from "hono";
import { refuse } from "./refusal";
import { accessSettings } from "../../common/settings";
import { isPrivatePusherRoom } from "../../protocol/pusher";

const encoder = new TextEncoder();

async function digest(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

/**
 * Compares two secrets in time independent of where they differ. Both sides
 * are hashed first so the comparison also hides the key's length, and because
 * workerd's `timingSafeEqual` requires equal lengths.
 */
export async function secretsEqual(given: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([digest(given), digest(expected)]);
  const subtle = crypto.subtle as SubtleCrypto & { timingSafeEqual?: (a: ArrayBufferView, b: ArrayBufferView) => boolean };
  if (typeof subtle.timingSafeEqual === "function") return subtle.timingSafeEqual(a, b);
  // Runtimes without the workerd extension (Node tests): a branch-free fold.
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return difference === 0;
}

/** The credentials of an `Authorization: Bearer <key>` header; null when absent or another scheme. */
export function bearerCredentials(header: string | undefined): string | null {
  if (header === undefined) return null;
  const match = /^\s*Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}

/**
 * Requires `Authorization: Bearer <PUBLISH_KEY>` when a publish key is set;
 * lets everything through when it is not (open mode), except the rooms of
 * channels Pusher keeps private (docs/pusher.md#isolation), which open mode
 * never opens. Guards HTTP publishing, /broadcast, the room listing and room
 * stats, and /metrics.
 */
export function requirePublishKey(): MiddlewareHandler {
  return async (c, next) => {
    const key = accessSettings(c.env as Record<string, unknown>).publishKey;
    const room = c.req.param("room");
    if (key === null) {
      if (room !== undefined && isPrivatePusherRoom(room)) {
        return refuse(c, "room_not_allowed", "a private Pusher channel's room is reached with the publish key only: set PUBLISH_KEY", { room });
      }
      return next();
    }
    const given = bearerCredentials(c.req.header("authorization"));
    if (given === null) {
      return refuse(c, "missing_key", "this endpoint requires Authorization: Bearer <publish key>", { room });
    }
    if (!(await secretsEqual(given, key))) {
      return refuse(c, "bad_key", "the publish key is not valid", { room });
    }
    return next();
  };
}
