/**
 * The customer's delivery log (issue 10): one subscription's deliveries with their attempts.
 * Every function takes the account id, so another account's subscription or delivery is simply
 * not found; the operator's unscoped log is delivery-log.repository.ts.
 */
import type { DbOrTx } from '../db/knex.js';
import { NotFoundError } from '../errors.js';
import type { DeliveryStatus } from './delivery-limits.js';
import { presentResponseExcerpt, storedExcerptOf, type PresentedResponseExcerpt } from './response-excerpt.js';

export interface DeliveryAttemptSummary {
  n: number;
  at: Date;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/** An attempt in the detail view: also the first bytes of the receiver's answer. */
export interface DeliveryAttemptDetail extends DeliveryAttemptSummary, PresentedResponseExcerpt {}

export interface DeliverySummary {
  id: string;
  eventId: string;
  event: string;
  status: DeliveryStatus;
  createdAt: Date;
  /** Null unless pending. */
  nextAttemptAt: Date | null;
  /** The delivery this one redelivers; null for the fan-out's first delivery. */
  redeliveryOf: string | null;
  attempts: DeliveryAttemptSummary[];
}

export interface DeliveryDetail extends Omit<DeliverySummary, 'attempts'> {
  /** The event body exactly as stored and sent (JSON text). */
  body: string;
  attempts: DeliveryAttemptDetail[];
}

/** A place in the log: the page after it starts with the next older delivery. */
export interface DeliveryPosition {
  createdAt: Date;
  id: string;
}

export interface DeliveryPage {
  deliveries: DeliverySummary[];
  /** Where the next page starts; null on the last page. */
  next: DeliveryPosition | null;
}

export interface DeliveryPageQuery {
  limit: number;
  after?: DeliveryPosition | undefined;
  status?: DeliveryStatus | undefined;
}

interface DeliveryRow {
  id: string;
  event_id: string;
  type: string;
  status: DeliveryStatus;
  created_at: Date;
  next_attempt_at: Date | null;
  redelivery_of: string | null;
}

interface AttemptRow {
  delivery_id: string;
  n: number;
  at: Date;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
  response_excerpt: string | null;
  response_excerpt_bytes: Buffer | null;
}

const DELIVERY_COLUMNS = ['d.id', 'd.event_id', 'e.type', 'd.status', 'd.created_at', 'd.next_attempt_at', 'd.redelivery_of'];
const ATTEMPT_COLUMNS = ['delivery_id', 'n', 'at', 'status_code', 'error', 'duration_ms'];

async function requireVisibleSubscription(db: DbOrTx, accountId: string, subscriptionId: string): Promise<void> {
  const found = await db('webhook_subscriptions')
    .where({ id: subscriptionId, account_id: accountId })
    .whereIn('status', ['active', 'disabled'])
    .first('id')
    .options({ name: 'svc_visible_subscription' });
  // A revoked subscription's history is gone (spec §3.2); one being revoked is already gone to its owner.
  if (!found) throw new NotFoundError('No webhook subscription with this id exists in your account.');
}

function toSummaryFields(row: DeliveryRow): Omit<DeliverySummary, 'attempts'> {
  return {
    id: row.id,
    eventId: row.event_id,
    event: row.type,
    status: row.status,
    createdAt: row.created_at,
    nextAttemptAt: row.status === 'pending' ? row.next_attempt_at : null,
    redeliveryOf: row.redelivery_of,
  };
}

function toAttemptSummary(row: AttemptRow): DeliveryAttemptSummary {
  return { n: row.n, at: row.at, statusCode: row.status_code, error: row.error, durationMs: row.duration_ms };
}

/**
 * One page of a subscription's deliveries, newest first (created_at, then id), each with every
 * recorded attempt in order. Keyset paging: a page starts strictly after `after`, so deliveries
 * created while a client pages never shift a page nor appear twice.
 */
export async function listSubscriptionDeliveries(
  db: DbOrTx,
  accountId: string,
  subscriptionId: string,
  query: DeliveryPageQuery,
): Promise<DeliveryPage> {
  await requireVisibleSubscription(db, accountId, subscriptionId);
  const page = db('deliveries as d')
    .join('events as e', 'e.id', 'd.event_id')
    .where('d.subscription_id', subscriptionId)
    .orderBy([
      { column: 'd.created_at', order: 'desc' },
      { column: 'd.id', order: 'desc' },
    ])
    // One more than asked tells whether a next page exists without an empty last page.
    .limit(query.limit + 1)
    .select(DELIVERY_COLUMNS);
  if (query.status) page.where('d.status', query.status);
  if (query.after) page.whereRaw('(d.created_at, d.id) < (?, ?)', [query.after.createdAt, query.after.id]);
  const rows = (await page) as DeliveryRow[];
  const shown = rows.slice(0, query.limit);
  const attempts = shown.length
    ? ((await db('delivery_attempts')
        .whereIn(
          'delivery_id',
          shown.map((row) => row.id),
        )
        .orderBy(['delivery_id', 'n'])
        .select(ATTEMPT_COLUMNS)) as AttemptRow[])
    : [];
  const byDelivery = new Map<string, DeliveryAttemptSummary[]>();
  for (const attempt of attempts) {
    const list = byDelivery.get(attempt.delivery_id) ?? [];
    list.push(toAttemptSummary(attempt));
    byDelivery.set(attempt.delivery_id, list);
  }
  const last = shown[shown.length - 1];
  return {
    deliveries: shown.map((row) => ({ ...toSummaryFields(row), attempts: byDelivery.get(row.id) ?? [] })),
    next: rows.length > query.limit && last ? { createdAt: last.created_at, id: last.id } : null,
  };
}

/** One delivery of the subscription with the event body and every attempt's response excerpt. */
export async function findSubscriptionDelivery(
  db: DbOrTx,
  accountId: string,
  subscriptionId: string,
  deliveryId: string,
): Promise<DeliveryDetail> {
  await requireVisibleSubscription(db, accountId, subscriptionId);
  const row = (await db('deliveries as d')
    .join('events as e', 'e.id', 'd.event_id')
    .where({ 'd.id': deliveryId, 'd.subscription_id': subscriptionId })
    .first([...DELIVERY_COLUMNS, 'e.body'])) as (DeliveryRow & { body: string }) | undefined;
  if (!row) throw new NotFoundError('No delivery with this id exists for this webhook subscription.');
  const attempts = (await db('delivery_attempts')
    .where({ delivery_id: deliveryId })
    .orderBy('n')
    .select([...ATTEMPT_COLUMNS, 'response_excerpt', 'response_excerpt_bytes'])) as AttemptRow[];
  return {
    ...toSummaryFields(row),
    body: row.body,
    attempts: attempts.map((attempt) => ({ ...toAttemptSummary(attempt), ...presentResponseExcerpt(storedExcerptOf(attempt)) })),
  };
}
