// Removes the empty database files rooms leave on disk after giving their storage back.
//
// A room with no sockets whose history has aged out deletes its storage (deleteAll); on
// Cloudflare that frees it, but workerd's local disk keeps the object's database file as an
// empty one-page stub (4 KiB, no tables). One per room name ever used adds up, so the
// launcher removes them before workerd starts, when no object has its file open.
import { readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";

/** SQLite's page size in workerd's object databases: an empty database is exactly one page. */
const EMPTY_DATABASE_BYTES = 4096;

/** Deletes empty object databases under `dataDir`; returns how many it removed. */
export function removeEmptyRoomDatabases(dataDir) {
  let removed = 0;
  let namespaces;
  try {
    namespaces = readdirSync(dataDir, { withFileTypes: true }).filter((d) => d.isDirectory());
  } catch {
    return 0;
  }
  for (const namespace of namespaces) {
    const dir = join(dataDir, namespace.name);
    const names = new Set(readdirSync(dir));
    for (const name of names) {
      // The namespace's own metadata database is not an object's.
      if (!name.endsWith(".sqlite") || name.startsWith("metadata")) continue;
      // A write-ahead log beside it means the database may hold pages not yet checkpointed.
      if (names.has(`${name}-wal`) || names.has(`${name}-shm`)) continue;
      const path = join(dir, name);
      if (statSync(path).size > EMPTY_DATABASE_BYTES) continue;
      rmSync(path, { force: true });
      removed += 1;
    }
  }
  return removed;
}
