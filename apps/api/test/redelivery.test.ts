import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { completeScan, createLogger, createQueues, verifySignature } from '@svc/core';
import { fanOutCollecting, testConfig, waitFor } from '@svc/core/testing';
import { createApp } from '../src/app.js';
import { subscriptionRow, waitForDelivery, type Harness } from '@svc/dispatcher/test-support';
import { startStage, stopStage, call, deliveriesOf, fireEvent, ISO_8601, tenantWithKey, waitForRow } from './delivery-stories.js';
import { bearer, createUnreachableRedis, type TestApi } from './support.js';

let h: Harness;
let api: TestApi;

// The harness's fast schedule: all 7 attempts within a second or two.
beforeAll(async () => ({ h, api } = await startStage()));
afterAll(() => stopStage({ h, api }));

const redeliverPath = (subscriptionId: string, deliveryId: string) =>
  `/api/v1/webhooks/${subscriptionId}/deliveries/${deliveryId}/redeliver`;

/** A tenant subscribed at a receiver path that answers 500 until fixed, with one scan.completed exhausted there. */
async function exhaustedDelivery(path: string) {
  const t = await tenantWithKey(h);
  h.receiver.answerWith(path, 500);
  const sub = await t.subscribe(path, ['scan.completed']);
  const scan = await t.newScan();
  const { eventId } = await completeScan({ db: h.db, queues: h.queues }, { scanId: scan.id, score: 64.5 });
  const original = await waitForDelivery(h, eventId, sub.id, (r) => r.status === 'failed', 'the original to exhaust its attempts', 20_000);
  return { t, sub, eventId, original, scanId: scan.id };
}

describe('POST /api/v1/webhooks/{subscriptionId}/deliveries/{deliveryId}/redeliver', () => {
  it('after an exhausted delivery: 202, a new id, identical body bytes, and its success resets failureCount to 0', async () => {
    const path = '/fixed/after-exhaustion';
    const { t, sub, eventId, original, scanId } = await exhaustedDelivery(path);
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ failure_count: 1, last_delivery_at: null });
    h.receiver.answerWith(path, 200);

    const res = await call(api, t.key).post(redeliverPath(sub.id, original.id));

    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      data: {
        delivery: {
          id: expect.stringMatching(/^dlv_[0-9a-f]{32}$/),
          eventId,
          event: 'scan.completed',
          status: 'pending',
          createdAt: expect.stringMatching(ISO_8601),
          nextAttemptAt: expect.stringMatching(ISO_8601),
          redeliveryOf: original.id,
          attempts: [],
        },
      },
    });
    const redelivery = res.body.data.delivery;
    expect(redelivery.id).not.toBe(original.id);
    await waitForRow(h, redelivery.id, (r) => r.status === 'delivered', 'the redelivery to be delivered');

    const requests = h.receiver.to(path);
    expect(requests).toHaveLength(8);
    const first = requests[0]!;
    const last = requests[7]!;
    expect(requests.slice(0, 7).every((r) => r.headers['x-service-delivery-id'] === original.id)).toBe(true);
    expect(last.headers['x-service-delivery-id']).toBe(redelivery.id);
    expect(last.headers['webhook-id']).toBe(redelivery.id);
    expect(last.body.equals(first.body)).toBe(true);
    expect(JSON.parse(last.body.toString('utf8')).data.scanId).toBe(scanId);
    expect(verifySignature(last.body, last.headers['x-service-signature'] as string, (await subscriptionRow(h, sub.id)).secret)).toBe(true);
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ failure_count: 0, last_delivery_at: expect.any(Date), status: 'active' });
    expect(await deliveriesOf(h, eventId, sub.id)).toEqual([
      expect.objectContaining({ id: original.id, status: 'failed', attempt_count: 7, redelivery_of: null }),
      expect.objectContaining({ id: redelivery.id, status: 'delivered', attempt_count: 1, redelivery_of: original.id }),
    ]);
    const log = await call(api, t.key).get(`/api/v1/webhooks/${sub.id}/deliveries`);
    expect(log.body.data.deliveries.map((d: { id: string; status: string }) => [d.id, d.status])).toEqual([
      [redelivery.id, 'delivered'],
      [original.id, 'failed'],
    ]);
  });

  it('counts a redelivery that exhausts its 7 attempts in failureCount like any other delivery', async () => {
    const path = '/fixed/never';
    const { t, sub, eventId, original } = await exhaustedDelivery(path);

    const res = await call(api, t.key).post(redeliverPath(sub.id, original.id));

    expect(res.status).toBe(202);
    await waitForRow(h, res.body.data.delivery.id, (r) => r.status === 'failed', 'the redelivery to exhaust its attempts');
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ failure_count: 2, status: 'active' });
    expect(h.receiver.to(path)).toHaveLength(14);
    expect(await deliveriesOf(h, eventId, sub.id)).toHaveLength(2);
  });

  it('refuses an auto-disabled subscription with 409 subscription_disabled, stores nothing, and keeps its log readable', async () => {
    const path = '/fixed/disabled';
    const t = await tenantWithKey(h);
    h.receiver.answerWith(path, 500);
    const sub = await t.subscribe(path);
    await h.db('webhook_subscriptions').where({ id: sub.id }).update({ failure_count: 99 });
    const eventId = await fireEvent(h, t.site.id);
    const original = await waitForDelivery(h, eventId, sub.id, (r) => r.status === 'failed', 'the hundredth permanent failure', 20_000);
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ status: 'disabled', failure_count: 100 });
    h.receiver.answerWith(path, 200);

    const res = await call(api, t.key).post(redeliverPath(sub.id, original.id));

    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('subscription_disabled');
    expect(await deliveriesOf(h, eventId, sub.id)).toHaveLength(1);
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ status: 'disabled', failure_count: 100 });
    expect(h.receiver.to(path)).toHaveLength(7);
    const log = await call(api, t.key).get(`/api/v1/webhooks/${sub.id}/deliveries`);
    expect(log.status).toBe(200);
    expect(log.body.data.deliveries.map((d: { id: string }) => d.id)).toEqual([original.id]);
  });

  it('changes nothing for another account: 404, no row, no request', async () => {
    const path = '/fixed/cross-account';
    const { sub, eventId, original } = await exhaustedDelivery(path);
    const stranger = await tenantWithKey(h);
    const strangerSub = await stranger.subscribe('/ok/stranger');

    const own = await call(api, stranger.key).post(redeliverPath(sub.id, original.id));
    const viaOwnSubscription = await call(api, stranger.key).post(redeliverPath(strangerSub.id, original.id));

    expect([own.status, viaOwnSubscription.status]).toEqual([404, 404]);
    expect(own.body.error.code).toBe('not_found');
    expect(await deliveriesOf(h, eventId, sub.id)).toHaveLength(1);
    expect(await h.db('deliveries').where({ subscription_id: strangerSub.id })).toHaveLength(0);
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ failure_count: 1 });
    expect(h.receiver.to(path)).toHaveLength(7);
  });
});

