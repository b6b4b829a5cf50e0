import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeScan, enqueueDeliveries, verifySignature } from '@svc/core';
import { uniqueTag } from '@svc/core/testing';
import { DispatcherMetrics } from '../src/metrics/dispatcher-metrics.js';
import { sweepOnce } from '../src/sweeps/sweeper.js';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import {
  attemptsOf,
  lastQueueEventId,
  producerOf,
  sendCanary,
  silentLogger,
  subscriptionRow,
  waitForDelivery,
  waitForQueueEvent,
} from './support/delivery-probe.js';

describe('retrying a delivery (spec §3.3, §6.3) with the fast test schedule', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness();
    h.startDispatcher();
  });
  afterAll(async () => {
    await h.close();
  });

  it('makes exactly 7 attempts at a failing endpoint with one delivery id and the same signed bytes, then fails the delivery for good and counts it once', async () => {
    const tenant = await seedTenant(h);
    const path = `/fail/exhaust-${uniqueTag()}`;
    const sub = await tenant.subscribe(path);

    const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 12 });
    const delivery = await waitForDelivery(h, eventId, sub.id, (row) => row.status !== 'pending', 'the delivery to finish');

    const event = await h.db('events').where({ id: eventId }).first('body');
    const received = h.receiver.to(path);
    expect(received).toHaveLength(7);
    for (const request of received) {
      expect(request.headers['x-service-delivery-id']).toBe(delivery.id);
      expect(request.body.equals(Buffer.from(event.body, 'utf8'))).toBe(true);
      expect(verifySignature(request.body, request.headers['x-service-signature'] as string, sub.secret)).toBe(true);
    }
    expect(new Set(received.map((request) => request.headers['x-service-signature'])).size).toBe(1);

    const attempts = await attemptsOf(h, delivery.id);
    expect(attempts.map((a) => a.n)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(attempts.map((a) => a.status_code)).toEqual([500, 500, 500, 500, 500, 500, 500]);
    expect(attempts.every((a) => a.error === 'HTTP 500' && a.response_excerpt === 'receiver failure')).toBe(true);
    for (let i = 1; i < attempts.length; i += 1) {
      expect(attempts[i]!.at.getTime()).toBeGreaterThan(attempts[i - 1]!.at.getTime());
    }
    expect(delivery).toMatchObject({
      status: 'failed',
      attempt_count: 7,
      failure_reason: 'attempts exhausted',
      next_attempt_at: null,
      locked_until: null,
    });
    expect(delivery.finished_at).toBeInstanceOf(Date);
    expect(await subscriptionRow(h, sub.id)).toMatchObject({
      status: 'active',
      failure_count: 1,
      last_delivery_at: null,
      disabled_at: null,
    });

    await sweepOnce({ db: h.db, queues: h.queues, logger: silentLogger, webhookTimeoutMs: h.config.webhookTimeoutMs, metrics: new DispatcherMetrics() });
    await sendCanary(h);

    expect(h.receiver.to(path)).toHaveLength(7);
    expect(await attemptsOf(h, delivery.id)).toHaveLength(7);
    const queued = await h.queues.deliveries[0]!.getJobs(['waiting', 'delayed', 'active', 'prioritized']);
    expect(queued.filter((job) => job.data.deliveryId === delivery.id)).toEqual([]);
    expect(await h.db('deliveries').where({ id: delivery.id }).first()).toMatchObject({ status: 'failed', attempt_count: 7 });
  });

  it('delivers a flaky endpoint on attempt 3, records 503, 503, 200 and resets failureCount to 0', async () => {
    const tenant = await seedTenant(h);
    const path = `/flaky/2/recover-${uniqueTag()}`;
    const sub = await tenant.subscribe(path);
    await h.db('webhook_subscriptions').where({ id: sub.id }).update({ failure_count: 5 });
    const publishedAt = Date.now();

    const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 77 });
    const delivery = await waitForDelivery(h, eventId, sub.id, (row) => row.status !== 'pending', 'the delivery to finish');

    const received = h.receiver.to(path);
    expect(received).toHaveLength(3);
    expect(new Set(received.map((request) => request.headers['x-service-delivery-id']))).toEqual(new Set([delivery.id]));
    expect(delivery).toMatchObject({ status: 'delivered', attempt_count: 3, failure_reason: null, next_attempt_at: null, locked_until: null });
    expect(delivery.finished_at).toBeInstanceOf(Date);
    const attempts = await attemptsOf(h, delivery.id);
    expect(attempts.map((a) => [a.n, a.status_code, a.error, a.response_excerpt])).toEqual([
      [1, 503, 'HTTP 503', 'not yet'],
      [2, 503, 'HTTP 503', 'not yet'],
      [3, 200, null, 'ok'],
    ]);
    const after = await subscriptionRow(h, sub.id);
    expect(after).toMatchObject({ status: 'active', failure_count: 0 });
    expect(after.last_delivery_at).toBeInstanceOf(Date);
    expect(after.last_delivery_at!.getTime()).toBeGreaterThanOrEqual(publishedAt - 1_000);
  });

  it('does nothing when the job of an attempt already recorded runs again', async () => {
    const tenant = await seedTenant(h);
    const path = `/ok/rerun-${uniqueTag()}`;
    const sub = await tenant.subscribe(path);
    const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 50 });
    const delivered = await waitForDelivery(h, eventId, sub.id, (row) => row.status === 'delivered', 'the delivery to be delivered');
    expect(h.receiver.to(path)).toHaveLength(1);
    const subscriptionBefore = await subscriptionRow(h, sub.id);

    const jobId = `${delivered.id}-1`;
    expect(await h.queues.deliveries[0]!.getJob(jobId)).toBeUndefined();
    const streamPosition = await lastQueueEventId(h, h.queues.deliveries[0]!);
    await enqueueDeliveries(h.queues, [{ deliveryId: delivered.id, subscriptionId: sub.id, attempt: 1, delayMs: 0 }]);
    await waitForQueueEvent(h, h.queues.deliveries[0]!, jobId, 'completed', streamPosition);
    await sendCanary(h);

    expect(h.receiver.to(path)).toHaveLength(1);
    expect(await attemptsOf(h, delivered.id)).toHaveLength(1);
    expect(await h.db('deliveries').where({ id: delivered.id }).first()).toEqual(delivered);
    expect(await subscriptionRow(h, sub.id)).toEqual(subscriptionBefore);
  });
});

