import type { Db, DbOrTx } from '../db/knex.js';
import { AUTO_DISABLE_THRESHOLD } from '../webhooks/subscription.repository.js';

/** Spec §3.3, §8: attempts per delivery. */
export const MAX_ATTEMPTS = 7;

/** An attempt's lease is the delivery timeout plus this: time to record the outcome after the POST. */
export const ATTEMPT_LEASE_MARGIN_MS = 5_000;

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

/** What the sender needs for one claimed attempt. The secret stays in memory, never in job data. */
export interface ClaimedAttempt {
  deliveryId: string;
  subscriptionId: string;
  eventId: string;
  eventType: string;
  body: string;
  url: string;
  secret: string;
  attempt: number;
}

/** Why an attempt was not claimed, so the processor can do the one right thing. */
export type ClaimRefusal =
  | { reason: 'gone' }
  | { reason: 'finished' }
  | { reason: 'already-attempted' }
  | { reason: 'subscription-disabled' }
  | { reason: 'subscription-deleting' }
  | { reason: 'not-due'; retryInMs: number }
  | { reason: 'in-flight-elsewhere'; retryInMs: number };

export type ClaimResult = { claimed: true; attempt: ClaimedAttempt } | { claimed: false; refusal: ClaimRefusal };

/**
 * Takes the lease of one attempt: only when the delivery is pending, this attempt is the next,
 * it is due, no other dispatcher holds it and the subscription is active. The subscription row
 * is read FOR SHARE so a concurrent revocation either waits for this lease or is seen here.
 */
export async function claimAttempt(db: Db, deliveryId: string, attempt: number, leaseMs: number): Promise<ClaimResult> {
  const result = await db.raw(
    `WITH sub AS (
       SELECT s.id, s.status, s.url, s.secret FROM webhook_subscriptions s
        WHERE s.id = (SELECT subscription_id FROM deliveries WHERE id = :id)
        FOR SHARE
     ), claimed AS (
       UPDATE deliveries d SET locked_until = clock_timestamp() + make_interval(secs => :leaseSecs)
         FROM sub
        WHERE d.id = :id AND d.status = 'pending' AND d.attempt_count = :previous AND sub.status = 'active'
          AND (d.locked_until IS NULL OR d.locked_until <= clock_timestamp())
          AND d.next_attempt_at <= clock_timestamp()
       RETURNING d.id
     )
     SELECT d.id, d.subscription_id, d.event_id, d.status, d.attempt_count,
            GREATEST(0, EXTRACT(EPOCH FROM (d.next_attempt_at - clock_timestamp())) * 1000)::float8 AS due_in_ms,
            GREATEST(0, EXTRACT(EPOCH FROM (d.locked_until - clock_timestamp())) * 1000)::float8 AS locked_for_ms,
            sub.status AS sub_status, sub.url, sub.secret, e.type, e.body,
            (SELECT count(*) FROM claimed)::int AS claimed
       FROM deliveries d
       JOIN events e ON e.id = d.event_id
       LEFT JOIN sub ON sub.id = d.subscription_id
      WHERE d.id = :id`,
    { id: deliveryId, previous: attempt - 1, leaseSecs: leaseMs / 1000 },
  ).options({ name: 'svc_claim_attempt' });
  const row = result.rows[0];
  if (!row) return { claimed: false, refusal: { reason: 'gone' } };
  if (row.claimed === 1) {
    return {
      claimed: true,
      attempt: {
        deliveryId: row.id,
        subscriptionId: row.subscription_id,
        eventId: row.event_id,
        eventType: row.type,
        body: row.body,
        url: row.url,
        secret: row.secret,
        attempt,
      },
    };
  }
  if (row.status !== 'pending') return { claimed: false, refusal: { reason: 'finished' } };
  if (row.attempt_count >= attempt) return { claimed: false, refusal: { reason: 'already-attempted' } };
  if (row.sub_status === 'disabled') return { claimed: false, refusal: { reason: 'subscription-disabled' } };
  if (row.sub_status !== 'active') return { claimed: false, refusal: { reason: 'subscription-deleting' } };
  if (row.attempt_count < attempt - 1) return { claimed: false, refusal: { reason: 'already-attempted' } };
  if (row.locked_for_ms > 0) return { claimed: false, refusal: { reason: 'in-flight-elsewhere', retryInMs: row.locked_for_ms } };
  return { claimed: false, refusal: { reason: 'not-due', retryInMs: Math.max(1, row.due_in_ms) } };
}

export interface AttemptOutcome {
  startedAt: Date;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
  responseExcerpt: string | null;
  ok: boolean;
}

export type RecordResult =
  | { kind: 'delivered' }
  | { kind: 'retry'; nextAttempt: number; delayMs: number }
  | { kind: 'failed'; disabledSubscription: boolean; cancelled: Array<{ deliveryId: string; attempt: number }> }
  | { kind: 'stale' };

