/**
 * Set of message seqs at or above a base, stored as a growable bitset: a
 * client that receives every message of a bounded run costs one bit each.
 */
export class SeqSet {
  readonly base: number;
  private words: Uint32Array;
  private members = 0;

  constructor(base: number, expected = 1024) {
    this.base = base;
    this.words = new Uint32Array(Math.max(1, Math.ceil(expected / 32)));
  }

  /** Adds `seq`; returns false when it was already present or lies below the base. */
  add(seq: number): boolean {
    const offset = seq - this.base;
    if (offset < 0) return false;
    const word = offset >>> 5;
    if (word >= this.words.length) this.grow(word + 1);
    const bit = 1 << (offset & 31);
    const current = this.words[word] as number;
    if (current & bit) return false;
    this.words[word] = current | bit;
    this.members++;
    return true;
  }

  has(seq: number): boolean {
    const offset = seq - this.base;
    if (offset < 0) return false;
    const word = offset >>> 5;
    if (word >= this.words.length) return false;
    return ((this.words[word] as number) & (1 << (offset & 31))) !== 0;
  }

  get size(): number {
    return this.members;
  }

  /** Members within [from, to], inclusive. */
  countInRange(from: number, to: number): number {
    let n = 0;
    const start = Math.max(from, this.base);
    for (let s = start; s <= to; s++) if (this.has(s)) n++;
    return n;
  }

  private grow(minWords: number): void {
    let length = this.words.length;
    while (length < minWords) length *= 2;
    const next = new Uint32Array(length);
    next.set(this.words);
    this.words = next;
  }
}
