import { NotFoundError, RecoveryTooLargeError, SubscriptionDisabledError } from '../errors.js';
import { enqueueAfterCommit } from '../queues/enqueue-after-commit.js';
import { enqueueDeliveries } from '../queues/queues.js';
import type { RedeliveryDeps } from './redeliver.js';

/** A recovery sends at most this many deliveries; a wider window is refused with its count. */
export const RECOVERY_MAX = 10_000;
/** Jobs are queued in pages of this many after the commit (one bulk add each). */
const ENQUEUE_PAGE = 1_000;

export interface RecoveryWindow {
  /** Deliveries that failed at or after this time… */
  since: Date;
  /** …and before this one. */
  until: Date;
  /** Count only: nothing is stored or sent. */
  dryRun: boolean;
}

export interface Recovery {
  /** The deliveries sent again (or, for a dry run, that would be). */
  count: number;
  since: Date;
  until: Date;
}

/**
 * After a customer's outage: every delivery of one subscription that failed for good (all 7
 * attempts) within [since, until) is sent again as a new delivery — `redeliveryOf` the failed one,
 * the same body bytes, its own 7 attempts — oldest failure first. An event of which a delivery to
 * this subscription is pending or was delivered (an earlier redelivery, say) is not sent again;
 * an event that failed several times is sent once, as a redelivery of its latest failure. At most
 * RECOVERY_MAX per call, else RecoveryTooLargeError with the count and nothing stored. A dry run
 * answers the count and stores nothing. Their first attempts are queued as background jobs, which
 * BullMQ takes only when no other job is waiting, so the events arriving meanwhile, of any account,
 * never queue behind a recovery; and the per-subscription and per-account limits (fair slots) keep
 * its attempts to its account's share. NotFoundError for another account's subscription or an unknown id;
 * SubscriptionDisabledError for an auto-disabled one, which never resumes.
 */
export async function recoverSubscriptionDeliveries(
  deps: RedeliveryDeps,
  accountId: string,
  subscriptionId: string,
  window: RecoveryWindow,
): Promise<Recovery> {
  const created = await deps.db.transaction(async (tx) => {
    // FOR SHARE, as a redelivery takes it: a revocation or an auto-disable at the same moment
    // either sees these deliveries or is seen here.
    const sub = (await tx('webhook_subscriptions')
      .where({ id: subscriptionId, account_id: accountId })
      .whereIn('status', ['active', 'disabled'])
      .forShare()
      .first('status')) as { status: string } | undefined;
    if (!sub) throw new NotFoundError('No webhook subscription with this id exists in your account.');
    if (sub.status === 'disabled') {
      throw new SubscriptionDisabledError('This webhook subscription was disabled after repeated failures and never resumes; create a new one to deliver again.');
    }
    // The candidates, oldest failure first: the latest failure of each event in the window (one
    // range of deliveries_subscription_failed_idx), unless the event is pending or delivered again.
    const { rows: eligible } = (await tx.raw(
      `SELECT f.id, f.event_id FROM (
         SELECT DISTINCT ON (d.event_id) d.id, d.event_id, d.finished_at
           FROM deliveries d
          WHERE d.subscription_id = :subscriptionId AND d.status = 'failed'
            AND d.finished_at >= :since AND d.finished_at < :until
          ORDER BY d.event_id, d.finished_at DESC, d.id DESC
       ) f
        WHERE NOT EXISTS (SELECT 1 FROM deliveries o
                           WHERE o.event_id = f.event_id AND o.subscription_id = :subscriptionId AND o.status IN ('pending', 'delivered'))
        ORDER BY f.finished_at, f.id
        LIMIT :limit`,
      { subscriptionId, since: window.since, until: window.until, limit: RECOVERY_MAX + 1 },
    )) as { rows: Array<{ id: string; event_id: string }> };
    if (eligible.length > RECOVERY_MAX) {
      const { n } = (await tx.raw(
        `SELECT count(DISTINCT d.event_id)::int AS n FROM deliveries d
          WHERE d.subscription_id = :subscriptionId AND d.status = 'failed' AND d.finished_at >= :since AND d.finished_at < :until
            AND NOT EXISTS (SELECT 1 FROM deliveries o WHERE o.event_id = d.event_id AND o.subscription_id = :subscriptionId AND o.status IN ('pending', 'delivered'))`,
        { subscriptionId, since: window.since, until: window.until },
      )).rows[0] as { n: number };
      throw new RecoveryTooLargeError(n, RECOVERY_MAX);
    }
    if (window.dryRun || eligible.length === 0) return eligible.map(() => null);
    // Each new delivery in the candidates' order, from arrays (no join for the planner to misjudge
    // on statistics from before the outage). The failed rows are held FOR KEY SHARE until commit, so
    // the retention purge cannot delete one under its redelivery; one gone meanwhile is skipped.
    const { rows: created } = (await tx.raw(
      `WITH wanted AS (
         SELECT w.id, w.event_id, w.ord FROM unnest(:ids::text[], :eventIds::text[]) WITH ORDINALITY AS w(id, event_id, ord)
       ), held AS (
         SELECT d.id FROM deliveries d WHERE d.id = ANY (:ids::text[]) AND d.status = 'failed' FOR KEY SHARE
       )
       INSERT INTO deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at, redelivery_of)
       SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), wanted.event_id, :subscriptionId, 'pending', 0, clock_timestamp(), wanted.id
         FROM wanted WHERE wanted.id IN (SELECT id FROM held)
          -- Again here: a concurrent redelivery may have been made, or delivered, since the read.
          AND NOT EXISTS (SELECT 1 FROM deliveries o WHERE o.event_id = wanted.event_id AND o.subscription_id = :subscriptionId AND o.status IN ('pending', 'delivered'))
        ORDER BY wanted.ord
       ON CONFLICT DO NOTHING
       RETURNING id, redelivery_of`,
      { ids: eligible.map((row) => row.id), eventIds: eligible.map((row) => row.event_id), subscriptionId },
    )) as { rows: Array<{ id: string; redelivery_of: string }> };
    const byOriginal = new Map(created.map((row) => [row.redelivery_of, row.id]));
    return eligible.map((row) => byOriginal.get(row.id) ?? null);
  });
  const sent = created.filter((id): id is string => id !== null);
  for (let i = 0; i < sent.length; i += ENQUEUE_PAGE) {
    const jobs = sent.slice(i, i + ENQUEUE_PAGE).map((deliveryId) => ({ deliveryId, subscriptionId, attempt: 1, delayMs: 0 }));
    await enqueueAfterCommit(() => enqueueDeliveries(deps.queues, jobs, { background: true }), deps.logger, 'recovery enqueue failed; the dispatcher sweep will send these deliveries', {
      subscriptionId,
      deliveries: jobs.length,
    });
  }
  return { count: window.dryRun ? created.length : sent.length, since: window.since, until: window.until };
}
