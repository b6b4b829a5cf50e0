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

/** The attempt row's columns, from an outcome. */
function attemptColumns(outcome: AttemptOutcome) {
  return {
    at: outcome.startedAt,
    statusCode: outcome.statusCode,
    // An error text may quote what a peer sent; `text` cannot hold a NUL, and a record that
    // cannot be written would leave the attempt to be sent again.
    error: outcome.error === null ? null : outcome.error.replace(/\u0000/g, '\uFFFD'),
    durationMs: Math.round(outcome.durationMs),
    excerpt: outcome.responseBytes === null ? null : excerptText(outcome.responseBytes),
    excerptBytes: outcome.responseBytes,
  };
}

/** One finished attempt to record. */
export interface FinishedAttempt {
  attempt: Pick<ClaimedAttempt, 'deliveryId' | 'subscriptionId' | 'attempt'>;
  outcome: AttemptOutcome;
}

/** The last attempt failed: the delivery fails for good, and its subscription's failureCount goes up. */
function isFinalFailure({ attempt, outcome }: FinishedAttempt): boolean {
  return !outcome.ok && attempt.attempt >= MAX_ATTEMPTS;
}

/**
 * Records the attempts that finished together, from any accounts, and moves each delivery still
 * waiting for that outcome on: delivered (its subscription's failureCount back to 0), a retry due
 * after the configured delay, or, after the last attempt, failed for good (failureCount + 1; at
 * the threshold the subscription is disabled and its queued deliveries failed unsent). An attempt
 * that failed after its subscription was auto-disabled fails the delivery `subscription disabled`
 * at once (spec §3.2). Idempotent: an attempt already recorded, or a delivery gone, answers `stale`.
 *
 * Locks: the subscriptions whose failureCount goes up first, in id order (waiting: a count is never
 * lost); then the delivery rows in id order; a delivered attempt's subscription is reset only if no
 * other transaction holds its row (SKIP LOCKED: a revocation, an auto-disable, or another record
 * resetting it), so a batch never waits for another account's revocation. No two items may name
 * the same delivery. Without a last attempt's failure it is one statement and one commit.
 */
export async function recordAttempts(db: Db, finished: readonly FinishedAttempt[], retryDelaysMs: readonly number[]): Promise<RecordResult[]> {
  if (finished.length === 0) return [];
  const counted = [...new Set(finished.filter(isFinalFailure).map((f) => f.attempt.subscriptionId))].sort();
  if (counted.length === 0) return recordIn(db, finished, retryDelaysMs, []);
  return db.transaction(async (tx) => {
    await tx.raw('SELECT id FROM webhook_subscriptions WHERE id = ANY(?::text[]) ORDER BY id FOR NO KEY UPDATE', [counted]);
    return recordIn(tx, finished, retryDelaysMs, counted);
  });
}

