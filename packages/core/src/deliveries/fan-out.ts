import type { Db } from '../db/knex.js';

/** One first attempt to queue: its delivery and the subscription it goes to. */
export interface FirstAttempt {
  deliveryId: string;
  subscriptionId: string;
}

/**
 * A producer fans its event out in its own statement when the account has at most this many
 * matching subscriptions (one batch of the dispatcher's claims); a wider event is left to the
 * dispatcher's fan-out job, so a producer's transaction stays small whatever the account.
 */
export const PRODUCER_FAN_OUT_MAX = 100;

/**
 * The fan-out of a producer's statement (ADR 13, ADR 14): the same rows fanOutEvents makes — one
 * pending delivery per active subscription of the account whose events hold the event's type or
 * `*`, due now — made in the transaction that records the facts and their events, so the first
 * attempts can be queued right after the commit instead of one job and one transaction later.
 * An event fans out there only when its account has at most PRODUCER_FAN_OUT_MAX matching
 * subscriptions; a wider one is left to the dispatcher's fan-out job.
 *
 * `targetsCte` comes before the events' CTE and reads `from`, a CTE already defined with one row
 * per event (`ev_id`, `account_id`); `fannedOutSql(evId)` is that event's fanned_out_at (over
 * `clock.now`); `createdCte` comes after the CTE `event` (`id`, `fanned_out_at`);
 * `firstAttemptsSql(event)` is the JSON array of one event's first attempts (`first_attempts`).
 * `evTypeSql` is each event's type, over `from` (a text column).
 */
export function producerFanOutSql(from: string, evTypeSql: string): {
  targetsCte: string;
  fannedOutSql: (evIdSql: string) => string;
  createdCte: string;
  firstAttemptsSql: (eventAlias: string) => string;
  bindings: { fanOutMax: number };
} {
  return {
    targetsCte: `targets AS (
       SELECT ${from}.ev_id, t.id FROM ${from} CROSS JOIN LATERAL (
         SELECT s.id FROM webhook_subscriptions s
          WHERE s.account_id = ${from}.account_id AND s.status = 'active' AND (s.events @> ARRAY[${evTypeSql}] OR s.events @> ARRAY['*'])
          LIMIT :fanOutMax + 1
       ) t
     )`,
    fannedOutSql: (evIdSql) => `CASE WHEN (SELECT count(*) FROM targets WHERE targets.ev_id = ${evIdSql}) <= :fanOutMax THEN clock.now END`,
    createdCte: `created AS (
       INSERT INTO deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at)
       SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), event.id, targets.id, 'pending', 0, clock_timestamp()
         FROM event JOIN targets ON targets.ev_id = event.id
        WHERE event.fanned_out_at IS NOT NULL
       RETURNING id, event_id, subscription_id
     )`,
    firstAttemptsSql: (eventAlias) =>
      `(SELECT coalesce(json_agg(json_build_array(created.id, created.subscription_id)), '[]') FROM created WHERE created.event_id = ${eventAlias}.id) AS first_attempts`,
    bindings: { fanOutMax: PRODUCER_FAN_OUT_MAX },
  };
}

/** What a producer's statement fanned out: the first attempts to queue, and whether it fanned out at all. */
export interface ProducerFanOut {
  firstAttempts: FirstAttempt[];
  /** False when the account has too many matching subscriptions: the fan-out job does it. */
  fannedOut: boolean;
}

/** A producer statement's `first_attempts` and `fanned_out` columns. */
export function toProducerFanOut(row: { first_attempts: unknown; fanned_out: boolean }): ProducerFanOut {
  return { firstAttempts: toFirstAttempts(row.first_attempts), fannedOut: row.fanned_out };
}

/** The first attempts of a producer's statement, from its `first_attempts` column. */
export function toFirstAttempts(column: unknown): FirstAttempt[] {
  const pairs = (typeof column === 'string' ? JSON.parse(column) : column) as Array<[string, string]>;
  return pairs.map(([deliveryId, subscriptionId]) => ({ deliveryId, subscriptionId }));
}

/**
 * Fan-out (idempotent, one statement): one delivery per active subscription of the event's
 * account whose events hold its type or `*`, and the first attempts still to be made — those
 * created now and any a previous run created but did not get to queue.
 *
 * "One delivery per (event, subscription)" holds for first deliveries only (a redelivery is a
 * second row): the conflict target is left open so that every unique index is an arbiter — the
 * first-delivery one and the one-pending-per-(event, subscription) one — and a run racing a
 * redelivery or another run does nothing rather than fail.
 */
export async function fanOutEvent(
  db: Db,
  eventId: string,
): Promise<{ firstAttempts: FirstAttempt[] }> {
  return fanOutEvents(db, [eventId]);
}

/**
 * fanOutEvent for the events whose jobs a worker picked up together: one statement, one commit.
 * An event already fanned out (by its producer's statement, or by an earlier run) is not fanned
 * out again and its row is not rewritten. The first attempts still pending of an event an earlier
 * run fanned out are answered, so a job lost between that run's commit and its enqueue is queued
 * again; those of an event its producer fanned out are not (the producer queued them; if Redis
 * lost them, the sweep queues them once overdue).
 */
export async function fanOutEvents(
  db: Db,
  eventIds: readonly string[],
): Promise<{ firstAttempts: FirstAttempt[] }> {
  if (eventIds.length === 0) return { firstAttempts: [] };
  const result = await db.raw(
    `WITH event AS (
       UPDATE events SET fanned_out_at = clock_timestamp()
        WHERE id = ANY(:eventIds::text[]) AND fanned_out_at IS NULL
       RETURNING id, account_id, type
     ), created AS (
       INSERT INTO deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at)
       SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), event.id, s.id, 'pending', 0, clock_timestamp()
         FROM event JOIN webhook_subscriptions s ON s.account_id = event.account_id
        WHERE s.status = 'active' AND (s.events @> ARRAY[event.type] OR s.events @> ARRAY['*'])
       ON CONFLICT DO NOTHING
       RETURNING id, subscription_id
     )
     SELECT id, subscription_id FROM created
     UNION ALL
     SELECT waiting.id, waiting.subscription_id
       FROM unnest(:eventIds::text[]) AS requested(event_id)
       -- An event its producer fanned out (its statement dates fanned_out_at with the event's own
       -- created_at) had its first attempts queued by that producer on the round trip that queued
       -- this job: queued again here, one whose job just completed would get a second, idle job.
       JOIN events fanned ON fanned.id = requested.event_id AND fanned.fanned_out_at IS DISTINCT FROM fanned.created_at
      CROSS JOIN LATERAL (
        -- Looked up event by event (OFFSET 0 keeps the planner from flattening this), through the
        -- first-delivery index: a plan scanning every pending delivery (deliveries_due_idx, which
        -- statistics taken in a quiet moment make look tiny) would cost as much as the backlog.
        SELECT d.id, d.subscription_id, d.status, d.attempt_count FROM deliveries d
         WHERE d.event_id = requested.event_id AND d.redelivery_of IS NULL
        OFFSET 0
      ) waiting
      WHERE waiting.status = 'pending' AND waiting.attempt_count = 0`,
    { eventIds: [...eventIds].sort() },
  ).options({ name: 'svc_fan_out_events_v4' });
  return {
    firstAttempts: result.rows.map((row: { id: string; subscription_id: string }) => ({
      deliveryId: row.id,
      subscriptionId: row.subscription_id,
    })),
  };
}
