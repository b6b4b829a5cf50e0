/**
 * The one statement that stores a redelivery, shared by the customer's and the operator's
 * entry points (redeliver.ts, operator-redeliver.ts); not exported from the package.
 */
import type { Db } from '../db/knex.js';
import { newId } from '../ids.js';
import type { DeliveryStatus } from './delivery-limits.js';
import type { DeliverySummary } from './delivery-history.repository.js';

/** Whose delivery may be redelivered: one account's subscription, or (operators) any. */
export type RedeliveryOwner = { accountId: string; subscriptionId: string } | { anyAccount: true };

export type RedeliveryInsert =
  | { kind: 'created'; delivery: DeliverySummary; subscriptionId: string }
  | { kind: 'not-found' }
  | { kind: 'subscription-disabled' }
  | { kind: 'pending'; pendingDeliveryId: string | null };

interface InsertRow {
  found: number;
  sub_status: string | null;
  pending_id: string | null;
  id: string | null;
  event_id: string | null;
  subscription_id: string | null;
  status: DeliveryStatus | null;
  created_at: Date | null;
  next_attempt_at: Date | null;
  redelivery_of: string | null;
  type: string | null;
}

/**
 * Inserts a new pending delivery of the original's event to the original's subscription, due
 * now. The subscription row is read FOR SHARE, as the dispatcher's claim does, so an
 * auto-disable or a revocation running at the same moment either sees this delivery (and
 * fails or deletes it) or is seen here (and nothing is stored). The unique index that allows
 * one pending delivery per (event, subscription) refuses a second redelivery even when two
 * requests race; nothing is stored when refused.
 */
export async function insertRedelivery(db: Db, deliveryId: string, owner: RedeliveryOwner): Promise<RedeliveryInsert> {
  const scoped = 'accountId' in owner;
  const result = await db.raw(
    `WITH original AS (
       SELECT d.id, d.event_id, d.subscription_id
         FROM deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
        WHERE d.id = :deliveryId AND s.status IN ('active', 'disabled')
          ${scoped ? 'AND d.subscription_id = :subscriptionId AND s.account_id = :accountId' : ''}
        -- Held until commit, so the retention purge cannot delete the original under the new row's
        -- redelivery_of (a purge that got there first leaves no row: not found); a purge that locks
        -- it after this commit looks for redeliveries again under that lock and keeps it.
        FOR KEY SHARE OF d
     ), sub AS (
       SELECT s.id, s.status FROM webhook_subscriptions s
        WHERE s.id = (SELECT subscription_id FROM original)
        FOR SHARE
     ), created AS (
       INSERT INTO deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at, redelivery_of)
       SELECT :newId, o.event_id, o.subscription_id, 'pending', 0, clock_timestamp(), o.id
         FROM original o JOIN sub ON sub.id = o.subscription_id
        WHERE sub.status = 'active'
       ON CONFLICT DO NOTHING
       RETURNING id, event_id, subscription_id, status, created_at, next_attempt_at, redelivery_of
     )
     SELECT (SELECT count(*) FROM original)::int AS found,
            (SELECT status FROM sub) AS sub_status,
            (SELECT p.id FROM deliveries p JOIN original o ON p.event_id = o.event_id AND p.subscription_id = o.subscription_id
              WHERE p.status = 'pending' LIMIT 1) AS pending_id,
            c.id, c.event_id, c.subscription_id, c.status, c.created_at, c.next_attempt_at, c.redelivery_of, e.type
       FROM (SELECT 1) AS one
       LEFT JOIN created c ON true
       LEFT JOIN events e ON e.id = c.event_id`,
    {
      deliveryId,
      newId: newId('dlv'),
      ...(scoped ? { accountId: owner.accountId, subscriptionId: owner.subscriptionId } : {}),
    },
  );
  const row = result.rows[0] as InsertRow;
  if (row.id !== null && row.event_id !== null && row.subscription_id !== null && row.created_at !== null && row.type !== null) {
    return {
      kind: 'created',
      subscriptionId: row.subscription_id,
      delivery: {
        id: row.id,
        eventId: row.event_id,
        event: row.type,
        status: 'pending',
        createdAt: row.created_at,
        nextAttemptAt: row.next_attempt_at,
        redeliveryOf: row.redelivery_of,
        attempts: [],
      },
    };
  }
  // A subscription being revoked (or just deleted) has no history any more: not found.
  if (row.found === 0 || (row.sub_status !== 'active' && row.sub_status !== 'disabled')) return { kind: 'not-found' };
  if (row.sub_status === 'disabled') return { kind: 'subscription-disabled' };
  return { kind: 'pending', pendingDeliveryId: row.pending_id };
}
