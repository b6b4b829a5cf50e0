/** Operator-side, unscoped queries of the dispatcher's sweep: never reached by a customer's request. */
import type { DbOrTx } from '../db/knex.js';

/** Pending deliveries due for a while with no attempt on the wire: their job may be lost. */
export async function findOverdueDeliveries(
  db: DbOrTx,
  overdueForMs: number,
  limit: number,
): Promise<Array<{ deliveryId: string; subscriptionId: string; attempt: number }>> {
  const rows = await db('deliveries')
    .where({ status: 'pending' })
    // statement_timestamp(), not clock_timestamp(): a stable value is the index's condition, so a
    // sweep reads only the due rows; a volatile one is a filter over every pending delivery.
    .where('next_attempt_at', '<=', db.raw('statement_timestamp() - make_interval(secs => ?)', [overdueForMs / 1000]))
    .where((q) => q.whereNull('locked_until').orWhere('locked_until', '<=', db.raw('clock_timestamp()')))
    .orderBy('next_attempt_at')
    .limit(limit)
    .select('id', 'subscription_id', 'attempt_count');
  return rows.map((row: { id: string; subscription_id: string; attempt_count: number }) => ({
    deliveryId: row.id,
    subscriptionId: row.subscription_id,
    attempt: row.attempt_count + 1,
  }));
}

/** Finishes revocations whose API process died between hiding and deleting the subscription. */
export async function purgeAbandonedRevocations(db: DbOrTx, olderThanMs: number): Promise<number> {
  return db('webhook_subscriptions')
    .where({ status: 'deleting' })
    .where('deleting_at', '<', db.raw('clock_timestamp() - make_interval(secs => ?)', [olderThanMs / 1000]))
    .whereNotExists(
      db('deliveries')
        .whereRaw('deliveries.subscription_id = webhook_subscriptions.id')
        .where('locked_until', '>', db.raw('clock_timestamp()')),
    )
    .del();
}
