import type { DbOrTx } from '../db/knex.js';
import { newId } from '../ids.js';
import { eventBodyAround, type EventDataByType, type EventType } from './event-types.js';

export interface StoredEvent {
  id: string;
  accountId: string;
  type: EventType;
  body: string;
  createdAt: Date;
}

/**
 * Inserts an event with its body built once; call it inside the transaction that records the fact.
 * Its time is the database's clock, never the producer's: the sweep compares it with the
 * database's clock, and a producer whose clock runs ahead would hide a lost fan-out from it.
 * One round trip: the statement reads the clock (to the millisecond, as the column keeps it, so
 * the body's timestamp and the row's are one instant) and writes it into the body itself.
 */
export async function insertEvent<T extends EventType>(
  tx: DbOrTx,
  accountId: string,
  type: T,
  data: EventDataByType[T],
): Promise<StoredEvent> {
  const id = newId('evt');
  const { head, tail } = eventBodyAround(type, data);
  const result = await tx
    .raw(
      `INSERT INTO events (id, account_id, type, body, created_at)
       SELECT :id, :accountId, :type, :head || to_char(c.now AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || :tail, c.now
         FROM (SELECT date_trunc('milliseconds', clock_timestamp()) AS now) c
       RETURNING body, created_at`,
      { id, accountId, type, head, tail },
    )
    .options({ name: 'svc_insert_event_v1' });
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
