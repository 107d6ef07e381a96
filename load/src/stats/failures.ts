/**
 * Names the cause of a failed connection attempt so a reader can tell the
 * server's refusals from the load generator's own limits.
 */
export type FailureCause = string;

/** Errors raised by the client machine's own resources, never by the server. */
const CLIENT_SIDE_CODES = new Set(["EMFILE", "ENFILE", "EADDRNOTAVAIL", "EADDRINUSE", "ENOBUFS", "ENOMEM"]);

export function classifyConnectError(error: unknown, httpStatus?: number): FailureCause {
  if (httpStatus !== undefined) return `http ${httpStatus}`;
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

/** True for causes that are the load generator's limits rather than the server's answers. */
export function isClientSideCause(cause: FailureCause): boolean {
  return cause.startsWith("client ");
}

/** Adds counts of `from` into `into` (cause -> count). */
export function addCounts(into: Record<string, number>, from: Readonly<Record<string, number>>): Record<string, number> {
  for (const [key, n] of Object.entries(from)) into[key] = (into[key] ?? 0) + n;
  return into;
}
