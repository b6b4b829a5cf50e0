/** The operator's delivery log (svc deliveries list): unscoped, never reached by a customer's request. */
import type { DbOrTx } from '../db/knex.js';
import type { DeliveryStatus } from './delivery-limits.js';
import { presentResponseExcerpt, storedExcerptOf } from './response-excerpt.js';

export interface DeliveryLogEntry {
  id: string;
  eventId: string;
  event: string;
  status: DeliveryStatus;
  createdAt: Date;
  nextAttemptAt: Date | null;
  failureReason: string | null;
  /** The delivery this one redelivers; null for the fan-out's first delivery. */
  redeliveryOf: string | null;
  attempts: Array<{
    n: number;
    at: Date;
    statusCode: number | null;
    error: string | null;
    durationMs: number;
    responseExcerpt: string | null;
    responseExcerptBase64: string | null;
  }>;
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
    .select('d.id', 'd.event_id', 'e.type', 'd.status', 'd.created_at', 'd.next_attempt_at', 'd.failure_reason', 'd.redelivery_of');
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
    redeliveryOf: row.redelivery_of,
    attempts: attempts
      .filter((a: { delivery_id: string }) => a.delivery_id === row.id)
      .map((a) => ({
        n: a.n,
        at: a.at,
        statusCode: a.status_code,
        error: a.error,
        durationMs: a.duration_ms,
        ...presentResponseExcerpt(storedExcerptOf(a)),
      })),
  }));
}
