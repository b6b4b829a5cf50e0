import type { Db } from '../db/knex.js';
import { DeliveryPendingError, NotFoundError, SubscriptionDisabledError } from '../errors.js';
import type { Logger } from '../logger.js';
import { enqueueAfterCommit } from '../queues/enqueue-after-commit.js';
import { enqueueDeliveries, type Queues } from '../queues/queues.js';
import type { DeliverySummary } from './delivery-history.repository.js';
import { insertRedelivery, type RedeliveryInsert, type RedeliveryOwner } from './redelivery-insert.js';

/** What a redelivery needs: the database, the delivery queue, and a logger for a failed enqueue. */
export interface RedeliveryDeps {
  db: Db;
  queues: Pick<Queues, 'deliveries'>;
  logger?: Pick<Logger, 'warn'>;
}

export interface Redelivery {
  delivery: DeliverySummary;
  subscriptionId: string;
}

/** Queues attempt 1 of a committed redelivery; the sweep sends it if Redis is away. */
function queueFirstAttempt(deps: RedeliveryDeps, redelivery: Redelivery): Promise<void> {
  const job = { deliveryId: redelivery.delivery.id, subscriptionId: redelivery.subscriptionId, attempt: 1, delayMs: 0 };
  return enqueueAfterCommit(() => enqueueDeliveries(deps.queues, [job]), deps.logger, 'redelivery enqueue failed; the dispatcher sweep will send it', {
    deliveryId: job.deliveryId,
  });
}

/** Turns a refused insert into its typed error; a created one into the redelivery. */
function settle(outcome: RedeliveryInsert, notFoundMessage: string): Redelivery {
  switch (outcome.kind) {
    case 'created':
      return { delivery: outcome.delivery, subscriptionId: outcome.subscriptionId };
    case 'not-found':
      throw new NotFoundError(notFoundMessage);
    case 'subscription-disabled':
      throw new SubscriptionDisabledError(
        'This webhook subscription was disabled after repeated failures and never resumes; revoke it and create a new one to deliver again.',
      );
    case 'pending':
      throw new DeliveryPendingError(
        `A delivery of this event to this subscription is still pending${outcome.pendingDeliveryId ? ` (${outcome.pendingDeliveryId})` : ''}; redeliver once it is delivered or failed.`,
      );
  }
}

/**
 * Stores a redelivery for one owner (or any, for operators) and queues its first attempt.
 * Package-internal: index.ts exports only the account-scoped entry point below.
 */
export async function redeliver(deps: RedeliveryDeps, deliveryId: string, owner: RedeliveryOwner, notFoundMessage: string): Promise<Redelivery> {
  const redelivery = settle(await insertRedelivery(deps.db, deliveryId, owner), notFoundMessage);
  await queueFirstAttempt(deps, redelivery);
  return redelivery;
}

/**
 * A new delivery of the same event (the same body bytes) to the same subscription, with a new
 * delivery id and its own 7 attempts (issue 10 §2). NotFoundError for another account's
 * subscription, a delivery of another subscription, or unknown ids; SubscriptionDisabledError
 * for an auto-disabled subscription; DeliveryPendingError while any delivery of the event to
 * the subscription — the original or an earlier redelivery — is pending. Nothing is stored
 * when refused.
 */
export async function redeliverSubscriptionDelivery(
  deps: RedeliveryDeps,
  accountId: string,
  subscriptionId: string,
  deliveryId: string,
): Promise<Redelivery> {
  return redeliver(deps, deliveryId, { accountId, subscriptionId }, 'No delivery with this id exists for this webhook subscription.');
}
