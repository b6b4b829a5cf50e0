/** Operator-side, unscoped figures for the dispatcher's /metrics: never reached by a customer's request. */
import type { DbOrTx } from '../db/knex.js';

/** Deliveries still to be sent or retried, across every account (the partial index deliveries_due_idx covers it). */
export async function countPendingDeliveries(db: DbOrTx): Promise<number> {
  const [row] = await db('deliveries').where({ status: 'pending' }).count<Array<{ n: string | number }>>({ n: '*' });
  return Number(row?.n ?? 0);
}
