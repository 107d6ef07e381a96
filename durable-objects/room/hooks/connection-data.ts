import { MAX_CONNECTION_DATA_BYTES } from "../../../common/settings";
import { utf8Length } from "../../../common/utf8";
import type { JsonObject } from "../../../protocol";

export type ConnectionDataCheck = { ok: true; value: JsonObject } | { ok: false; error: TypeError | RangeError };

/**
 * Checks data a hook attaches to a socket and returns it as the socket will
 * keep it: brought through JSON (so a Date is a string before hibernation as
 * after it, and nothing that JSON drops is kept) and deeply frozen (a hook
 * that changes it in place would change it only until the room hibernates;
 * `setData` is the way). It must be a JSON object of at most
 * MAX_CONNECTION_DATA_BYTES as JSON text, which keeps the attachment well
 * under the platform's 16 KiB.
 */
export function checkConnectionData(data: unknown): ConnectionDataCheck {
  if (typeof data !== "object" || data === null || Array.isArray(data)) {
    return { ok: false, error: new TypeError("connection data must be a JSON object") };
  }
  let json: string;
  try {
    json = JSON.stringify(data);
  } catch (error) {
    return { ok: false, error: new TypeError(`connection data is not JSON: ${String(error)}`) };
  }
  const bytes = utf8Length(json);
  if (bytes > MAX_CONNECTION_DATA_BYTES) {
    return { ok: false, error: new RangeError(`connection data is ${bytes} bytes as JSON, over the ${MAX_CONNECTION_DATA_BYTES} allowed`) };
  }
  return { ok: true, value: deepFreeze(JSON.parse(json) as JsonObject) };
}

/** Freezes `value` and everything in it; returns it. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const item of Object.values(value)) deepFreeze(item);
  }
  return value;
}
