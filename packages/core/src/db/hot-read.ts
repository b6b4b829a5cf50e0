import type { QueryResultRow } from 'pg';
import type { DbOrTx } from './knex.js';

/**
 * A read that runs on every request of a hot API endpoint: constant SQL with `?` placeholders
 * and a statement name (a named prepared statement per connection, parsed and planned once).
 */
export interface HotRead {
  name: string;
  /** The SQL as knex.raw takes it (`?` placeholders). */
  sql: string;
  /** The same SQL with pg's `$1…$n`, made once. */
  pgText: string;
}

/**
 * SQL formatting a timestamptz column as Date#toISOString would (UTC, milliseconds, `Z`), for
 * hot reads whose times go straight into JSON: parsing each into a Date only to format it again
 * cost more API CPU than the rest of a row (postgres-date's parser, then toISOString).
 */
export const isoUtc = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

export function hotRead(name: string, sql: string): HotRead {
  let n = 0;
  return { name, sql, pgText: sql.replace(/\?/g, () => `$${++n}`) };
}

/** The slice of a pg client a hot read uses. */
interface PgConnection {
  query<R extends QueryResultRow>(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: R[] }>;
}

/**
 * Runs a hot read straight on a connection of the knex pool, without knex's query runner: for a
 * one-statement read, the runner's bookkeeping (query object, events, binding rewrite, promise
 * chain) cost as much API CPU as pg's own work (bench profile of GET /sites and /webhooks,
 * docs/benchmarks.md). Same pool, same connections and limits; inside a transaction it goes
 * through knex as usual, on the transaction's connection.
 */
export async function runHotRead<R extends QueryResultRow>(db: DbOrTx, read: HotRead, values: unknown[]): Promise<R[]> {
  if (db.isTransaction) {
    const result = (await db.raw(read.sql, values as never[]).options({ name: read.name })) as { rows: R[] };
    return result.rows;
  }
  const connection = (await db.client.acquireConnection()) as PgConnection;
  try {
    const result = await connection.query<R>({ name: read.name, text: read.pgText, values });
    return result.rows;
  } finally {
    // Back in the pool at once; knex's release returns an already settled promise.
    void db.client.releaseConnection(connection);
  }
}
