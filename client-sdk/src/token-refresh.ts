import { MAX_AUTH_TOKEN_LENGTH, type ServerError } from "../../protocol/index.js";
import { TokenRefreshError } from "./subscription-events.js";
import { describe } from "./transport.js";

/** What the refresh needs of its connection. */
export interface TokenRefreshLink {
  /** Whether a frame sent now goes out on an open connection. */
  readonly writable: boolean;
  /** Queues an `auth` frame carrying `token` on the current connection. */
  sendAuth(token: string): void;
  /** A refresh the client made by itself failed; the connection goes on (until the token expires: 4001). */
  failed(error: TokenRefreshError): void;
}

/** A refresh sent and not yet answered. */
interface Waiting {
  resolve(exp: number): void;
  reject(error: TokenRefreshError): void;
}

/**
 * The `exp` claim of a JWT (seconds since the epoch), read without checking
 * the signature (the server checks it); undefined for a token that is no JWT.
 */
export function tokenExpiry(token: string | undefined): number | undefined {
  try {
    const claims = JSON.parse(atob(token!.split(".")[1]!.replace(/-/g, "+").replace(/_/g, "/"))) as { exp?: unknown };
    return typeof claims.exp === "number" ? claims.exp : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A fresh token on the open connection, without reconnecting: an `auth`
 * frame, answered `authorized` with the new expiry (or an `error`). With a
 * token function the refresh also runs by itself, `aheadMs` before the
 * current token expires (its JWT `exp`, or the last `authorized` answer),
 * so the server never has to close the connection with 4001; when the
 * token lives shorter than that, at half its remaining life.
 */
export class TokenRefresh {
  #aheadMs: number;
  #tokenFunction: (() => string | PromiseLike<string>) | undefined;
  #link: TokenRefreshLink;
  /** Refreshes sent and awaiting the server's answer, oldest first: the server answers in order. */
  #waiting: Waiting[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(aheadMs: number, tokenFunction: (() => string | PromiseLike<string>) | undefined, link: TokenRefreshLink) {
    this.#aheadMs = aheadMs;
    this.#tokenFunction = tokenFunction;
    this.#link = link;
  }

  /** A connection opened with `token`: refresh ahead of its expiry. */
  opened(token: string | undefined): void {
    this.#schedule(tokenExpiry(token));
  }

  /**
   * Sends `token`, or the token function's next one, in an `auth` frame;
   * resolves with the new token's expiry once the server took it.
   */
  async refresh(token?: string): Promise<number> {
    let next: unknown = token;
    if (next === undefined) {
      if (!this.#tokenFunction) throw new TokenRefreshError("bad_request", "no token function to ask: pass the new token");
      try {
        next = await this.#tokenFunction();
      } catch (error) {
        throw new TokenRefreshError("token", describe(error));
      }
    }
    if (typeof next !== "string" || next === "") throw new TokenRefreshError("token", "no token to send");
    // An auth frame the server cannot parse would close the connection with 4000, for good.
    if (next.length > MAX_AUTH_TOKEN_LENGTH) throw new TokenRefreshError("bad_request", `the token is over ${MAX_AUTH_TOKEN_LENGTH} characters`);
    if (!this.#link.writable) throw new TokenRefreshError("unconfirmed", "no open connection to send it on");
    const fresh = next;
    return new Promise((resolve, reject) => {
      this.#waiting.push({ resolve, reject });
      this.#link.sendAuth(fresh);
    });
  }

  /** The server took a token: it expires at `exp`. */
  authorized(exp: number): void {
    this.#waiting.shift()?.resolve(exp);
    this.#schedule(exp);
  }

  /** An `error` that names no room: the answer to the oldest refresh, if one waits; false when none does. */
  refused(error: ServerError): boolean {
    const waiting = this.#waiting.shift();
    waiting?.reject(new TokenRefreshError(error.code, error.message));
    return waiting !== undefined;
  }

  /** The connection ended (or the client closed): refreshes it carried are unconfirmed, and the schedule goes with it. */
  ended(code: "unconfirmed" | "closed", message: string): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    for (const waiting of this.#waiting.splice(0)) waiting.reject(new TokenRefreshError(code, message));
  }

  #schedule(exp: number | undefined): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (!this.#tokenFunction || this.#aheadMs <= 0 || exp === undefined) return;
    const remaining = exp * 1000 - Date.now();
    if (remaining <= 0) return;
    this.#timer = setTimeout(() => this.refresh().catch((error: TokenRefreshError) => this.#link.failed(error)), Math.max(remaining - this.#aheadMs, remaining / 2));
  }
}