/** Inserts the attempt row unless the delivery is gone or the attempt is already recorded. */
const INSERT_ATTEMPT = `
  INSERT INTO delivery_attempts (delivery_id, n, at, status_code, error, duration_ms, response_excerpt)
  SELECT :id, :n, :at, :statusCode, :error, :durationMs, :excerpt
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
    error: outcome.error,
    durationMs: Math.round(outcome.durationMs),
    excerpt: outcome.responseExcerpt,
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
    ).options({ name: 'svc_record_delivered_v2' });
    return result.rows[0].moved === 1 ? { kind: 'delivered' } : { kind: 'stale' };
  }

  if (attempt < MAX_ATTEMPTS) {
    const delayMs = retryDelaysMs[attempt - 1] ?? 0;
    const result = await db.raw(
      `WITH moved AS (
         UPDATE deliveries SET attempt_count = :n, locked_until = NULL,
                next_attempt_at = clock_timestamp() + make_interval(secs => :delaySecs)
          WHERE ${STILL_CURRENT}
         RETURNING id
       ), attempt AS (${INSERT_ATTEMPT})
       SELECT count(*)::int AS moved FROM moved`,
      { ...params, delaySecs: delayMs / 1000 },
    ).options({ name: 'svc_record_retry' });
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
  const cancelled = await tx('deliveries')
    .where({ subscription_id: subscriptionId, status: 'pending' })
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
    .update({ status: 'failed', finished_at: db.fn.now(3), next_attempt_at: null, failure_reason: 'subscription disabled' });
}

/**
 * Fan-out (idempotent, one statement): one delivery per active subscription of the event's
 * account whose events hold its type or `*`, and the first attempts still to be made — those
 * created now and any a previous run created but did not get to queue.
 */
export async function fanOutEvent(
  db: Db,
  eventId: string,
): Promise<{ firstAttempts: Array<{ deliveryId: string; subscriptionId: string }> }> {
  const result = await db.raw(
    `WITH event AS (
       UPDATE events SET fanned_out_at = COALESCE(fanned_out_at, clock_timestamp())
        WHERE id = :eventId
       RETURNING id, account_id, type
     ), created AS (
       INSERT INTO deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at)
       SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), event.id, s.id, 'pending', 0, clock_timestamp()
         FROM event JOIN webhook_subscriptions s ON s.account_id = event.account_id
        WHERE s.status = 'active' AND (s.events @> ARRAY[event.type] OR s.events @> ARRAY['*'])
       ON CONFLICT (event_id, subscription_id) DO NOTHING
       RETURNING id, subscription_id
     )
     SELECT id, subscription_id FROM created
     UNION ALL
     SELECT id, subscription_id FROM deliveries WHERE event_id = :eventId AND status = 'pending' AND attempt_count = 0`,
    { eventId },
  ).options({ name: 'svc_fan_out_event' });
  return {
    firstAttempts: result.rows.map((row: { id: string; subscription_id: string }) => ({
      deliveryId: row.id,
      subscriptionId: row.subscription_id,
    })),
  };
}

/** Pending deliveries due for a while with no attempt on the wire: their job may be lost. */
export async function findOverdueDeliveries(
  db: DbOrTx,
  overdueForMs: number,
  limit: number,
): Promise<Array<{ deliveryId: string; subscriptionId: string; attempt: number }>> {
  const rows = await db('deliveries')
    .where({ status: 'pending' })
    .where('next_attempt_at', '<=', db.raw('clock_timestamp() - make_interval(secs => ?)', [overdueForMs / 1000]))
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

export interface DeliveryLogEntry {
  id: string;
  eventId: string;
  event: string;
  status: DeliveryStatus;
  createdAt: Date;
  nextAttemptAt: Date | null;
  failureReason: string | null;
  attempts: Array<{ n: number; at: Date; statusCode: number | null; error: string | null; durationMs: number; responseExcerpt: string | null }>;
}

/** The delivery log of one subscription, newest first, with every attempt (operators only). */
export async function listDeliveries(db: DbOrTx, subscriptionId: string, limit = 100): Promise<DeliveryLogEntry[]> {
  const deliveries = await db('deliveries as d')
    .join('events as e', 'e.id', 'd.event_id')
    .where('d.subscription_id', subscriptionId)
    .orderBy([
      { column: 'd.created_at', order: 'desc' },
      { column: 'd.id', order: 'desc' },
    ])
    .limit(limit)
    .select('d.id', 'd.event_id', 'e.type', 'd.status', 'd.created_at', 'd.next_attempt_at', 'd.failure_reason');
  const ids = deliveries.map((row: { id: string }) => row.id);
  const attempts = ids.length
    ? await db('delivery_attempts').whereIn('delivery_id', ids).orderBy(['delivery_id', 'n']).select('*')
    : [];
  return deliveries.map((row) => ({
    id: row.id,
    eventId: row.event_id,
    event: row.type,
    status: row.status,
    createdAt: row.created_at,
    nextAttemptAt: row.next_attempt_at,
    failureReason: row.failure_reason,
    attempts: attempts
      .filter((a: { delivery_id: string }) => a.delivery_id === row.id)
      .map((a) => ({
        n: a.n,
        at: a.at,
        statusCode: a.status_code,
        error: a.error,
        durationMs: a.duration_ms,
        responseExcerpt: a.response_excerpt,
      })),
  }));
}
