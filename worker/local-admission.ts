/**
 * Admission control for the local server. workerd aborts the whole process
 * when accept() hits EMFILE, dropping every socket it holds; so the launcher
 * reports the process's real descriptor count here and the worker refuses
 * upgrades with 503 before the limit, keeping existing sockets served.
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

let pressure: Pressure | null = null;
let admitted = 0;
const rooms = new Set<string>();

/** Records a sample from the launcher; returns the admission count to pass back as the next basis. */
export function reportPressure(sample: Pressure): number {
  pressure = sample;
  return admitted;
}

/** True when one more socket fits under the descriptor ceiling; counts it if so. */
export function admitSocket(room: string): boolean {
  if (pressure && pressure.fds + (admitted - pressure.basis) >= pressure.ceiling) return false;
  admitted += 1;
  rooms.add(room);
  return true;
}

/** Rooms that accepted sockets in this process, for closing them all on shutdown. */
export function knownRooms(): string[] {
  return [...rooms];
}

export function admissionSnapshot(): { admitted: number; pressure: Pressure | null; rooms: number } {
  return { admitted, pressure, rooms: rooms.size };
}
