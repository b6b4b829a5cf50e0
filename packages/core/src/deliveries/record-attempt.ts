import type { Db, DbOrTx } from '../db/knex.js';
import { AUTO_DISABLE_THRESHOLD } from '../webhooks/subscription.repository.js';
import type { ClaimedAttempt } from './claim-attempt.js';
import { MAX_ATTEMPTS } from './delivery-limits.js';
import { excerptText } from './response-excerpt.js';

export interface AttemptOutcome {
  startedAt: Date;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
  /** The receiver's first bytes exactly as sent (at most RESPONSE_EXCERPT_BYTES), or null without a response. */
  responseBytes: Buffer | null;
  ok: boolean;
}

export type RecordResult =
  | { kind: 'delivered' }
  | { kind: 'retry'; nextAttempt: number; delayMs: number }
  | { kind: 'failed'; disabledSubscription: boolean; cancelled: Array<{ deliveryId: string; attempt: number }> }
  | { kind: 'stale' };

/**
 * Inserts the attempt row unless the delivery is gone or the attempt is already recorded. The
 * bytes are the record; the text beside them is their display form (response-excerpt.ts), kept
 * so readers of the text column see new rows as they see old ones.
 */
const INSERT_ATTEMPT = `
  INSERT INTO delivery_attempts (delivery_id, n, at, status_code, error, duration_ms, response_excerpt, response_excerpt_bytes)
  SELECT :id, :n, :at, :statusCode, :error, :durationMs, :excerpt, :excerptBytes
   WHERE EXISTS (SELECT 1 FROM deliveries WHERE id = :id)
  ON CONFLICT (delivery_id, n) DO NOTHING`;

/**
 * Every statement that locks both a subscription and one of its deliveries takes the
 * subscription first (as the claim does, FOR SHARE): with one order there is no deadlock when
 * many deliveries of one subscription finish at once (the moment auto-disable exists for).
 */
const LOCK_SUBSCRIPTION = `SELECT id FROM webhook_subscriptions WHERE id = :subscriptionId FOR NO KEY UPDATE`;

/** The delivery is still waiting for exactly this attempt's outcome. */
const STILL_CURRENT = `id = :id AND status = 'pending' AND attempt_count = :n - 1`;

/**
 * Records one attempt and moves the delivery on, atomically: delivered (failureCount back to 0),
 * a retry due after the configured delay, or permanently failed (failureCount + 1, and at the
 * threshold the subscription is disabled and its queued deliveries failed unsent). The two
 * common outcomes are one statement each, so one round trip.
 */