describe('redelivery while Redis is away', () => {
  it('is still stored and answered 202, and the dispatcher’s sweep sends it', async () => {
    const path = '/fixed/redis-away';
    const { t, sub, eventId, original } = await exhaustedDelivery(path);
    h.receiver.answerWith(path, 200);
    const queueRedis = createUnreachableRedis();
    const queues = createQueues(queueRedis, h.config.queuePrefix, 1);
    queues.fanout.on('error', () => undefined);
    queues.deliveries[0]!.on('error', () => undefined);
    const limiterRedis = createUnreachableRedis();
    const offline = createApp({
      config: testConfig({ DATABASE_URL: h.config.databaseUrl, QUEUE_PREFIX: h.config.queuePrefix }),
      db: h.db,
      redis: limiterRedis,
      queues,
      logger: createLogger('error', { silent: true }),
    });
    try {
      const started = Date.now();
      const res = await request(offline).post(redeliverPath(sub.id, original.id)).set(bearer(t.key));

      expect(res.status).toBe(202);
      expect(Date.now() - started).toBeLessThan(8_000);
      const redelivery = await waitForRow(h, res.body.data.delivery.id, (r) => r.status === 'delivered', 'the sweep to send the redelivery');
      expect(redelivery.redelivery_of).toBe(original.id);
      expect(h.receiver.to(path).map((r) => r.headers['x-service-delivery-id'])).toContain(redelivery.id);
      expect(await deliveriesOf(h, eventId, sub.id)).toHaveLength(2);
    } finally {
      await queues.close().catch(() => undefined);
      queueRedis.disconnect();
      limiterRedis.disconnect();
    }
  });
});

describe('fan-out beside redeliveries', () => {
  it('stays idempotent: running it again after a redelivery adds nothing', async () => {
    const path = '/fixed/fan-out-again';
    const { t, sub, eventId, original } = await exhaustedDelivery(path);
    h.receiver.answerWith(path, 200);
    const res = await call(api, t.key).post(redeliverPath(sub.id, original.id));
    await waitForRow(h, res.body.data.delivery.id, (r) => r.status === 'delivered', 'the redelivery to be delivered');

    const again = await Promise.all([fanOutCollecting(h.db, [eventId]), fanOutCollecting(h.db, [eventId])]);

    expect(again).toEqual([{ firstAttempts: [] }, { firstAttempts: [] }]);
    expect(await deliveriesOf(h, eventId, sub.id)).toHaveLength(2);
  });

  it('still makes one first delivery per subscription when runs race, and the database refuses a second', async () => {
    const t = await tenantWithKey(h);
    const sub = await t.subscribe('/ok/fan-out-race');
    const eventId = await fireEvent(h, t.site.id);

    await Promise.all([fanOutCollecting(h.db, [eventId]), fanOutCollecting(h.db, [eventId]), fanOutCollecting(h.db, [eventId])]);
    const rows = await deliveriesOf(h, eventId, sub.id);
    expect(rows).toHaveLength(1);
    await waitForRow(h, rows[0]!.id, (r) => r.status === 'delivered', 'delivered');

    const second = h.db('deliveries').insert({ id: 'dlv_second_first', event_id: eventId, subscription_id: sub.id, status: 'delivered' });
    await expect(second).rejects.toMatchObject({ code: '23505', constraint: 'deliveries_first_delivery_idx' });
    await waitFor(() => h.receiver.to('/ok/fan-out-race').length === 1);
    expect(h.receiver.to('/ok/fan-out-race')).toHaveLength(1);
  });
});

describe('redelivery beside the retention purge', () => {
  it('answers 404 and stores nothing when the original is purged while the redelivery waits for it', async () => {
    const { t, sub, original } = await exhaustedDelivery('/fail/purged-under-redelivery');
    // The purge's transaction has deleted the original but not committed yet.
    const purge = await h.db.transaction();
    await purge('delivery_attempts').where({ delivery_id: original.id }).del();
    await purge('deliveries').where({ id: original.id }).del();

    const answer = call(api, t.key).post(redeliverPath(sub.id, original.id)).then((res) => res);
    await waitFor(
      async () => {
        const { rows } = await h.db.raw(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO deliveries%redelivery_of%'`);
        return rows[0].n > 0;
      },
      10_000,
      'the redelivery to wait on the purge',
    );
    await purge.commit();
    const res = await answer;

    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('not_found');
    expect(await h.db('deliveries').where({ subscription_id: sub.id })).toEqual([]);
  });
});
