import { normalizeOrigin } from "../../common/settings";

/**
 * Whether an upgrade's `Origin` passes the allow-list. Browsers always send
 * `Origin` on a WebSocket upgrade, so the list keeps other sites' pages from
 * opening sockets with a visitor's token; clients that are not browsers send
 * none and are not affected (tokens are what restrict them). No list = any
 * origin.
 */
export function originAllowed(origin: string | undefined, allowed: ReadonlySet<string> | null): boolean {
  if (allowed === null || origin === undefined) return true;
  return allowed.has(normalizeOrigin(origin));
}