export async function recordAttempt(
  db: Db,
  claimed: Pick<ClaimedAttempt, 'deliveryId' | 'subscriptionId' | 'attempt'>,
  outcome: AttemptOutcome,
  retryDelaysMs: readonly number[],
): Promise<RecordResult> {
  const { deliveryId, subscriptionId, attempt } = claimed;
  const params = {
    id: deliveryId,
    subscriptionId,
    n: attempt,
    at: outcome.startedAt,
    statusCode: outcome.statusCode,
    // An error text may quote what a peer sent; `text` cannot hold a NUL, and a record that
    // cannot be written would leave the attempt to be sent again.
    error: outcome.error === null ? null : outcome.error.replace(/\u0000/g, '\uFFFD'),
    durationMs: Math.round(outcome.durationMs),
    excerpt: outcome.responseBytes === null ? null : excerptText(outcome.responseBytes),
    excerptBytes: outcome.responseBytes,
  };

  if (outcome.ok) {
    const result = await db.raw(
      `WITH locked_sub AS (${LOCK_SUBSCRIPTION}
       ), moved AS (
         UPDATE deliveries SET status = 'delivered', attempt_count = :n, locked_until = NULL,
                next_attempt_at = NULL, finished_at = clock_timestamp()
          WHERE ${STILL_CURRENT} AND EXISTS (SELECT 1 FROM locked_sub)
         RETURNING subscription_id
       ), attempt AS (${INSERT_ATTEMPT}
       ), sub AS (
         UPDATE webhook_subscriptions s SET last_delivery_at = clock_timestamp(), failure_count = 0
           FROM moved WHERE s.id = moved.subscription_id AND s.status = 'active'
       )
       SELECT count(*)::int AS moved FROM moved`,
      params,
    ).options({ name: 'svc_record_delivered_v3' });
    return result.rows[0].moved === 1 ? { kind: 'delivered' } : { kind: 'stale' };
  }

  if (attempt < MAX_ATTEMPTS) {
    const delayMs = retryDelaysMs[attempt - 1] ?? 0;
    const result = await db.raw(
      `WITH moved AS (
         UPDATE deliveries SET attempt_count = :n, locked_until = NULL, claims = 0,
                next_attempt_at = clock_timestamp() + make_interval(secs => :delaySecs)
          WHERE ${STILL_CURRENT}
         RETURNING id
       ), attempt AS (${INSERT_ATTEMPT})
       SELECT count(*)::int AS moved FROM moved`,
      { ...params, delaySecs: delayMs / 1000 },
    ).options({ name: 'svc_record_retry_v2' });
    return result.rows[0].moved === 1 ? { kind: 'retry', nextAttempt: attempt + 1, delayMs } : { kind: 'stale' };
  }

  return db.transaction(async (tx) => {
    await tx.raw(LOCK_SUBSCRIPTION, params);
    await tx.raw(INSERT_ATTEMPT, params);
    const moved = await tx.raw(
      `UPDATE deliveries SET status = 'failed', attempt_count = :n, locked_until = NULL, next_attempt_at = NULL,
              finished_at = clock_timestamp(), failure_reason = 'attempts exhausted'
        WHERE ${STILL_CURRENT}
       RETURNING id`,
      params,
    );
    if (moved.rows.length === 0) return { kind: 'stale' } as const;
    return { kind: 'failed', ...(await countPermanentFailure(tx, subscriptionId)) } as const;
  });
}

async function countPermanentFailure(
  tx: DbOrTx,
  subscriptionId: string,
): Promise<{ disabledSubscription: boolean; cancelled: Array<{ deliveryId: string; attempt: number }> }> {
  const [sub] = await tx('webhook_subscriptions')
    .where({ id: subscriptionId })
    .update({ failure_count: tx.raw('failure_count + 1') })
    .returning(['failure_count', 'status']);
  if (!sub || sub.status !== 'active' || sub.failure_count < AUTO_DISABLE_THRESHOLD) {
    return { disabledSubscription: false, cancelled: [] };
  }
  await tx('webhook_subscriptions').where({ id: subscriptionId }).update({ status: 'disabled', disabled_at: tx.fn.now(3) });
  // A delivery whose attempt is on the wire right now is left to that attempt's outcome: the
  // receiver may be getting it, and a 2xx must be recorded as delivered, not beside a `failed`.
  // Its next claim (if it needs one) finds the subscription disabled and fails it unsent.
  const cancelled = await tx('deliveries')
    .where({ subscription_id: subscriptionId, status: 'pending' })
    .where((q) => q.whereNull('locked_until').orWhere('locked_until', '<=', tx.raw('clock_timestamp()')))
    .update({ status: 'failed', finished_at: tx.fn.now(3), next_attempt_at: null, failure_reason: 'subscription disabled' })
    .returning(['id', 'attempt_count']);
  return {
    disabledSubscription: true,
    cancelled: cancelled.map((row: { id: string; attempt_count: number }) => ({
      deliveryId: row.id,
      attempt: row.attempt_count + 1,
    })),
  };
}

/** Fails a queued delivery of a disabled subscription without sending it (spec §3.2). */
export async function failDeliveryOfDisabledSubscription(db: DbOrTx, deliveryId: string): Promise<void> {
  await db('deliveries')
    .where({ id: deliveryId, status: 'pending' })
    // Not while an attempt is on the wire (a duplicate job can run meanwhile): that attempt's outcome decides.
    .where((q) => q.whereNull('locked_until').orWhere('locked_until', '<=', db.raw('clock_timestamp()')))
    .update({ status: 'failed', finished_at: db.fn.now(3), next_attempt_at: null, failure_reason: 'subscription disabled' });
}
