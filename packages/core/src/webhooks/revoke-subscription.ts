import { setTimeout as sleep } from 'node:timers/promises';
import { MAX_WEBHOOK_TIMEOUT_MS } from '../config.js';
import type { Db } from '../db/knex.js';
import { ATTEMPT_LEASE_MARGIN_MS } from '../deliveries/delivery-limits.js';
import { removeDeliveryJobs, type Queues } from '../queues/queues.js';
import { deleteSubscriptionRows, hasAttemptInFlight, markSubscriptionDeleting } from './subscription.repository.js';

const FIRST_POLL_MS = 25;
const MAX_POLL_MS = 250;
/**
 * The longest lease any dispatcher can have recorded (its own WEBHOOK_TIMEOUT_MS at most the
 * configurable maximum, plus the margin), and a second for clocks: a lease recorded past this is
 * not believed.
 */
export const MAX_IN_FLIGHT_WAIT_MS = MAX_WEBHOOK_TIMEOUT_MS + ATTEMPT_LEASE_MARGIN_MS + 1_000;

export interface RevokeDeps {
  db: Db;
  queues: Pick<Queues, 'deliveries'>;
}

/**
 * Revokes a subscription (spec §3.2): no attempt starts once this begins, an attempt already
 * claimed is waited for until the lease its dispatcher recorded (deliveries.locked_until, on
 * Postgres's clock) has passed — whatever this process's own timeout setting, bounded by
 * MAX_IN_FLIGHT_WAIT_MS — then the subscription, its deliveries and their attempts are deleted
 * and the queued retries cancelled. When this returns, nothing more reaches the receiver. A
 * revocation that failed half-way (the subscription hidden as 'deleting') is finished by the
 * next call, which succeeds like the first would have.
 */
export async function revokeSubscription(deps: RevokeDeps, accountId: string, subscriptionId: string): Promise<void> {
  await markSubscriptionDeleting(deps.db, accountId, subscriptionId);
  const deadline = Date.now() + MAX_IN_FLIGHT_WAIT_MS;
  let pollMs = FIRST_POLL_MS;
  while (Date.now() < deadline && (await hasAttemptInFlight(deps.db, accountId, subscriptionId))) {
    await sleep(pollMs);
    pollMs = Math.min(MAX_POLL_MS, pollMs * 2);
  }
  const queued = await deleteSubscriptionRows(deps.db, accountId, subscriptionId);
  // Jobs that outlive this (Redis away) find no delivery row and end without sending.
  await removeDeliveryJobs(deps.queues, subscriptionId, queued).catch(() => undefined);
}
