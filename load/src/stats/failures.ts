/**
 * Names the cause of a failed connection attempt so a reader can tell the
 * server's refusals from the load generator's own limits.
 */
export type FailureCause = string;

/** Errors raised by the client machine's own resources, never by the server. */
const CLIENT_SIDE_CODES = new Set(["EMFILE", "ENFILE", "EADDRNOTAVAIL", "EADDRINUSE", "ENOBUFS", "ENOMEM"]);

/**
 * `errorCode`: the `error` of a refusal's JSON body (`over_capacity`, `room_full`, ...), so that a
 * server's limit is told apart from its other answers of the same status.
 */
export function classifyConnectError(error: unknown, httpStatus?: number, errorCode?: string): FailureCause {
  if (httpStatus !== undefined) return errorCode ? `http ${httpStatus} ${errorCode}` : `http ${httpStatus}`;
  const code = typeof error === "object" && error !== null && "code" in error ? String((error as { code: unknown }).code) : undefined;
  if (code && CLIENT_SIDE_CODES.has(code)) return `client ${code}`;
  if (code === "ECONNREFUSED") return "refused";
  if (code === "ECONNRESET" || code === "EPIPE") return "reset";
  if (code === "ETIMEDOUT") return "timeout";
  const message = error instanceof Error ? error.message : String(error);
  if (/handshake has timed out/i.test(message)) return "timeout";
  const status = /Unexpected server response: (\d{3})/.exec(message);
  if (status) return `http ${status[1]}`;
  if (/closed before the connection was established/i.test(message)) return "closed during handshake";
  if (code) return code;
  return message.length > 60 ? `${message.slice(0, 57)}...` : message;
}

/** The `error` field of a refusal's JSON body (`{"error","message"}`), when it has one. */
export function refusalCode(body: string): string | undefined {
  try {
    const error = (JSON.parse(body) as { error?: unknown }).error;
    return typeof error === "string" && /^[a-z_]{1,40}$/.test(error) ? error : undefined;
  } catch {
    return undefined;
  }
}

/** True for causes that are the load generator's limits rather than the server's answers. */
export function isClientSideCause(cause: FailureCause): boolean {
  return cause.startsWith("client ");
}

/** Adds counts of `from` into `into` (cause -> count). */
export function addCounts(into: Record<string, number>, from: Readonly<Record<string, number>>): Record<string, number> {
  for (const [key, n] of Object.entries(from)) into[key] = (into[key] ?? 0) + n;
  return into;
}
