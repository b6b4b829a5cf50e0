import type { Queue } from 'bullmq';
import { completeAiMonitorRun, createLogger } from '@svc/core';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { seedTenant, type Harness } from './harness.js';

export interface DeliveryRow {
  id: string;
  event_id: string;
  subscription_id: string;
  status: 'pending' | 'delivered' | 'failed';
  attempt_count: number;
  next_attempt_at: Date | null;
  locked_until: Date | null;
  finished_at: Date | null;
  failure_reason: string | null;
  created_at: Date;
  redelivery_of: string | null;
}

export interface AttemptRow {
  delivery_id: string;
  n: number;
  at: Date;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
  response_excerpt: string | null;
}

export interface SubscriptionRow {
  id: string;
  status: string;
  failure_count: number;
  last_delivery_at: Date | null;
  disabled_at: Date | null;
  secret: string;
}

export const silentLogger = createLogger('error', { silent: true });

/** The producer deps a test publishes with: the harness's database and queues. */
export function producerOf(h: Harness) {
  return { db: h.db, queues: h.queues };
}

/** Waits for the delivery of an event to a subscription to exist and satisfy `until`. */
export async function waitForDelivery(
  h: Harness,
  eventId: string,
  subscriptionId: string,
  until: (row: DeliveryRow) => boolean,
  what: string,
  timeoutMs = 10_000,
): Promise<DeliveryRow> {
  return waitFor(
    async () => {
      const row = (await h.db('deliveries').where({ event_id: eventId, subscription_id: subscriptionId }).first()) as DeliveryRow | undefined;
      return row !== undefined && until(row) && row;
    },
    timeoutMs,
    what,
  );
}

/** The recorded attempts of one delivery, in attempt order. */
export async function attemptsOf(h: Harness, deliveryId: string): Promise<AttemptRow[]> {
  return h.db('delivery_attempts')
    .where({ delivery_id: deliveryId })
    .orderBy('n')
    .select('delivery_id', 'n', 'at', 'status_code', 'error', 'duration_ms', 'response_excerpt');
}

export async function subscriptionRow(h: Harness, subscriptionId: string): Promise<SubscriptionRow> {
  return h.db('webhook_subscriptions')
    .where({ id: subscriptionId })
    .first('id', 'status', 'failure_count', 'last_delivery_at', 'disabled_at', 'secret');
}

/** Milliseconds from the database's now until the delivery's next attempt is due. */
export async function dueInMs(h: Harness, deliveryId: string): Promise<number> {
  const result = await h.db.raw(
    `SELECT (EXTRACT(EPOCH FROM (next_attempt_at - clock_timestamp())) * 1000)::float8 AS due_in_ms FROM deliveries WHERE id = ?`,
    [deliveryId],
  );
  return result.rows[0].due_in_ms as number;
}

/**
 * Publishes one event to a fresh tenant subscribed at /ok/canary-… and waits until it is received
 * and recorded delivered: everything queued on the same queues before it has been picked up.
 */
export async function sendCanary(h: Harness): Promise<void> {
  const tenant = await seedTenant(h);
  const path = `/ok/canary-${uniqueTag()}`;
  const sub = await tenant.subscribe(path);
  const { eventId } = await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: 1 });
  await waitFor(() => h.receiver.to(path).length === 1, 10_000, 'the canary to arrive');
  await waitForDelivery(h, eventId, sub.id, (row) => row.status === 'delivered', 'the canary to be recorded delivered');
}

/** The id of the newest entry of a queue's BullMQ event stream ('0-0' when empty). */
export async function lastQueueEventId(h: Harness, queue: Queue): Promise<string> {
  const [newest] = await h.redis.xrevrange(queue.toKey('events'), '+', '-', 'COUNT', 1);
  return newest ? newest[0] : '0-0';
}

/** Waits for BullMQ to report `event` (completed, failed, …) for a job id after a stream position. */
export async function waitForQueueEvent(
  h: Harness,
  queue: Queue,
  jobId: string,
  event: string,
  afterId: string,
  timeoutMs = 10_000,
): Promise<Record<string, string>> {
  return waitFor(
    async () => {
      const entries = await h.redis.xrange(queue.toKey('events'), `(${afterId}`, '+');
      for (const [, flat] of entries) {
        const fields: Record<string, string> = {};
        for (let i = 0; i < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
        if (fields.event === event && fields.jobId === jobId) return fields;
      }
      return undefined;
    },
    timeoutMs,
    `BullMQ to report ${event} for job ${jobId}`,
  );
}
