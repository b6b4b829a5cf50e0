import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeScan, enqueueDeliveries, newId } from '@svc/core';
import { listSubscriptionsAsJsonArray } from '@svc/core/operator';
import { insertEvent } from '@svc/core/dispatcher';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import {
  attemptsOf,
  producerOf,
  sendCanary,
  subscriptionRow,
  waitForDelivery,
} from './support/delivery-probe.js';

const QUEUED_FOR_LATER_MS = 3_600_000;

/**
 * A pending delivery of `subscriptionId` for a new event of the account, due only in an hour, with
 * its job delayed as long: what a delivery "queued for later" looks like. The event is marked
 * fanned out so no sweep or fan-out hands it a first attempt of its own.
 */
async function queueDeliveryForLater(h: Harness, tenant: Awaited<ReturnType<typeof seedTenant>>, subscriptionId: string, delayMs: number) {
  const scan = await tenant.newScan();
  const deliveryId = newId('dlv');
  await h.db.transaction(async (tx) => {
    const event = await insertEvent(tx, tenant.accountId, 'scan.completed', {
      scanId: scan.id,
      siteId: tenant.site.id,
      domain: tenant.site.domain,
      score: 1,
    });
    await tx('events').where({ id: event.id }).update({ fanned_out_at: tx.fn.now(3) });
    await tx('deliveries').insert({
      id: deliveryId,
      event_id: event.id,
      subscription_id: subscriptionId,
      status: 'pending',
      attempt_count: 0,
      next_attempt_at: tx.raw('clock_timestamp() + make_interval(secs => ?)', [delayMs / 1000]),
    });
  });
  await enqueueDeliveries(h.queues, [{ deliveryId, subscriptionId, attempt: 1, delayMs }]);
  return deliveryId;
}

describe('auto-disabling a subscription at failureCount 100 (spec §3.2)', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness();
    h.startDispatcher();
  });
  afterAll(async () => {
    await h.close();
  });

  it('disables the subscription on its 100th permanent failure, fails its queued deliveries unsent, gives it no new ones, keeps listing it and is untouched by a success of another subscription', async () => {
    const tenant = await seedTenant(h);
    const failPath = `/fail/disable-${uniqueTag()}`;
    const okPath = `/ok/neighbour-${uniqueTag()}`;
    const failing = await tenant.subscribe(failPath);
    const neighbour = await tenant.subscribe(okPath);
    await h.db('webhook_subscriptions').where({ id: failing.id }).update({ failure_count: 99 });
    const queuedId = await queueDeliveryForLater(h, tenant, failing.id, QUEUED_FOR_LATER_MS);
    expect(await (await h.queues.deliveries[0]!.getJob(`${queuedId}-1`))?.isDelayed()).toBe(true);

    const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 9 });
    const exhausted = await waitForDelivery(h, eventId, failing.id, (row) => row.status !== 'pending', 'the 100th failure');

    expect(exhausted).toMatchObject({ status: 'failed', attempt_count: 7, failure_reason: 'attempts exhausted' });
    expect(h.receiver.to(failPath)).toHaveLength(7);
    const disabled = await subscriptionRow(h, failing.id);
    expect(disabled).toMatchObject({ status: 'disabled', failure_count: 100, last_delivery_at: null });
    expect(disabled.disabled_at).toBeInstanceOf(Date);

    const queued = await h.db('deliveries').where({ id: queuedId }).first();
    expect(queued).toMatchObject({ status: 'failed', failure_reason: 'subscription disabled', attempt_count: 0, next_attempt_at: null });
    expect(queued.finished_at).toBeInstanceOf(Date);
    expect(await attemptsOf(h, queuedId)).toEqual([]);
    expect(h.receiver.requests.filter((r) => r.headers['x-service-delivery-id'] === queuedId)).toEqual([]);
    expect(await h.queues.deliveries[0]!.getJob(`${queuedId}-1`)).toBeUndefined();

    const later = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 10 });
    await waitForDelivery(h, later.eventId, neighbour.id, (row) => row.status === 'delivered', 'the later event to reach the other subscription');
    expect(await h.db('deliveries').where({ event_id: later.eventId, subscription_id: failing.id })).toEqual([]);
    expect(h.receiver.to(failPath)).toHaveLength(7);

    const listed = JSON.parse(await listSubscriptionsAsJsonArray(h.db, tenant.accountId)) as Array<{ id: string; status: string; failureCount: number; url: string; lastDeliveryAt: string | null }>;
    expect(listed.find((s) => s.id === failing.id)).toMatchObject({ status: 'disabled', failureCount: 100, lastDeliveryAt: null, url: h.receiver.url(failPath) });
    expect(listed.find((s) => s.id === neighbour.id)).toMatchObject({ status: 'active', failureCount: 0 });
    expect(await subscriptionRow(h, failing.id)).toEqual(disabled);
  });

  it('fails unsent a delivery of a disabled subscription whose job runs anyway', async () => {
    const tenant = await seedTenant(h);
    const path = `/ok/disabled-straggler-${uniqueTag()}`;
    const sub = await tenant.subscribe(path);
    await h.db('webhook_subscriptions').where({ id: sub.id }).update({ status: 'disabled', failure_count: 100, disabled_at: h.db.fn.now(3) });
    const deliveryId = await queueDeliveryForLater(h, tenant, sub.id, 0);

    const straggler = await waitFor(
      async () => {
        const row = await h.db('deliveries').where({ id: deliveryId }).first();
        return row.status !== 'pending' && row;
      },
      10_000,
      'the straggler to be failed',
    );
    await sendCanary(h);

    expect(straggler).toMatchObject({ status: 'failed', failure_reason: 'subscription disabled', attempt_count: 0 });
    expect(await attemptsOf(h, deliveryId)).toEqual([]);
    expect(h.receiver.to(path)).toEqual([]);
    expect(await subscriptionRow(h, sub.id)).toMatchObject({ status: 'disabled', failure_count: 100 });
  });
});
