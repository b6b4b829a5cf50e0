import type { Db } from '../db/knex.js';

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
): Promise<{ firstAttempts: Array<{ deliveryId: string; subscriptionId: string }> }> {
  return fanOutEvents(db, [eventId]);
}

/** fanOutEvent for the events whose jobs a worker picked up together: one statement, one commit. */
export async function fanOutEvents(
  db: Db,
  eventIds: readonly string[],
): Promise<{ firstAttempts: Array<{ deliveryId: string; subscriptionId: string }> }> {
  if (eventIds.length === 0) return { firstAttempts: [] };
  const result = await db.raw(
    `WITH event AS (
       UPDATE events SET fanned_out_at = COALESCE(fanned_out_at, clock_timestamp())
        WHERE id = ANY(:eventIds::text[])
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
     SELECT id, subscription_id FROM deliveries WHERE event_id = ANY(:eventIds::text[]) AND status = 'pending' AND attempt_count = 0`,
    { eventIds: [...eventIds].sort() },
  ).options({ name: 'svc_fan_out_events_v1' });
  return {
    firstAttempts: result.rows.map((row: { id: string; subscription_id: string }) => ({
      deliveryId: row.id,
      subscriptionId: row.subscription_id,
    })),
  };
}
