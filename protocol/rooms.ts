/** Room names and the paths that name a room. */

/** Room names: 1-64 characters from a URL-safe set, starting with a letter or digit. */
export const ROOM_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:~-]{0,63}$/;

/**
 * The rooms of Pusher channels (`pusher:{app id}:{channel}`, docs/pusher.md) may be longer:
 * Pusher allows channel names of 164 characters. The same pattern as protocol/pusher.ts's
 * PUSHER_ROOM_PATTERN, written here so that room names import nothing.
 */
const PUSHER_ROOM_NAME_PATTERN = /^pusher:[A-Za-z0-9_-]{1,32}:[A-Za-z0-9._~-]{1,360}$/;

/** Whether `name` is a room name: 1-64 characters of ROOM_NAME_PATTERN, or a Pusher channel's room. */
export function isValidRoomName(name: string): boolean {
  return ROOM_NAME_PATTERN.test(name) || PUSHER_ROOM_NAME_PATTERN.test(name);
}

/** URL path of a room's WebSocket endpoint. */
export function roomSocketPath(room: string): string {
  return `/rooms/${encodeURIComponent(room)}/ws`;
}

/** URL path of a room's HTTP publish endpoint. */
export function roomPublishPath(room: string): string {
  return `/rooms/${encodeURIComponent(room)}/publish`;
}

/** URL path of a room's history pages. */
export function roomMessagesPath(room: string): string {
  return `/rooms/${encodeURIComponent(room)}/messages`;
}

/** A resume position in a socket URL: `?since=<seq>` (a non-negative integer of at most 15 digits). */
export const SINCE_PATTERN = /^\d{1,15}$/;
/** `?epoch=`: the epoch string of a welcome event. */
export const EPOCH_PATTERN = /^[A-Za-z0-9-]{1,64}$/;
/** `?rewind=N`: start N messages back (a non-negative integer; the server bounds it by what the room keeps). */
export const REWIND_PATTERN = /^\d{1,6}$/;

/** A URL's query parameters, as URLSearchParams has them (without needing the DOM's types). */
export interface QueryParams {
  get(name: string): string | null;
}

/**
 * Where a socket asks to resume: after `since`, in the history named `epoch`
 * (null when it did not say); or, without `since`, `rewind` messages back
 * from the newest. With `since`, `rewind` is ignored: a client that resumes
 * knows where it is, and one that opened with `?rewind=` keeps it in its URL
 * when it reconnects.
 */
export interface ResumePoint {
  since: number | null;
  epoch: string | null;
  rewind: number | null;
}

/**
 * The resume point of a socket URL's query. A value that breaks its pattern
 * reads as absent (the edge refuses such a URL with 400 before any object
 * sees it: `resumeProblem`).
 */
export function resumePointOf(query: QueryParams): ResumePoint {
  const since = query.get("since");
  const epoch = query.get("epoch");
  const rewind = query.get("rewind");
  return {
    since: since !== null && SINCE_PATTERN.test(since) ? Number(since) : null,
    epoch: epoch !== null && EPOCH_PATTERN.test(epoch) ? epoch : null,
    rewind: rewind !== null && REWIND_PATTERN.test(rewind) ? Number(rewind) : null,
  };
}

/** What is wrong with a socket URL's resume parameters, or null when nothing is. */
export function resumeProblem(query: QueryParams): string | null {
  const since = query.get("since");
  if (since !== null && !SINCE_PATTERN.test(since)) return "since must be a non-negative integer";
  const epoch = query.get("epoch");
  if (epoch !== null && !EPOCH_PATTERN.test(epoch)) return "epoch must be the epoch string from a welcome event";
  // Beside since, rewind is not looked at (a reconnecting client keeps the URL it opened with).
  const rewind = query.get("rewind");
  if (since === null && rewind !== null && !REWIND_PATTERN.test(rewind)) return "rewind must be a number of messages (a non-negative integer)";
  return null;
}
