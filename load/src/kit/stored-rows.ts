/**
 * Rows of history the rooms of a local server hold in their SQLite files
 * (each room's `log` table), read with the `sqlite3` command: what a run
 * wrote per message, counted by the storage itself rather than by the
 * service's own counters.
 */
import { execFileSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";

function sqlite(file: string, query: string): string {
  return execFileSync("sqlite3", ["-readonly", file, query], { encoding: "utf8", timeout: 10_000, stdio: ["ignore", "pipe", "ignore"] }).trim();
}

/**
 * History rows the rooms under a local server's data directory hold;
 * undefined without the `sqlite3` command. A room's ring is never emptied,
 * only overwritten, so for a run shorter than its ring these are the rows it
 * wrote.
 */
export function storedHistoryRows(dataDir: string): number | undefined {
  const rooms = join(dataDir, "edge-fanout-Room");
  let files: string[];
  try {
    files = readdirSync(rooms).filter((name) => name.endsWith(".sqlite") && name !== "metadata.sqlite");
  } catch {
    return 0;
  }
  let rows = 0;
  for (const name of files) {
    const file = join(rooms, name);
    try {
      // A room that wrote no history has no log table (an ephemeral room never has one).
      if (sqlite(file, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'log'") === "1") rows += Number(sqlite(file, "SELECT count(*) FROM log")) || 0;
    } catch (error) {
      if ((error as { code?: string }).code === "ENOENT") return undefined;
    }
  }
  return rows;
}
