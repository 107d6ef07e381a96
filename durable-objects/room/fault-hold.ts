import { logEvent } from "../../common/log";

/**
 * A fault-test hook of the local server, and nothing else: with
 * `FAULT_HOLD_PUBLISH_ANSWER_MS` set (and only where LOCAL_ADMIN_TOKEN is, which
 * the local server's launcher alone sets, never Cloudflare), a room holds the
 * answer to each new HTTP publish that long after its row is durable, having
 * logged `fault_hold` with the room and seq. A test that sees the line knows the
 * publish is committed and its answer not yet sent, and can kill workerd right
 * there (test/service/publish-retry.test.ts). Unset, the room gets null and its
 * publish path does nothing for it.
 */
export type AnswerHold = (room: string, seq: number) => Promise<void>;

export function answerHoldOf(env: Record<string, unknown>, storage: DurableObjectStorage): AnswerHold | null {
  const ms = Number(env.FAULT_HOLD_PUBLISH_ANSWER_MS ?? 0);
  if (typeof env.LOCAL_ADMIN_TOKEN !== "string" || env.LOCAL_ADMIN_TOKEN === "" || !(ms > 0)) return null;
  return async (room, seq) => {
    // The row is written when the flush returns; sync() resolves once it is on disk.
    await storage.sync();
    logEvent("fault_hold", { room, seq, holdMs: ms });
    await new Promise((resolve) => setTimeout(resolve, ms));
  };
}
