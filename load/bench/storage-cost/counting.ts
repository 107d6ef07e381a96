/**
 * What a room's storage lifecycle costs, counted inside the worker for
 * load/bench/storage-cost.ts: every call into the room and coordinator
 * objects (requests, alarms included: each is billed), every row their SQL
 * writes (as the cursor reports it) and every alarm they set. The objects'
 * classes are wrapped, not changed: their prototypes count their calls, and
 * each instance's storage counts what it writes.
 * All objects of the local server run in one isolate, so the counts are one
 * module's.
 */
import { DurableObject } from "cloudflare:workers";

export interface ObjectCounts {
  /** Calls by method (the runtime's fetch and alarm, and each RPC method). */
  calls: Record<string, number>;
  /** Rows written, as SQL cursors report them. */
  rowsWritten: number;
  setAlarm: number;
  deleteAlarm: number;
  deleteAll: number;
}

const fresh = (): ObjectCounts => ({ calls: {}, rowsWritten: 0, setAlarm: 0, deleteAlarm: 0, deleteAll: 0 });
export const counts = { room: fresh(), coordinator: fresh() };

type ObjectClass = abstract new (ctx: DurableObjectState, env: never) => object;

/** Methods the objects call on themselves (the room's hooks, its wiring): not requests. */
const OWN_CALLS = new Set(["runSockets", "onConnect", "beforePublish", "onClientFrame", "onClose", "connections", "publishMessage"]);

/** Counts calls of every method `cls` and its ancestors define, up to the runtime's DurableObject. */
function countCalls(cls: ObjectClass, into: ObjectCounts): void {
  const seen = new Set<string>(OWN_CALLS);
  const stop = DurableObject.prototype as unknown;
  for (let proto = cls.prototype as Record<string, unknown>; proto && proto !== stop && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      const descriptor = Object.getOwnPropertyDescriptor(proto, name);
      if (name === "constructor" || seen.has(name) || typeof descriptor?.value !== "function") continue;
      seen.add(name);
      const original = descriptor.value as (...args: unknown[]) => unknown;
      Object.defineProperty(cls.prototype, name, {
        ...descriptor,
        value: function (this: unknown, ...args: unknown[]) {
          into.calls[name] = (into.calls[name] ?? 0) + 1;
          return original.apply(this, args);
        },
      });
    }
  }
}

/**
 * Counts what `ctx`'s storage writes, in place: the runtime's DurableObject
 * takes only the state it made, so its storage and SQL objects get counting
 * methods of their own (the runtime hands out the same objects every time).
 */
function countStorage(ctx: DurableObjectState, into: ObjectCounts): void {
  const storage = ctx.storage;
  const sql = storage.sql;
  const exec = sql.exec.bind(sql);
  sql.exec = ((query: string, ...bindings: SqlStorageValue[]) => {
    const cursor = exec(query, ...bindings);
    // A write without RETURNING has run once exec returns: its count is final.
    into.rowsWritten += cursor.rowsWritten;
    return cursor;
  }) as typeof sql.exec;
  for (const name of ["setAlarm", "deleteAlarm", "deleteAll"] as const) {
    const original = (storage[name] as (...args: unknown[]) => Promise<unknown>).bind(storage);
    (storage as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
      into[name] += 1;
      return original(...args);
    };
  }
  if (ctx.storage.sql.exec !== sql.exec) throw new Error("the runtime handed out another storage object: nothing would be counted");
}

/** `cls` with its calls counted into `into`, and its instances' storage counted too. */
export function counting<C extends abstract new (ctx: DurableObjectState, env: never) => object>(cls: C, into: ObjectCounts): C {
  countCalls(cls, into);
  const Base = cls as unknown as new (ctx: DurableObjectState, env: unknown) => object;
  class Counted extends Base {
    constructor(ctx: DurableObjectState, env: unknown) {
      countStorage(ctx, into);
      super(ctx, env);
    }
  }
  return Counted as unknown as C;
}

/** The counts so far, as GET /__counts answers them. */
export function countsResponse(): Response {
  return Response.json(counts);
}
