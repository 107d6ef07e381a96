import { MAX_MEMBER_ID_LENGTH } from "../common/members";

/** Members per page of `GET /rooms/{room}/presence` when `limit` is not given, and the most one page holds. */
export const PRESENCE_PAGE_DEFAULT = 100;
export const PRESENCE_PAGE_MAX = 1000;

export type PresencePageQuery = { ok: true; limit: number; cursor: string | null } | { ok: false; message: string };

/** Validates `limit` (1-1000, default 100) and `cursor` (the previous page's `cursor`: a member id). */
export function parsePresencePage(limit: string | undefined, cursor: string | undefined): PresencePageQuery {
  let pageSize = PRESENCE_PAGE_DEFAULT;
  if (limit !== undefined) {
    pageSize = Number(limit);
    if (!/^\d{1,4}$/.test(limit) || pageSize < 1 || pageSize > PRESENCE_PAGE_MAX) {
      return { ok: false, message: `limit must be a whole number from 1 to ${PRESENCE_PAGE_MAX}` };
    }
  }
  if (cursor !== undefined && (cursor === "" || cursor.length > MAX_MEMBER_ID_LENGTH)) {
    return { ok: false, message: "cursor must be the cursor of the previous page" };
  }
  return { ok: true, limit: pageSize, cursor: cursor ?? null };
}
