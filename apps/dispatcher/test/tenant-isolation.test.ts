import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun } from '@svc/core';
import { markSubscriptionDeleting } from '@svc/core/operator';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { producerOf } from './support/delivery-probe.js';

/** Long enough that a healthy account's deliveries finish well before it even on a loaded CI machine. */
const HANG_TIMEOUT_MS = 5_000;

async function count(h: Harness, query: ReturnType<Harness['db']>): Promise<number> {
  const row = await query.count<{ n: string }[]>({ n: '*' });
  return Number(row[0]?.n ?? 0);
}

async function publish(h: Harness, siteId: string, events: number): Promise<void> {
  await Promise.all(Array.from({ length: events }, (_, i) => completeAiMonitorRun(producerOf(h), { siteId, compositeScore: i })));
}

describe('one account’s hanging receivers beside a healthy account', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness({ WEBHOOK_TIMEOUT_MS: String(HANG_TIMEOUT_MS), WEBHOOK_RETRY_DELAYS_MS: '3600000,3600000,3600000,3600000,3600000,3600000' });
    h.startDispatcher();
  });
  afterAll(async () => {
    await h.close();
  });

  it('delivers the healthy account’s first attempts while the other holds every slot it may, then makes every one of the other’s attempts', async () => {
    const tag = uniqueTag();
    const noisy = await seedTenant(h);
    const noisySubs = await Promise.all(Array.from({ length: 12 }, (_, i) => noisy.subscribe(`/hang/noisy-${tag}-${i}`)));
    // 12 subscriptions × 10 events: 120 attempts due at once, more than the dispatcher's 100 slots.
    await publish(h, noisy.site.id, 10);
    await waitFor(() => h.receiver.to(`/hang/noisy-${tag}`).length >= 80, 20_000, 'the noisy account’s attempts on the wire');

    const quiet = await seedTenant(h);
    const quietSub = await quiet.subscribe(`/ok/quiet-${tag}`);
    await publish(h, quiet.site.id, 5);
    await waitFor(
      async () => (await count(h, h.db('deliveries').where({ subscription_id: quietSub.id, status: 'delivered' }))) === 5,
      20_000,
      'the quiet account’s deliveries',
    );

    // Bounded by what the system records: when the quiet account's deliveries were all recorded,
    // no attempt of the noisy account had ended (each ends only at its timeout).
    const noisyIds = noisySubs.map((s) => s.id);
    const noisyAttemptsEnded = await count(h, h.db('delivery_attempts as a').join('deliveries as d', 'd.id', 'a.delivery_id').whereIn('d.subscription_id', noisyIds));
    expect(noisyAttemptsEnded).toBe(0);
    expect(h.receiver.to(`/ok/quiet-${tag}`)).toHaveLength(5);

    // The noisy account is not starved in turn: each of its 120 first attempts is made (and times out).
    await waitFor(
      async () => (await count(h, h.db('delivery_attempts as a').join('deliveries as d', 'd.id', 'a.delivery_id').whereIn('d.subscription_id', noisyIds))) === 120,
      45_000,
      'every attempt of the noisy account',
    );
    expect(h.receiver.to(`/hang/noisy-${tag}`)).toHaveLength(120);
  });
});

describe('a subscription row held by another account’s revocation', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  it('delivers every other account’s events while the DELETE cascading its history is open, and sends none of the revoked one’s', async () => {
    const tag = uniqueTag();
    const revoking = await seedTenant(h);
    const revokedSub = await revoking.subscribe(`/ok/revoked-${tag}`);
    const other = await seedTenant(h);
    const otherSub = await other.subscribe(`/ok/other-${tag}`);
    // Both accounts' first attempts are queued together (no dispatcher runs yet), so they share claim batches.
    await Promise.all(
      Array.from({ length: 10 }, (_, i) => [
        completeAiMonitorRun(producerOf(h), { siteId: revoking.site.id, compositeScore: i }),
        completeAiMonitorRun(producerOf(h), { siteId: other.site.id, compositeScore: i }),
      ]).flat(),
    );

    // The revocation's last step, as the API runs it: hidden first, then a DELETE whose transaction stays open.
    await markSubscriptionDeleting(h.db, revoking.accountId, revokedSub.id);
    const tx = await h.db.transaction();
    try {
      await tx('webhook_subscriptions').where({ id: revokedSub.id }).del();
      h.startDispatcher();
      await waitFor(
        async () => (await count(h, h.db('deliveries').where({ subscription_id: otherSub.id, status: 'delivered' }))) === 10,
        15_000,
        'the other account’s deliveries while the row is held',
      );
      expect(h.receiver.to(`/ok/other-${tag}`)).toHaveLength(10);
      await tx.commit();
    } catch (error) {
      await tx.rollback();
      throw error;
    }

    await waitFor(async () => (await count(h, h.db('deliveries').where({ subscription_id: revokedSub.id }))) === 0, 5_000, 'the revoked history gone');
    expect(h.receiver.to(`/ok/revoked-${tag}`)).toHaveLength(0);
  });
});
