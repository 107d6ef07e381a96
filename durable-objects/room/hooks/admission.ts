import { CloseCode, type ErrorBody } from "../../../protocol";
import { REFUSAL_CLOSE_HEADER } from "../../../common/edge-requests";
import { logEvent } from "../../../common/log";
import type { SocketAttachment } from "../../engine/attachment";
import { memberView } from "./connection";
import type { ConnectOutcome, HookRunner } from "./hook-runner";

/** How a refused connect is answered: its close code, or (to a client that asked for X-Refusal: http) status and error code. */
const CONNECT_REFUSALS: Readonly<Record<Extract<ConnectOutcome, { ok: false }>["code"], { close: number; status: 401 | 403 | 500 | 503; error: ErrorBody["error"] }>> = {
  forbidden: { close: CloseCode.FORBIDDEN, status: 403, error: "forbidden" },
  unauthorized: { close: CloseCode.UNAUTHORIZED, status: 401, error: "unauthorized" },
  try_again_later: { close: CloseCode.TRY_AGAIN_LATER, status: 503, error: "room_full" },
  internal: { close: CloseCode.INTERNAL_ERROR, status: 500, error: "internal" },
};

/**
 * Asks the room's onConnect hook about a socket: null admits it (with
 * `attachment` completed by what the hook attached), a Response refuses it.
 * The refusal carries the close code it stands for beside its status; the
 * edge answers a client that can take one with a socket closed with that
 * code (a browser sees only 1006 for an HTTP refusal).
 */
export async function admit<Data extends object>(runner: HookRunner<Data>, room: string, request: Request, attachment: SocketAttachment): Promise<Response | null> {
  const outcome = await runner.connect({
    id: attachment.id,
    room,
    member: memberView(attachment.member),
    canPublish: attachment.canPublish,
    request,
  });
  if (outcome.ok) {
    if (outcome.data !== undefined) attachment.data = outcome.data;
    if (outcome.canPublish === false) attachment.canPublish = false;
    return null;
  }
  const answer = CONNECT_REFUSALS[outcome.code];
  if (outcome.code !== "internal") logEvent("refusal", { room, reason: "connect_refused", code: outcome.code, close: answer.close });
  const body: ErrorBody = { error: answer.error, message: outcome.message };
  const headers: Record<string, string> = { [REFUSAL_CLOSE_HEADER]: String(answer.close) };
  if (answer.status === 503) headers["Retry-After"] = "5";
  return Response.json(body, { status: answer.status, headers });
}
