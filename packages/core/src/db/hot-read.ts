import type { QueryResultRow } from 'pg';
import type { DbOrTx } from './knex.js';

/**
 * A statement that runs on every request of a hot API endpoint (a read), or on every key the API
 * meets (the key lookup and its lastUsedAt touch): constant SQL with `?` placeholders and a
 * statement name (a named prepared statement per connection, parsed and planned once).
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

/**
 * SQL giving a timestamptz column as the text of its JSON form in UTC, quotes included:
 * `"2026-11-23T11:21:08.23"` (the fraction without trailing zeros, absent when zero; whatever the
 * session's DateStyle). isoFromJsonUtc makes it the text isoUtc gives. For reads with hundreds of
 * times per request (a score history page has 200): to_char interprets its picture for every
 * value, 0.4–0.65 µs each on the bench machine against 0.15 µs for to_json (120,000 values,
 * `SELECT sum(length(…)) FROM scans`), and the few string operations here cost less than that.
 */
export const jsonUtc = (column: string) => `to_json(${column} AT TIME ZONE 'UTC')::text`;

/**
 * The text isoUtc (to_char) gives, from a jsonUtc value: milliseconds (truncated, as to_char's MS
 * is) and `Z`. A year of five digits (never written by this service) takes the general path.
 */
export function isoFromJsonUtc(text: string): string {
  // `"YYYY-MM-DDTHH:MM:SS"` is 21 characters with its quotes; a fraction of 1–6 digits follows a '.'.
  if (text.length === 21 && text.charCodeAt(11) === 84 /* T */) return `${text.slice(1, 20)}.000Z`;
  if (text.length >= 23 && text.length <= 28 && text.charCodeAt(11) === 84 && text.charCodeAt(20) === 46 /* . */) {
    return `${text.slice(1, 21)}${text.slice(21, Math.min(24, text.length - 1)).padEnd(3, '0')}Z`;
  }
  const general = /^"(.*T\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?"$/.exec(text);
  if (!general) throw new Error(`not a time as jsonUtc writes one: ${text.slice(0, 40)}`);
  return `${general[1]}.${(general[2] ?? '').slice(0, 3).padEnd(3, '0')}Z`;
}

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
 * docs/benchmarks.md). Same pool, same connections and limits, and the same 'query' event;
 * inside a transaction it goes through knex as usual, on the transaction's connection.
 */
export async function runHotRead<R extends QueryResultRow>(db: DbOrTx, read: HotRead, values: unknown[]): Promise<R[]> {
  if (db.isTransaction) {
    const result = (await db.raw(read.sql, values as never[]).options({ name: read.name })) as { rows: R[] };
    return result.rows;
  }
  const connection = (await db.client.acquireConnection()) as PgConnection;
  // Seen by knex's 'query' event as any statement knex sends (tests count queries with it;
  // an operator's query log would too): one object and one listener call per statement.
  db.client.emit('query', { method: 'raw', sql: read.sql, bindings: values, options: { name: read.name } });
  try {
    const result = await connection.query<R>({ name: read.name, text: read.pgText, values });
    return result.rows;
  } finally {
    // Back in the pool at once; knex's release returns an already settled promise.
    void db.client.releaseConnection(connection);
  }
}