async function recordIn(db: DbOrTx, finished: readonly FinishedAttempt[], retryDelaysMs: readonly number[], counted: readonly string[]): Promise<RecordResult[]> {
  const columns = finished.map(({ outcome }) => attemptColumns(outcome));
  const delaysMs = finished.map(({ attempt, outcome }) => (outcome.ok ? 0 : (retryDelaysMs[attempt.attempt - 1] ?? 0)));
  const deliveredSubscriptions = [...new Set(finished.filter((f) => f.outcome.ok).map((f) => f.attempt.subscriptionId))];
  // One statement, one round trip. `locked` takes the delivered ones' subscriptions FOR NO KEY
  // UPDATE SKIP LOCKED (no wait), then (`gate`) `held` locks the delivery rows in id order.
  // `d.status = (SELECT 'pending'::text)`: see claimAttempts — a constant lets the generic plan
  // scan every pending delivery through deliveries_due_idx (67 ms per batch at 9,000 pending).
  const result = await db
    .raw(
      `WITH o AS (
         SELECT * FROM unnest(:ids::text[], :ns::int[], :ats::timestamptz[], :codes::int[], :errors::text[], :durations::int[],
                              :excerpts::text[], :bytes::bytea[], :oks::bool[], :finals::bool[], :delaySecs::float8[])
                  AS o(id, n, at, status_code, error, duration_ms, excerpt, excerpt_bytes, ok, final, delay_secs)
       ), locked AS (
         SELECT id FROM webhook_subscriptions WHERE id = ANY(:deliveredSubscriptions::text[]) ORDER BY id FOR NO KEY UPDATE SKIP LOCKED
       ), gate AS (
         SELECT count(*) AS locked FROM locked
       ), held AS (
         SELECT d.id FROM deliveries d, gate WHERE d.id = ANY(:ids::text[]) ORDER BY d.id FOR NO KEY UPDATE OF d
       ), moved AS (
         -- A failed attempt of a subscription auto-disabled while it was on the wire is not
         -- retried: the delivery fails unsent at once (spec §3.2), as the disable did to the rest.
         UPDATE deliveries d
            SET status = CASE WHEN o.ok THEN 'delivered' WHEN s.status = 'disabled' OR o.final THEN 'failed' ELSE d.status END,
                attempt_count = o.n, locked_until = NULL,
                claims = CASE WHEN o.ok THEN d.claims ELSE 0 END,
                next_attempt_at = CASE WHEN o.ok OR s.status = 'disabled' OR o.final THEN NULL
                                       ELSE clock_timestamp() + make_interval(secs => o.delay_secs) END,
                finished_at = CASE WHEN o.ok OR s.status = 'disabled' OR o.final THEN clock_timestamp() ELSE d.finished_at END,
                failure_reason = CASE WHEN o.ok THEN d.failure_reason WHEN s.status = 'disabled' THEN 'subscription disabled'
                                      WHEN o.final THEN 'attempts exhausted' ELSE d.failure_reason END
           FROM o, held, webhook_subscriptions s
          WHERE d.id = o.id AND held.id = d.id AND s.id = d.subscription_id AND d.status = (SELECT 'pending'::text) AND d.attempt_count = o.n - 1
         RETURNING d.id, d.subscription_id, o.ok, (NOT o.ok AND s.status = 'disabled') AS disabled_unsent,
                   (o.final AND s.status <> 'disabled') AS exhausted
       ), attempt AS (
         INSERT INTO delivery_attempts (delivery_id, n, at, status_code, error, duration_ms, response_excerpt, response_excerpt_bytes)
         SELECT o.id, o.n, o.at, o.status_code, o.error, o.duration_ms, o.excerpt, o.excerpt_bytes
           FROM o WHERE EXISTS (SELECT 1 FROM deliveries WHERE id = o.id)
         ON CONFLICT (delivery_id, n) DO NOTHING
       ), sub AS (
         UPDATE webhook_subscriptions s SET last_delivery_at = clock_timestamp(), failure_count = 0
          WHERE s.id IN (SELECT subscription_id FROM moved WHERE ok) AND s.id IN (SELECT id FROM locked) AND s.status = 'active'
       )
       SELECT id, subscription_id, disabled_unsent, exhausted FROM moved`,
      {
        ids: finished.map((f) => f.attempt.deliveryId),
        ns: finished.map((f) => f.attempt.attempt),
        ats: columns.map((c) => c.at),
        codes: columns.map((c) => c.statusCode),
        errors: columns.map((c) => c.error),
        durations: columns.map((c) => c.durationMs),
        excerpts: columns.map((c) => c.excerpt),
        bytes: columns.map((c) => c.excerptBytes),
        oks: finished.map((f) => f.outcome.ok),
        finals: finished.map(isFinalFailure),
        delaySecs: delaysMs.map((ms) => ms / 1000),
        deliveredSubscriptions,
      },
    )
    .options({ name: 'svc_record_attempts_v6' });
  const moved = new Map((result.rows as MovedRow[]).map((row) => [row.id, row]));
  // Each counted subscription's failures of this batch, once; the first of them carries the disable.
  const disables = new Map<string, Awaited<ReturnType<typeof countPermanentFailures>>>();
  for (const subscriptionId of counted) {
    const failures = (result.rows as MovedRow[]).filter((row) => row.exhausted && row.subscription_id === subscriptionId).length;
    if (failures > 0) disables.set(subscriptionId, await countPermanentFailures(db, subscriptionId, failures));
  }
  return finished.map(({ attempt, outcome }, i): RecordResult => {
    const row = moved.get(attempt.deliveryId);
    if (!row) return { kind: 'stale' };
    if (row.disabled_unsent) return { kind: 'failed', disabledSubscription: false, cancelled: [] };
    if (row.exhausted) {
      const disabled = disables.get(attempt.subscriptionId);
      disables.delete(attempt.subscriptionId);
      return { kind: 'failed', ...(disabled ?? { disabledSubscription: false, cancelled: [] }) };
    }
    return outcome.ok ? { kind: 'delivered' } : { kind: 'retry', nextAttempt: attempt.attempt + 1, delayMs: delaysMs[i] as number };
  });
}

/** One delivery the record statement moved on. */
interface MovedRow {
  id: string;
  subscription_id: string;
  /** Its attempt failed after its subscription was auto-disabled: failed unsent, not retried. */
  disabled_unsent: boolean;
  /** Its last attempt failed (the subscription not disabled): failed for good, counted in failureCount if still active. */
  exhausted: boolean;
}

async function countPermanentFailures(
  tx: DbOrTx,
  subscriptionId: string,
  failures: number,
): Promise<{ disabledSubscription: boolean; cancelled: Array<{ deliveryId: string; attempt: number }> }> {
  // Only an active subscription counts: one auto-disabled while this last attempt was on the wire
  // keeps the failureCount that disabled it (spec §3.2, "failureCount intact").
  const [sub] = await tx('webhook_subscriptions')
    .where({ id: subscriptionId, status: 'active' })
    .update({ failure_count: tx.raw('failure_count + ?', [failures]) })
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
