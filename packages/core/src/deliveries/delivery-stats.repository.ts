/** Operator-side, unscoped figures for the dispatcher's /metrics: never reached by a customer's request. */
import type { DbOrTx } from '../db/knex.js';

/** Deliveries still to be sent or retried, across every account (the partial index deliveries_due_idx covers it). */
export async function countPendingDeliveries(db: DbOrTx): Promise<number> {
  const [row] = await db('deliveries').where({ status: 'pending' }).count<Array<{ n: string | number }>>({ n: '*' });
  return Number(row?.n ?? 0);
}

/**
 * How long the delivery that has waited longest past its due time (`next_attempt_at`), with no
 * attempt on the wire, has been due, in seconds; 0 when none is due. One probe of
 * deliveries_due_idx from its oldest entry: the due time is compared with `statement_timestamp()`
 * (stable, so an index condition; `clock_timestamp()` would be a filter, and with nothing due the
 * scan would read every pending delivery), and only attempts in flight are skipped on the way.
 */
export async function oldestDueDeliveryAgeSeconds(db: DbOrTx): Promise<number> {
  const result = await db.raw(
    `SELECT extract(epoch FROM statement_timestamp() - next_attempt_at)::float8 AS age
       FROM deliveries
      WHERE status = 'pending'
        AND next_attempt_at <= statement_timestamp()
        AND (locked_until IS NULL OR locked_until <= statement_timestamp())
      ORDER BY next_attempt_at
      LIMIT 1`,
  );
  const [row] = result.rows as Array<{ age: number | string }>;
  return Math.max(0, Number(row?.age ?? 0));
}
