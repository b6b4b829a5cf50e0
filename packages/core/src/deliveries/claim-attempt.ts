import type { Db } from '../db/knex.js';
import { subscriptionSecretPlace, type SecretBox } from '../secrets/secret-box.js';
import { MAX_CLAIMS_PER_ATTEMPT, unrecordedAttemptReason } from './delivery-limits.js';

/** What the sender needs for one claimed attempt, its secrets opened. The secret stays in memory, never in job data. */
export interface ClaimedAttempt {
  deliveryId: string;
  subscriptionId: string;
  eventId: string;
  eventType: string;
  body: string;
  url: string;
  secret: string;
  /** The secret a rotation replaced, while its overlap lasts: it signs beside `secret` (webhook-signature only). */
  previousSecret: string | null;
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
  | { reason: 'in-flight-elsewhere'; retryInMs: number }
  /** Another transaction holds its delivery or subscription row right now (a revocation, an auto-disable): come back. */
  | { reason: 'busy'; retryInMs: number };

/**
 * A claimed attempt as its claim read it: the subscription's secrets as stored (sealed with
 * SECRETS_ENCRYPTION_KEY, or plain text), which openClaimedAttempt opens just before signing.
 */
export interface StoredAttempt extends Omit<ClaimedAttempt, 'secret' | 'previousSecret'> {
  storedSecret: string;
  storedPreviousSecret: string | null;
}

export type ClaimResult = { claimed: true; attempt: StoredAttempt } | { claimed: false; refusal: ClaimRefusal };

/**
 * The attempt with its secrets opened, ready to sign; SecretUnavailableError when either cannot be
 * opened with the configured keys (nothing is then signed or sent: never a plain-text fallback).
 */
export function openClaimedAttempt(attempt: StoredAttempt, secrets: SecretBox): ClaimedAttempt {
  const { storedSecret, storedPreviousSecret, ...rest } = attempt;
  return {
    ...rest,
    secret: secrets.open(storedSecret, subscriptionSecretPlace(attempt.subscriptionId)),
    previousSecret: storedPreviousSecret === null ? null : secrets.open(storedPreviousSecret, subscriptionSecretPlace(attempt.subscriptionId, 'previous_secret')),
  };
}

/** One attempt a worker wants to make. */
export interface AttemptRequest {
  deliveryId: string;
  attempt: number;
}

/** How soon a claim refused as `busy` is tried again: about as long as a short transaction holds a row. */
const BUSY_RETRY_MS = 250;

/**
 * Takes the lease of each attempt, in one statement (one commit): the attempts workers picked up
 * together, from any accounts. An attempt is claimed only when its delivery is pending, this
 * attempt is the next, it is due, no other dispatcher holds it and the subscription is active.
 * The subscription row is locked FOR KEY SHARE, which a revocation's FOR UPDATE conflicts with
 * (and a record's or an auto-disable's NO KEY UPDATE does not), so a revocation either waits for
 * this lease or is seen here. A claim never waits for a lock: a row another transaction holds (a
 * DELETE cascading a large history, an auto-disable cancelling a backlog) is skipped and its
 * attempt refused as `busy`, to be tried again a moment later, so it never holds back the other
 * attempts of the batch. Every claim is counted; an attempt already claimed
 * MAX_CLAIMS_PER_ATTEMPT times whose lease ran out without an outcome is not sent again: the same
 * statement fails its delivery (not counted in failureCount: the receiver did not exhaust its
 * attempts, something on our side failed). Each request gets the answer it would get alone. No
 * two requests may name the same delivery.
 */
export async function claimAttempts(db: Db, requests: readonly AttemptRequest[], leaseMs: number): Promise<ClaimResult[]> {
  if (requests.length === 0) return [];
  const ids = requests.map((r) => r.deliveryId);
  // One statement, one round trip, one commit, and no lock wait: `sub` locks the subscriptions
  // FOR KEY SHARE SKIP LOCKED and yields their latest committed versions (a revocation committed
  // meanwhile is seen; one in progress holds FOR UPDATE, so its subscription is skipped); `held`
  // locks the claimable delivery rows SKIP LOCKED, after `sub` (`gate`). A request whose row was
  // skipped is answered `busy` (`sub_busy`, `delivery_busy`: the row exists, unlocked here).
  // `d.status = (SELECT 'pending'::text)` rather than `= 'pending'`: with a constant, the partial
  // indexes on pending rows (deliveries_due_idx) qualify, and statistics taken in a quiet moment
  // make scanning all of them look cheaper than one primary-key probe per attempt — a plan whose
  // cost is the whole backlog per batch (17 ms per claim batch at 9,000 pending, EXPLAIN ANALYZE
  // of the generic plan). A sub-select is never matched against an index predicate.
  // Neither `sub` nor `claimed` may reach deliveries from a subscription: with statistics from a
  // moment when subscriptions had few deliveries, the planner drove both from the (one-row
  // estimated) subscriptions through deliveries_subscription_log_idx — every delivery the
  // subscription ever had, filtered, per claim batch (bench case 2: 17 ms and 120 buffers per
  // claimed attempt after 5,000 deliveries, growing with history, while its FOR SHARE locks held
  // the record batches back). So `sub` takes its ids from an ARRAY(…) of the batch's deliveries
  // read by key (an init plan, computed before the scan), and `claimed` reads its subscription's
  // status through a scalar sub-select (never pulled up into a join): each one's only way to
  // deliveries is the primary key (backlog-plans.test.ts).
  const result = await db
    .raw(
      `WITH req AS (
         SELECT * FROM unnest(:ids::text[], :attempts::int[], :unrecorded::text[]) AS r(id, attempt, unrecorded)
       ), sub AS (
         SELECT s.id, s.status, s.url, s.secret, s.previous_secret, s.previous_secret_expires_at FROM webhook_subscriptions s
          WHERE s.id = ANY (ARRAY(SELECT d.subscription_id FROM req JOIN deliveries d ON d.id = req.id))
          ORDER BY s.id
            FOR KEY SHARE SKIP LOCKED
       ), gate AS (
         SELECT count(*) AS locked FROM sub
       ), held AS (
         SELECT d.id FROM deliveries d, gate
          WHERE d.id = ANY (:ids::text[]) AND d.status = (SELECT 'pending'::text)
            AND (d.locked_until IS NULL OR d.locked_until <= clock_timestamp())
          ORDER BY d.id
            FOR NO KEY UPDATE OF d SKIP LOCKED
       ), claimed AS (
         UPDATE deliveries d SET locked_until = clock_timestamp() + make_interval(secs => :leaseSecs), claims = d.claims + 1
           FROM req, held
          WHERE d.id = req.id AND held.id = d.id AND d.attempt_count = req.attempt - 1
            AND (SELECT sub.status FROM sub WHERE sub.id = d.subscription_id) = 'active' AND d.claims < :maxClaims
            AND d.next_attempt_at <= clock_timestamp()
         RETURNING d.id
       ), abandoned AS (
         UPDATE deliveries d SET status = 'failed', locked_until = NULL, next_attempt_at = NULL,
                finished_at = clock_timestamp(), failure_reason = req.unrecorded
           FROM req, held
          WHERE d.id = req.id AND held.id = d.id AND d.attempt_count = req.attempt - 1 AND d.claims >= :maxClaims
         RETURNING d.id
       )
       SELECT req.id AS req_id, d.id, d.subscription_id, d.event_id, d.status, d.attempt_count,
              GREATEST(0, EXTRACT(EPOCH FROM (d.next_attempt_at - clock_timestamp())) * 1000)::float8 AS due_in_ms,
              GREATEST(0, EXTRACT(EPOCH FROM (d.locked_until - clock_timestamp())) * 1000)::float8 AS locked_for_ms,
              GREATEST(0, EXTRACT(EPOCH FROM (clock_timestamp() - d.next_attempt_at)) * 1000)::float8 AS late_ms,
              sub.status AS sub_status, sub.url, sub.secret, e.type, e.body,
              CASE WHEN sub.previous_secret_expires_at > clock_timestamp() THEN sub.previous_secret END AS previous_secret,
              EXISTS (SELECT 1 FROM claimed c WHERE c.id = req.id) AS claimed,
              EXISTS (SELECT 1 FROM abandoned a WHERE a.id = req.id) AS abandoned,
              (sub.id IS NULL AND EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.id = d.subscription_id)) AS sub_busy,
              (d.status = 'pending' AND (d.locked_until IS NULL OR d.locked_until <= clock_timestamp())
                AND NOT EXISTS (SELECT 1 FROM held h WHERE h.id = req.id)) AS delivery_busy
         FROM req
         LEFT JOIN deliveries d ON d.id = req.id
         LEFT JOIN events e ON e.id = d.event_id
         LEFT JOIN sub ON sub.id = d.subscription_id`,
      {
        ids,
        attempts: requests.map((r) => r.attempt),
        unrecorded: requests.map((r) => unrecordedAttemptReason(r.attempt)),
        leaseSecs: leaseMs / 1000,
        maxClaims: MAX_CLAIMS_PER_ATTEMPT,
      },
    )
    .options({ name: 'svc_claim_attempts_v7' });
  const rows = result.rows as ClaimRow[];
  const byId = new Map(rows.map((row) => [row.req_id, row]));
  return requests.map((request) => toClaimResult(byId.get(request.deliveryId), request.attempt));
}

/** One row of the claim statement: the delivery as it was before the claim, with its subscription and event. */
interface ClaimRow {
  req_id: string;
  id: string | null;
  subscription_id: string;
  event_id: string;
  status: string;
  attempt_count: number;
  due_in_ms: number;
  locked_for_ms: number;
  late_ms: number | null;
  sub_status: string | null;
  url: string;
  secret: string;
  previous_secret: string | null;
  type: string;
  body: string;
  claimed: boolean;
  abandoned: boolean;
  sub_busy: boolean;
  delivery_busy: boolean;
}

function toClaimResult(row: ClaimRow | undefined, attempt: number): ClaimResult {
  if (!row || row.id === null) return { claimed: false, refusal: { reason: 'gone' } };
  if (row.claimed) {
    return {
      claimed: true,
      attempt: {
        deliveryId: row.id,
        subscriptionId: row.subscription_id,
        eventId: row.event_id,
        eventType: row.type,
        body: row.body,
        url: row.url,
        storedSecret: row.secret,
        storedPreviousSecret: row.previous_secret,
        attempt,
        lateMs: row.late_ms ?? 0,
      },
    };
  }
  if (row.abandoned) return { claimed: false, refusal: { reason: 'claim-limit', failureReason: unrecordedAttemptReason(attempt) } };
  if (row.status !== 'pending') return { claimed: false, refusal: { reason: 'finished' } };
  if (row.attempt_count >= attempt) return { claimed: false, refusal: { reason: 'already-attempted' } };
  if (row.sub_busy || row.delivery_busy) return { claimed: false, refusal: { reason: 'busy', retryInMs: BUSY_RETRY_MS } };
  if (row.sub_status === 'disabled') return { claimed: false, refusal: { reason: 'subscription-disabled' } };
  if (row.sub_status !== 'active') return { claimed: false, refusal: { reason: 'subscription-deleting' } };
  if (row.attempt_count < attempt - 1) return { claimed: false, refusal: { reason: 'already-attempted' } };
  if (row.locked_for_ms > 0) return { claimed: false, refusal: { reason: 'in-flight-elsewhere', retryInMs: row.locked_for_ms } };
  return { claimed: false, refusal: { reason: 'not-due', retryInMs: Math.max(1, row.due_in_ms) } };
}
