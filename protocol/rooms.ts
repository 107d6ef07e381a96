/** Room names and the paths that name a room. */

/** Room names: 1-64 characters from a URL-safe set, starting with a letter or digit. */
export const ROOM_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:~-]{0,63}$/;

export function isValidRoomName(name: string): boolean {
  return ROOM_NAME_PATTERN.test(name);
}

/** URL path of a room's WebSocket endpoint. */
export function roomSocketPath(room: string): string {
  return `/rooms/${encodeURIComponent(room)}/ws`;
}

/** URL path of a room's HTTP publish endpoint. */
export function roomPublishPath(room: string): string {
  return `/rooms/${encodeURIComponent(room)}/publish`;
}
