import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, deliveryJobId } from '@svc/core';
import { revokeSubscription } from '@svc/core/operator';
import { waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';

let h: Harness;

beforeAll(async () => {
  h = await createHarness({ WEBHOOK_RETRY_DELAYS_MS: '150,150,150,150,150,150' });
  h.startDispatcher();
});
afterAll(async () => {
  await h.close();
});

const revoke = (accountId: string, id: string) =>
  revokeSubscription({ db: h.db, queues: h.queues }, accountId, id);

describe('revoking a subscription', () => {
  it('cancels its queued retries and deletes its history: nothing reaches the receiver after it returns', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe('/fail/revoked', ['ai_check.completed']);
    await completeAiMonitorRun({ db: h.db, queues: h.queues }, { siteId: tenant.site.id, compositeScore: 3 });
    await waitFor(() => h.receiver.to('/fail/revoked').length >= 1);
    const delivery = await waitFor(async () => (await h.db('deliveries').where({ subscription_id: sub.id, attempt_count: 1 }).first()) ?? false);
    // The retry's job is queued just after the outcome commits: wait for it, so that revoking has a
    // queued retry to cancel. (A job queued after the revocation finds no delivery and sends
    // nothing: the canary below covers that order.)
    await waitFor(async () => (await h.queues.deliveries[0]!.getJob(deliveryJobId(delivery.id, 2))) ?? false);

    await revoke(tenant.accountId, sub.id);
    const sentBeforeReturn = h.receiver.to('/fail/revoked').length;

    expect(await h.db('webhook_subscriptions').where({ id: sub.id }).first()).toBeUndefined();
    expect(await h.db('deliveries').where({ subscription_id: sub.id })).toHaveLength(0);
    expect(await h.db('delivery_attempts').where({ delivery_id: delivery.id })).toHaveLength(0);
    expect(await h.queues.deliveries[0]!.getJob(deliveryJobId(delivery.id, 2))).toBeUndefined();
    // A canary on the same schedule needs three more retry delays; by then a surviving retry would have fired.
    const canary = await seedTenant(h);
    await canary.subscribe('/flaky/3/canary', ['ai_check.completed']);
    await completeAiMonitorRun({ db: h.db, queues: h.queues }, { siteId: canary.site.id, compositeScore: 4 });
    await waitFor(() => h.receiver.to('/flaky/3/canary').length === 4, 20_000, 'the canary to be delivered');
    expect(h.receiver.to('/fail/revoked')).toHaveLength(sentBeforeReturn);
  });

  it('waits for an attempt already on the wire, so it returns only after the receiver has answered it', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe('/slow/500/revoke-in-flight', ['ai_check.completed']);
    await completeAiMonitorRun({ db: h.db, queues: h.queues }, { siteId: tenant.site.id, compositeScore: 5 });
    await waitFor(async () => (await h.db('deliveries').where({ subscription_id: sub.id }).whereNotNull('locked_until').first()) ?? false);

    await revoke(tenant.accountId, sub.id);

    expect(h.receiver.to('/slow/500/revoke-in-flight')).toHaveLength(1);
    expect(await h.db('webhook_subscriptions').where({ id: sub.id }).first()).toBeUndefined();
  });

  it('refuses another account’s subscription with not_found and leaves it untouched', async () => {
    const owner = await seedTenant(h);
    const stranger = await seedTenant(h);
    const sub = await owner.subscribe('/ok/not-yours');

    await expect(revoke(stranger.accountId, sub.id)).rejects.toMatchObject({ code: 'not_found' });

    expect(await h.db('webhook_subscriptions').where({ id: sub.id }).first()).toMatchObject({ status: 'active' });
  });
});
