import type { DbOrTx } from '../db/knex.js';
import { newId } from '../ids.js';
import { buildEventBody, type EventDataByType, type EventType } from './event-types.js';

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
 */
export async function insertEvent<T extends EventType>(
  tx: DbOrTx,
  accountId: string,
  type: T,
  data: EventDataByType[T],
): Promise<StoredEvent> {
  const id = newId('evt');
  // Milliseconds, as the column keeps them, so the body's timestamp and the row's are one instant.
  const clock = await tx.raw(`SELECT date_trunc('milliseconds', clock_timestamp()) AS now`);
  const createdAt = clock.rows[0].now as Date;
  const body = buildEventBody(type, createdAt, data);
  await tx('events').insert({ id, account_id: accountId, type, body, created_at: createdAt });
  return { id, accountId, type, body, createdAt };
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
