import type { DbOrTx } from '../db/knex.js';
import { newId } from '../ids.js';
import { EVENT_DATA_FIELDS, type EventDataByType, type EventField, type EventType } from './event-types.js';

export interface StoredEvent {
  id: string;
  accountId: string;
  type: EventType;
  body: string;
  createdAt: Date;
}

/**
 * The database's clock for an event, read once per statement: `clock.now`. An event is dated by
 * it, never by the producer's clock — the sweep compares created_at with the database's clock, and
 * a producer whose clock runs ahead would hide a lost fan-out from it. Milliseconds, as the body
 * writes them, so the body's timestamp and the row's created_at are one instant.
 */
export const CLOCK_CTE = `clock AS (SELECT date_trunc('milliseconds', clock_timestamp()) AS now)`;

/** A text SQL expression as a JSON string (`"…"`, escaped as JSON.stringify escapes it). */
export function jsonString(sqlExpr: string): string {
  return `to_json((${sqlExpr})::text)::text`;
}

/** A constant as an SQL string literal. */
function literal(text: string): string {
  return `'${text.replace(/'/g, "''")}'`;
}

/**
 * The event body of spec §2.5 as one SQL expression, the only place an envelope is written:
 * exactly the bytes of JSON.stringify({ event, timestamp, data }) with the data fields in §6.1
 * order (EVENT_DATA_FIELDS), the timestamp `clock.now` (CLOCK_CTE must be in scope). `data` gives
 * each field's value as an SQL expression of its JSON text: jsonString(…) of a column, or a value
 * JSON-encoded by the caller (numbers are, so that they read as JavaScript writes them).
 * Postgres's own json_build_object would put spaces around every colon.
 */
export function eventBodySql<T extends EventType>(type: T, data: Readonly<Record<EventField<T>, string>>): string {
  const fields = EVENT_DATA_FIELDS[type] as ReadonlyArray<EventField<T>>;
  const dataSql = fields.map((field, i) => `${literal(`${i > 0 ? ',' : ''}${JSON.stringify(field)}:`)} || ${data[field]}`).join(' || ');
  const timestamp = jsonString(`to_char(clock.now AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`);
  return `(${literal(`{"event":${JSON.stringify(type)},"timestamp":`)} || ${timestamp} || ',"data":{' || ${dataSql} || '}}')`;
}

/**
 * Inserts an event of an account, its body written by eventBodySql from `data` (only the §6.1
 * fields); call it inside the transaction that records the fact. Producers do not call it: their
 * statement writes the fact and the event together (producer-statements.ts).
 */
export async function insertEvent<T extends EventType>(
  tx: DbOrTx,
  accountId: string,
  type: T,
  data: EventDataByType[T],
): Promise<StoredEvent> {
  const id = newId('evt');
  const fields = EVENT_DATA_FIELDS[type] as ReadonlyArray<EventField<T>>;
  const values = Object.fromEntries(fields.map((field, i) => [`evValue${i}`, JSON.stringify(data[field])]));
  const body = eventBodySql(type, Object.fromEntries(fields.map((field, i) => [field, `:evValue${i}::text`])) as Record<EventField<T>, string>);
  const result = await tx.raw(
    `WITH ${CLOCK_CTE}
     INSERT INTO events (id, account_id, type, body, created_at) SELECT :evId, :evAccountId, :evType, ${body}, clock.now FROM clock
     RETURNING body, created_at`,
    { evId: id, evAccountId: accountId, evType: type, ...values },
  );
  const row = result.rows[0] as { body: string; created_at: Date };
  return { id, accountId, type, body: row.body, createdAt: row.created_at };
}

/** Events whose fan-out has not been recorded, oldest first, older than the grace period. */
export async function findEventsAwaitingFanout(db: DbOrTx, olderThanMs: number, limit: number): Promise<string[]> {
  const rows = await db('events')
    .whereNull('fanned_out_at')
    .where('created_at', '<', db.raw(`now() - make_interval(secs => ?)`, [olderThanMs / 1000]))
    .orderBy('created_at')
    .limit(limit)
    .select('id');
  return rows.map((row: { id: string }) => row.id);
}
