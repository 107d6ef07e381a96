/**
 * Admission control for the local server. workerd aborts the whole process
 * when accept() hits EMFILE, dropping every socket it holds; so the launcher
 * reports the process's real descriptor count here and the worker refuses
 * upgrades with 503 before the limit, keeping existing sockets served. (The
 * launcher also keeps descriptors spare for connections that never become
 * sockets; see local-server/limits.mjs.)
 *
 * The state lives in the isolate because the local server runs one process.
 * On Cloudflare the launcher never reports, and nothing here refuses anything.
 */

interface Pressure {
  /** Descriptors the process had open when last sampled. */
  fds: number;
  /** Admissions counted before that sample was taken (already reflected in `fds`). */
  basis: number;
  /** Highest descriptor count at which upgrades are still admitted. */
  ceiling: number;
}

export type Admission = "admitted" | "over_capacity" | "draining";

let pressure: Pressure | null = null;
let admitted = 0;
let draining = false;
const rooms = new Set<string>();
const hubs = new Set<string>();

/** Records a sample from the launcher; returns the admission count to pass back as the next basis. */
export function reportPressure(sample: Pressure): number {
  pressure = sample;
  return admitted;
}

/**
 * Admits one more socket when it fits under the descriptor ceiling and the
 * server is not shutting down; counts it if so. Only the local server
 * (`local`: its launcher set LOCAL_ADMIN_TOKEN) remembers the room, to close
 * its sockets on shutdown: on Cloudflare an isolate would otherwise keep every
 * room name it ever upgraded into.
 */
export function admitSocket(room: string | null, local: boolean): Admission {
  if (draining) return "draining";
  if (pressure && pressure.fds + (admitted - pressure.basis) >= pressure.ceiling) return "over_capacity";
  admitted += 1;
  if (local && room !== null) rooms.add(room);
  return "admitted";
}

/** The local server remembers the hubs (by name: `hub-<n>`, `pusher-<n>`) that took connections, to close them on shutdown. */
export function noteHub(hub: string): void {
  hubs.add(hub);
}

/** Names of the hubs that took connections in this process. */
export function knownHubs(): string[] {
  return [...hubs];
}

/** From now on every upgrade is refused: the process is about to close its sockets and exit. */
export function beginDrain(): void {
  draining = true;
}

/** Rooms that accepted sockets in this process, for closing them all on shutdown. */
export function knownRooms(): string[] {
  return [...rooms];
}

export function admissionSnapshot(): { admitted: number; pressure: Pressure | null; rooms: number; draining: boolean } {
  return { admitted, pressure, rooms: rooms.size, draining };
}
