/**
 * A 64-bit hash of a message's JSON text, as an idempotency key's retry is
 * compared with its first publish: stored beside the key in the message's
 * history row (16 hex characters), because the room may have stored the
 * message transformed by its beforePublish hook.
 *
 * Synchronous on purpose: a socket's publishes get their seqs in arrival
 * order, and an await before the seq (crypto.subtle.digest is async) would let
 * the next frame pass the one being hashed. It is not a cryptographic hash:
 * a collision would only make a publisher's own retry with another body pass
 * for a duplicate, and keys are in a space of their own per kind of publisher
 * (docs/history.md#idempotent-publishes).
 */
export function bodyHash(text: string): string {
  const [h1, h2] = hashLanes(text);
  return h1.toString(16).padStart(8, "0") + h2.toString(16).padStart(8, "0");
}

/** The same hash as two unsigned 32-bit numbers (also what a filter of keys probes with). */
export function hashLanes(text: string): [number, number] {
  // Two 32-bit multiply-xorshift lanes over the UTF-16 code units (cyrb53's mixing), each finalized.
  let h1 = 0xdeadbeef ^ text.length;
  let h2 = 0x41c6ce57 ^ text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return [h1 >>> 0, h2 >>> 0];
}
