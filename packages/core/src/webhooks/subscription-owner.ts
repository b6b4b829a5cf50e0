import type { DbOrTx } from '../db/knex.js';
import { NotFoundError } from '../errors.js';

/**
 * The account a subscription belongs to, for the operator (svc), who names a subscription by its
 * id alone and then calls the same account-scoped functions as the API (rotateSubscriptionSecret,
 * updateSubscription, recoverSubscriptionDeliveries). NotFoundError for an unknown id or a
 * subscription being revoked, which those functions would not find either.
 */
export async function subscriptionAccountId(db: DbOrTx, subscriptionId: string): Promise<string> {
  const row = (await db('webhook_subscriptions').where({ id: subscriptionId }).whereIn('status', ['active', 'disabled']).first('account_id')) as
    | { account_id: string }
    | undefined;
  if (!row) throw new NotFoundError(`subscription ${subscriptionId} does not exist`);
  return row.account_id;
}
