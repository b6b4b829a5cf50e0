import type { Db } from '../db/knex.js';
import { MAX_CLAIMS_PER_ATTEMPT, unrecordedAttemptReason } from './delivery-limits.js';

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
  /** How long after its due time (next_attempt_at) the attempt was claimed: the lateness metric. */
  lateMs: number;
}

/** Why an attempt was not claimed, so the processor can do the one right thing. */
export type ClaimRefusal =
  | { reason: 'gone' }
  | { reason: 'finished' }
  | { reason: 'already-attempted' }
  | { reason: 'subscription-disabled' }
  | { reason: 'subscription-deleting' }
  /** The attempt was claimed MAX_CLAIMS_PER_ATTEMPT times without an outcome: this claim failed the delivery. */
  | { reason: 'claim-limit'; failureReason: string }
  | { reason: 'not-due'; retryInMs: number }
  | { reason: 'in-flight-elsewhere'; retryInMs: number };

export type ClaimResult = { claimed: true; attempt: ClaimedAttempt } | { claimed: false; refusal: ClaimRefusal };

/**
 * Takes the lease of one attempt: only when the delivery is pending, this attempt is the next,
 * it is due, no other dispatcher holds it and the subscription is active. The subscription row
 * is read FOR SHARE so a concurrent revocation either waits for this lease or is seen here.
 * Every claim is counted; an attempt already claimed MAX_CLAIMS_PER_ATTEMPT times whose lease
 * ran out without an outcome is not sent again: the same statement fails its delivery (not
 * counted in failureCount: the receiver did not exhaust its attempts, something on our side failed).
 */
export async function claimAttempt(db: Db, deliveryId: string, attempt: number, leaseMs: number): Promise<ClaimResult> {
  const result = await db.raw(
    `WITH sub AS (
       SELECT s.id, s.status, s.url, s.secret FROM webhook_subscriptions s
        WHERE s.id = (SELECT subscription_id FROM deliveries WHERE id = :id)
        FOR SHARE
     ), claimed AS (
       UPDATE deliveries d SET locked_until = clock_timestamp() + make_interval(secs => :leaseSecs), claims = d.claims + 1
         FROM sub
        WHERE d.id = :id AND d.status = 'pending' AND d.attempt_count = :previous AND sub.status = 'active'
          AND d.claims < :maxClaims
          AND (d.locked_until IS NULL OR d.locked_until <= clock_timestamp())
          AND d.next_attempt_at <= clock_timestamp()
       RETURNING d.id
     ), abandoned AS (
       UPDATE deliveries d SET status = 'failed', locked_until = NULL, next_attempt_at = NULL,
              finished_at = clock_timestamp(), failure_reason = :unrecorded
        WHERE d.id = :id AND d.status = 'pending' AND d.attempt_count = :previous AND d.claims >= :maxClaims
          AND (d.locked_until IS NULL OR d.locked_until <= clock_timestamp())
       RETURNING d.id
     )
     SELECT d.id, d.subscription_id, d.event_id, d.status, d.attempt_count,
            GREATEST(0, EXTRACT(EPOCH FROM (d.next_attempt_at - clock_timestamp())) * 1000)::float8 AS due_in_ms,
            GREATEST(0, EXTRACT(EPOCH FROM (d.locked_until - clock_timestamp())) * 1000)::float8 AS locked_for_ms,
            GREATEST(0, EXTRACT(EPOCH FROM (clock_timestamp() - d.next_attempt_at)) * 1000)::float8 AS late_ms,
            sub.status AS sub_status, sub.url, sub.secret, e.type, e.body,
            (SELECT count(*) FROM claimed)::int AS claimed,
            (SELECT count(*) FROM abandoned)::int AS abandoned
       FROM deliveries d
       JOIN events e ON e.id = d.event_id
       LEFT JOIN sub ON sub.id = d.subscription_id
      WHERE d.id = :id`,
    {
      id: deliveryId,
      previous: attempt - 1,
      leaseSecs: leaseMs / 1000,
      maxClaims: MAX_CLAIMS_PER_ATTEMPT,
      unrecorded: unrecordedAttemptReason(attempt),
    },
  ).options({ name: 'svc_claim_attempt_v2' });
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
        lateMs: row.late_ms ?? 0,
      },
    };
  }
  if (row.abandoned === 1) return { claimed: false, refusal: { reason: 'claim-limit', failureReason: unrecordedAttemptReason(attempt) } };
  if (row.status !== 'pending') return { claimed: false, refusal: { reason: 'finished' } };
  if (row.attempt_count >= attempt) return { claimed: false, refusal: { reason: 'already-attempted' } };
  if (row.sub_status === 'disabled') return { claimed: false, refusal: { reason: 'subscription-disabled' } };
  if (row.sub_status !== 'active') return { claimed: false, refusal: { reason: 'subscription-deleting' } };
  if (row.attempt_count < attempt - 1) return { claimed: false, refusal: { reason: 'already-attempted' } };
  if (row.locked_for_ms > 0) return { claimed: false, refusal: { reason: 'in-flight-elsewhere', retryInMs: row.locked_for_ms } };
  return { claimed: false, refusal: { reason: 'not-due', retryInMs: Math.max(1, row.due_in_ms) } };
}
