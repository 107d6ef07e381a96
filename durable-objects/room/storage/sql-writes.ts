/**
 * Runs one statement to its end and returns the rows it wrote, as the
 * storage counts (and bills) them: what the webhook parts report in
 * `webhookRowsWritten`, measured rather than assumed (an index or a
 * replaced row would count more than the statement suggests).
 */
export function rowsWrittenBy(sql: SqlStorage, query: string, ...bindings: SqlStorageValue[]): number {
  const cursor = sql.exec(query, ...bindings);
  for (const _ of cursor) {
    // Drained: the count is final only once the statement has run to its end.
  }
  return cursor.rowsWritten;
}

/** Whether the object's database has a table of that name. */
export function tableExists(sql: SqlStorage, name: string): boolean {
  return sql.exec<{ n: number }>(`SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = ?`, name).one().n > 0;
}
