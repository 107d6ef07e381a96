import { resumePointOf, type QueryParams } from "../protocol";
import { retentionFor } from "../common/retention";
import { historyRules, readLimits } from "../common/settings";

/**
 * What is wrong with a socket URL's `rewind` for room `room`, or null: it may
 * reach back at most the room's maxMessages (its HISTORY_RULES rule, else
 * HISTORY_MAX_MESSAGES), what its history can hold. With `since` it is
 * ignored, so it is not checked either (protocol/rooms.ts, ResumePoint).
 */
export function rewindProblem(room: string, query: QueryParams, env: Record<string, unknown>): string | null {
  const { since, rewind } = resumePointOf(query);
  if (since !== null || rewind === null) return null;
  const { maxMessages } = retentionFor(room, historyRules(env), readLimits(env));
  return rewind > maxMessages ? `rewind must be at most ${maxMessages}, the messages this room's history keeps` : null;
}
