import type { DbOrTx } from '../db/knex.js';
import { newId } from '../ids.js';
import { eventBodySegments, type EventDataByType, type EventType } from './event-types.js';

export interface StoredEvent {
  id: string;
  accountId: string;
  type: EventType;
  body: string;
  createdAt: Date;
}

/**
 * The `event` CTE of a producer's one statement (the fact and its event in one commit): inserts
 * the event, its body built once, dated by the database's clock, never the producer's — the sweep
 * compares it with the database's clock, and a producer whose clock runs ahead would hide a lost
 * fan-out from it. Milliseconds, as the column keeps them, so the body's timestamp and the row's
 * are one instant. `from` names what the statement selects the event's values from;
 * `accountIdSql` and `fromDatabase` (data fields the database fills in) are SQL expressions over it;
 * `fannedOutSql`, when the statement fans the event out itself, is its fanned_out_at (over `clock.now`).
 */
export function eventInsertCte<T extends EventType>(
  type: T,
  data: EventDataByType[T],
  sources: {
    from: string;
    accountIdSql: string;
    fromDatabase?: Partial<Record<keyof EventDataByType[T] & string, string>>;
    fannedOutSql?: string;
  },
): { eventId: string; sql: string; bindings: Record<string, unknown> } {
  const eventId = newId('evt');
  const fromDatabase = sources.fromDatabase ?? {};
  const fields = Object.keys(fromDatabase) as Array<keyof EventDataByType[T] & string>;
  const bindings: Record<string, unknown> = { evId: eventId, evType: type };
  const body = eventBodySegments(type, data, fields)
    .map((segment, i) => {
      if (typeof segment === 'string') {
        bindings[`evSeg${i}`] = segment;
        return `:evSeg${i}::text`;
      }
      if (segment.field === 'timestamp') return `to_json(to_char(clock.now AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text`;
      return `to_json((${fromDatabase[segment.field as keyof typeof fromDatabase] as string})::text)::text`;
    })
    .join(' || ');
  const sql = `event AS (
       INSERT INTO events (id, account_id, type, body, created_at, fanned_out_at)
       SELECT :evId, ${sources.accountIdSql}, :evType, ${body}, clock.now, ${sources.fannedOutSql ?? 'NULL::timestamptz'}
         FROM ${sources.from}, (SELECT date_trunc('milliseconds', clock_timestamp()) AS now) clock
       RETURNING id, body, created_at, fanned_out_at
     )`;
  return { eventId, sql, bindings };
}

/** Inserts an event of an account; call it inside the transaction that records the fact. */
export async function insertEvent<T extends EventType>(
  tx: DbOrTx,
  accountId: string,
  type: T,
  data: EventDataByType[T],
): Promise<StoredEvent> {
  const event = eventInsertCte(type, data, { from: '(SELECT :accountId::text AS account_id) account', accountIdSql: 'account.account_id' });
  const result = await tx.raw(`WITH ${event.sql} SELECT body, created_at FROM event`, { ...event.bindings, accountId });
  const row = result.rows[0] as { body: string; created_at: Date };
  return { id: event.eventId, accountId, type, body: row.body, createdAt: row.created_at };
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
