import { createRequire } from "node:module";

/**
 * The durable baseline's history: every message written to SQLite and
 * committed (WAL, synchronous=FULL: one fsync per commit, as the room's
 * storage does) before its publish is answered. A ring of HISTORY slots per
 * room, like the room's log, so a publish is one row write.
 *
 * better-sqlite3 is a native addon that only the benchmarks need, so it is
 * not a dependency of the project: install it for a run with
 * `npm install --no-save better-sqlite3@12.11.1` (version 12 is the last for Node 20).
 */

interface Statement {
  run(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}
interface Database {
  pragma(text: string): unknown;
  exec(text: string): void;
  prepare(text: string): Statement;
}

export interface StoredFrame {
  room: string;
  seq: number;
  ts: number;
  frame: string;
}

export class DurableHistory {
  readonly #insert: Statement;
  readonly #all: Statement;
  readonly #slots: number;

  constructor(path: string, slots: number) {
    let Sqlite: new (path: string) => Database;
    try {
      Sqlite = createRequire(import.meta.url)("better-sqlite3") as new (path: string) => Database;
    } catch {
      throw new Error("the durable baseline needs better-sqlite3: npm install --no-save better-sqlite3@12.11.1");
    }
    const db = new Sqlite(path);
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = FULL");
    db.exec(`CREATE TABLE IF NOT EXISTS history (room TEXT NOT NULL, slot INTEGER NOT NULL, seq INTEGER NOT NULL, ts INTEGER NOT NULL,
      frame TEXT NOT NULL, PRIMARY KEY (room, slot)) WITHOUT ROWID`);
    this.#insert = db.prepare(
      `INSERT INTO history (room, slot, seq, ts, frame) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (room, slot) DO UPDATE SET seq = excluded.seq, ts = excluded.ts, frame = excluded.frame`,
    );
    this.#all = db.prepare(`SELECT room, seq, ts, frame FROM history ORDER BY room, seq`);
    this.#slots = slots;
  }

  /** Stores one message and commits it (the statement is its own transaction). */
  append(room: string, seq: number, ts: number, frame: string): void {
    this.#insert.run(room, seq % this.#slots, seq, ts, frame);
  }

  /** Everything stored, for a restart. */
  load(): StoredFrame[] {
    return this.#all.all() as StoredFrame[];
  }
}
