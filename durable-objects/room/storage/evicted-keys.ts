import { hashLanes } from "../../../common/body-hash";

/**
 * Which publish keys left the room's in-memory index for lack of room (publish-keys.ts
 * holds the newest MAX_KEYS_PER_SPACE of each kind) while their rows are still
 * within reach, and in which rows they are: so that a key missing from memory
 * is looked up in the rows only when it may be there.
 *
 * Keys are added in the order they were stored, into generations of
 * KEYS_PER_GENERATION, each a Bloom filter (BITS_PER_KEY bits and PROBES probes
 * a key: under 0.3% false positives when full) with the span of rows its keys
 * are in. A lookup answers the spans whose filter may hold the key, newest
 * first, so a new key (the common case) costs a few hashes, and a retry of an
 * evicted key one range read over its generation's rows. A generation whose
 * newest row is out of reach is dropped whole. Past MAX_GENERATIONS (about a
 * million keys evicted and still within reach) the oldest generation's span
 * is kept without its filter: until it leaves reach, every lookup may read
 * its rows. Memory stays within MAX_GENERATIONS filters (2 MB).
 */

export const KEYS_PER_GENERATION = 1 << 16;
export const MAX_GENERATIONS = 16;
const BITS_PER_KEY = 16;
const PROBES = 4;
const WORDS = (KEYS_PER_GENERATION * BITS_PER_KEY) / 32;

/** Rows `from`..`to` (row numbers, inclusive), the newest written at `ts`. */
export interface RowSpan {
  from: number;
  to: number;
  ts: number;
}

interface Generation extends RowSpan {
  bits: Uint32Array;
  count: number;
}

export class EvictedKeys {
  #generations: Generation[] = [];
  /** Rows of keys evicted from the oldest filters, past MAX_GENERATIONS: any of them may hold any key. */
  #unfiltered: RowSpan | null = null;

  /** A key left memory; it is stored in row `row`, written at `ts`. */
  add(id: string, row: number, ts: number): void {
    let newest = this.#generations[this.#generations.length - 1];
    if (newest === undefined || newest.count >= KEYS_PER_GENERATION) {
      newest = { bits: new Uint32Array(WORDS), count: 0, from: row, to: row, ts };
      this.#generations.push(newest);
      if (this.#generations.length > MAX_GENERATIONS) this.#unfilter(this.#generations.shift() as Generation);
    }
    const [h1, h2] = hashLanes(id);
    for (let i = 0; i < PROBES; i++) {
      const bit = bitOf(h1, h2, i);
      newest.bits[bit >>> 5] = (newest.bits[bit >>> 5] as number) | (1 << (bit & 31));
    }
    newest.count += 1;
    newest.from = Math.min(newest.from, row);
    newest.to = Math.max(newest.to, row);
    newest.ts = Math.max(newest.ts, ts);
  }

  /**
   * The spans of rows that may hold `id`, newest first; `reaches(row, ts)`
   * says whether a row is still within reach (spans wholly out of it are
   * forgotten here).
   */
  spansOf(id: string, reaches: (row: number, ts: number) => boolean): RowSpan[] {
    while (this.#generations.length > 0 && !reaches((this.#generations[0] as Generation).to, (this.#generations[0] as Generation).ts)) this.#generations.shift();
    if (this.#unfiltered !== null && !reaches(this.#unfiltered.to, this.#unfiltered.ts)) this.#unfiltered = null;
    const spans: RowSpan[] = [];
    if (this.#generations.length === 0 && this.#unfiltered === null) return spans;
    const [h1, h2] = hashLanes(id);
    for (let g = this.#generations.length - 1; g >= 0; g--) {
      const generation = this.#generations[g] as Generation;
      if (mayHold(generation.bits, h1, h2)) spans.push({ from: generation.from, to: generation.to, ts: generation.ts });
    }
    if (this.#unfiltered !== null) spans.push({ ...this.#unfiltered });
    return spans;
  }

  /** Nothing was evicted (the room gave its storage back). */
  clear(): void {
    this.#generations = [];
    this.#unfiltered = null;
  }

  #unfilter(oldest: Generation): void {
    const kept = this.#unfiltered;
    this.#unfiltered = kept === null ? { from: oldest.from, to: oldest.to, ts: oldest.ts } : { from: Math.min(kept.from, oldest.from), to: Math.max(kept.to, oldest.to), ts: Math.max(kept.ts, oldest.ts) };
  }
}

/** Probe `i` of a key hashed to `h1`, `h2` (double hashing), as a bit of a filter. */
function bitOf(h1: number, h2: number, i: number): number {
  return ((h1 + Math.imul(i, h2)) >>> 0) % (WORDS * 32);
}

function mayHold(bits: Uint32Array, h1: number, h2: number): boolean {
  for (let i = 0; i < PROBES; i++) {
    const bit = bitOf(h1, h2, i);
    if (((bits[bit >>> 5] as number) & (1 << (bit & 31))) === 0) return false;
  }
  return true;
}
