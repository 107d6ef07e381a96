/**
 * WebSocket subprotocols. Browsers cannot set headers on a WebSocket, but they
 * can offer subprotocols, which travel in the `Sec-WebSocket-Protocol` header
 * and stay out of URLs and access logs. A client offers
 *
 *     new WebSocket(url, ["fanout.v1", "token." + jwt])
 *
 * and the server selects (echoes) `fanout.v1`; the `token.` entry only carries
 * the token. A browser closes the connection when the server selects nothing
 * from a non-empty offer, so any offer must include `fanout.v1`.
 */
import { SUBPROTOCOL, TOKEN_SUBPROTOCOL_PREFIX } from "../../protocol";

export { TOKEN_SUBPROTOCOL_PREFIX };
export const FANOUT_SUBPROTOCOL = SUBPROTOCOL;

export interface SubprotocolOffer {
  /** Every protocol offered, in order. */
  offered: string[];
  /** The token carried as `token.<jwt>`, if any. */
  token: string | null;
  /** Whether `fanout.v1` was offered (and so must be echoed in the 101 answer). */
  fanout: boolean;
}

/** Reads a `Sec-WebSocket-Protocol` request header (absent = nothing offered). */
export function parseSubprotocolOffer(header: string | undefined | null): SubprotocolOffer {
  const offered = (header ?? "")
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "");
  const tokenEntry = offered.find((p) => p.startsWith(TOKEN_SUBPROTOCOL_PREFIX));
  return {
    offered,
    token: tokenEntry === undefined ? null : tokenEntry.slice(TOKEN_SUBPROTOCOL_PREFIX.length),
    fanout: offered.includes(FANOUT_SUBPROTOCOL),
  };
}
