import type { QueryResultRow } from 'pg';
import type { DbOrTx } from './knex.js';

/**
 * A hot write's statement, as knex.raw takes it (`:name` bindings) and as pg takes it (`$1…$n`),
 * converted once per statement name instead of once per call.
 *
 * Why: a producer's one statement (producer-statements.ts) is a few KB of SQL. Through knex, each
 * call ran knex's named-binding regex over all of it, then its positional rewrite and its query
 * runner (query object, events, promise chain): a sixth of the publisher's CPU per event in the
 * bench profile (docs/benchmarks.md, case 2). pg itself already parsed and planned the statement
 * once per connection (it is named); this does the same on our side.
 */
interface Converted {
  /** The SQL knex would have been given; a name always stands for the same text. */
  sql: string;
  /** The same statement with `$n` placeholders. */
  text: string;
  /** The binding name for each `$n`, in order. */
  order: string[];
}

const converted = new Map<string, Converted>();

/**
 * Converts knex's named bindings into pg's positional ones: `:name` is replaced only where
 * `name` is a key of the bindings (as knex does), so casts (`::text`) and colons inside string
 * literals (`'HH24:MI'`) stay as written. `:name:` (an identifier) is not supported here.
 */
export function toPositional(sql: string, bindingNames: readonly string[]): { text: string; order: string[] } {
  const known = new Set(bindingNames);
  const order: string[] = [];
  // One `$n` per occurrence, as knex numbers them: a name used twice is two parameters, so pg
  // infers each one's type from its own place, exactly as for the statement knex sent.
  const text = sql.replace(/(?<![:\w]):([A-Za-z_]\w*)(?!:[A-Za-z_])/g, (match, name: string) => {
    if (!known.has(name)) return match;
    order.push(name);
    return `$${order.length}`;
  });
  return { text, order };
}

/** The slice of a pg client this uses. */
interface PgConnection {
  query<R extends QueryResultRow>(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: R[] }>;
}

/**
 * Runs `sql` with its named bindings as the prepared statement `name`, straight on a connection of
 * the knex pool (same pool, connections and limits, the same 'query' event; see runHotRead).
 * Inside a transaction it goes through knex as usual, on the transaction's connection. Every call
 * with a name must pass the same SQL text (checked: pg would otherwise run the statement it
 * prepared first) and the same binding names.
 */
export async function runNamedStatement<R extends QueryResultRow>(
  db: DbOrTx,
  name: string,
  sql: string,
  bindings: Readonly<Record<string, unknown>>,
): Promise<R[]> {
  if (db.isTransaction) {
    const result = (await db.raw(sql, bindings as Record<string, never>).options({ name })) as { rows: R[] };
    return result.rows;
  }
  let statement = converted.get(name);
  if (statement === undefined) {
    statement = { sql, ...toPositional(sql, Object.keys(bindings)) };
    converted.set(name, statement);
  } else if (statement.sql !== sql) {
    throw new Error(`prepared statement ${name} was given another SQL text`);
  }
  const values = statement.order.map((key) => {
    const value = bindings[key];
    // knex refuses an undefined binding; so does this (pg would send NULL silently).
    if (value === undefined) throw new Error(`prepared statement ${name}: binding ${key} is undefined`);
    return value;
  });
  const connection = (await db.client.acquireConnection()) as PgConnection;
  // knex's 'query' event, as for any statement knex sends (see runHotRead).
  db.client.emit('query', { method: 'raw', sql, bindings: values, options: { name } });
  try {
    const result = await connection.query<R>({ name, text: statement.text, values });
    return result.rows;
  } finally {
    void db.client.releaseConnection(connection);
  }
}
