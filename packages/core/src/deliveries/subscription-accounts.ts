/** Dispatcher-side, unscoped: which account owns each subscription (a subscription never changes account). */
import type { DbOrTx } from '../db/knex.js';

/** The owning account of each subscription that still exists, by subscription id. */
export async function findSubscriptionAccounts(db: DbOrTx, subscriptionIds: readonly string[]): Promise<Map<string, string>> {
  if (subscriptionIds.length === 0) return new Map();
  const rows = await db('webhook_subscriptions')
    .whereIn('id', [...new Set(subscriptionIds)])
    .select<Array<{ id: string; account_id: string }>>('id', 'account_id');
  return new Map(rows.map((row) => [row.id, row.account_id]));
}
