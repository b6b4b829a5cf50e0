import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../db/knex.js';
import { ATTEMPT_LEASE_MARGIN_MS } from '../deliveries/delivery-limits.js';
import { removeDeliveryJobs, type Queues } from '../queues/queues.js';
import { deleteSubscriptionRows, hasAttemptInFlight, markSubscriptionDeleting } from './subscription.repository.js';

const IN_FLIGHT_POLL_MS = 25;

export interface RevokeDeps {
  db: Db;
  queues: Pick<Queues, 'delivery'>;
  /** How long an attempt may be on the wire (WEBHOOK_TIMEOUT_MS); the wait is bounded by it. */
  webhookTimeoutMs: number;
}

/**
 * Revokes a subscription (spec §3.2): no attempt starts once this begins, an attempt already
 * claimed is waited for (at most as long as its lease can last), then the subscription, its deliveries
 * and their attempts are deleted and the queued retries cancelled. When this returns, nothing
 * more reaches the receiver.
 */
export async function revokeSubscription(deps: RevokeDeps, accountId: string, subscriptionId: string): Promise<void> {
  await markSubscriptionDeleting(deps.db, accountId, subscriptionId);
  const deadline = Date.now() + deps.webhookTimeoutMs + ATTEMPT_LEASE_MARGIN_MS + 1_000;
  while (Date.now() < deadline && (await hasAttemptInFlight(deps.db, accountId, subscriptionId))) {
    await sleep(IN_FLIGHT_POLL_MS);
  }
  const queued = await deleteSubscriptionRows(deps.db, accountId, subscriptionId);
  // Jobs that outlive this (Redis away) find no delivery row and end without sending.
  await removeDeliveryJobs(deps.queues, queued).catch(() => undefined);
}