describe('retry timing: the "never early" rule', () => {
  const DELAYS_MS = [100, 150, 200, 250, 300, 350];
  /** Only clock granularity: the database and the receiver read the same clock at ms precision. */
  const CLOCK_SLACK_MS = 5;
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness({ WEBHOOK_RETRY_DELAYS_MS: DELAYS_MS.join(',') });
    h.startDispatcher();
  });
  afterAll(async () => {
    await h.close();
  });

  it('never sends attempt n+1 earlier than the configured delay after attempt n failed (the "never early" rule)', async () => {
    const tenant = await seedTenant(h);
    const path = `/fail/never-early-${uniqueTag()}`;
    const sub = await tenant.subscribe(path);

    const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 3 });
    const delivery = await waitForDelivery(h, eventId, sub.id, (row) => row.status === 'failed', 'all 7 attempts to fail');

    const received = h.receiver.to(path);
    expect(received).toHaveLength(7);
    const early = received.slice(1).flatMap((request, i) => {
      const gapMs = request.receivedAt - received[i]!.receivedAt;
      return gapMs < DELAYS_MS[i]! - CLOCK_SLACK_MS ? [{ attempt: i + 2, gapMs, delayMs: DELAYS_MS[i]! }] : [];
    });
    expect(early).toEqual([]);

    const attempts = await attemptsOf(h, delivery.id);
    expect(attempts.map((a) => a.n)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    const earlyStarts = attempts.slice(1).flatMap((attempt, i) => {
      const previous = attempts[i]!;
      const sincePreviousEndedMs = attempt.at.getTime() - (previous.at.getTime() + previous.duration_ms);
      return sincePreviousEndedMs < DELAYS_MS[i]! - CLOCK_SLACK_MS ? [{ attempt: attempt.n, sincePreviousEndedMs, delayMs: DELAYS_MS[i]! }] : [];
    });
    expect(earlyStarts).toEqual([]);
  });
});
