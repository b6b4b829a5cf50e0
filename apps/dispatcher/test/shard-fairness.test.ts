import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, shardOf } from '@svc/core';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { producerOf } from './support/delivery-probe.js';

const SHARDS = 3;
/** The dispatcher's slots: 10 shared, 2 held back for accounts with nothing in flight, 10 waiting. */
const CONCURRENCY = 10;
/** Each of the hanging account's attempts ends only here; the healthy account's must land well before. */
const HANG_TIMEOUT_MS = 12_000;

async function count(query: ReturnType<Harness['db']>): Promise<number> {
  const row = await query.count<{ n: string }[]>({ n: '*' });
  return Number(row[0]?.n ?? 0);
}

/** Subscriptions of a tenant at `path(i)` until every shard holds at least `perShard` of them. */
async function subscribeOnEveryShard(tenant: Awaited<ReturnType<typeof seedTenant>>, path: (i: number) => string, perShard: number) {
  const subs: Array<{ id: string }> = [];
  const short = () => Array.from({ length: SHARDS }, (_, k) => subs.filter((sub) => shardOf(sub.id, SHARDS) === k).length).some((n) => n < perShard);
  for (let i = 0; short() && i < 60; i++) subs.push(await tenant.subscribe(path(i)));
  return subs;
}

describe(`one account’s hanging receivers beside a healthy account, the delivery queue in ${SHARDS} shards`, () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness({
      DISPATCHER_QUEUE_SHARDS: String(SHARDS),
      DISPATCHER_CONCURRENCY: String(CONCURRENCY),
      WEBHOOK_TIMEOUT_MS: String(HANG_TIMEOUT_MS),
      WEBHOOK_RETRY_DELAYS_MS: '3600000,3600000,3600000,3600000,3600000,3600000',
    });
    h.startDispatcher();
  });
  afterAll(async () => {
    await h.close();
  });

  it('delivers the healthy account’s first attempts on every shard while the other holds every slot it may, then makes every one of the other’s attempts', async () => {
    const tag = uniqueTag();
    const noisy = await seedTenant(h);
    const noisySubs = await subscribeOnEveryShard(noisy, (i) => `/hang/shards-noisy-${tag}-${i}`, 2);
    // The healthy account is set up first, so only its two events fall inside the hanging attempts' timeout.
    const quiet = await seedTenant(h);
    const quietSubs = await subscribeOnEveryShard(quiet, (i) => `/ok/shards-quiet-${tag}-${i}`, 1);
    // 4 events to each subscription: more attempts than the slots and the waiting line together, on every shard.
    const noisyEvents = 4;
    await Promise.all(Array.from({ length: noisyEvents }, (_, i) => completeAiMonitorRun(producerOf(h), { siteId: noisy.site.id, compositeScore: i })));
    const noisyAttempts = noisySubs.length * noisyEvents;
    expect(noisyAttempts).toBeGreaterThan(2 * CONCURRENCY);
    await waitFor(() => h.receiver.to(`/hang/shards-noisy-${tag}`).length >= CONCURRENCY, 10_000, 'the noisy account to hold every shared slot');

    await Promise.all(Array.from({ length: 2 }, (_, i) => completeAiMonitorRun(producerOf(h), { siteId: quiet.site.id, compositeScore: i })));
    const quietIds = quietSubs.map((sub) => sub.id);
    await waitFor(
      async () => (await count(h.db('deliveries').whereIn('subscription_id', quietIds).where({ status: 'delivered' }))) === 2 * quietSubs.length,
      10_000,
      'the quiet account’s deliveries',
    );

    // Bounded by what the system records: when the quiet account's deliveries, on every shard, were
    // all recorded, no attempt of the noisy account had ended (each ends only at its timeout).
    const noisyIds = noisySubs.map((sub) => sub.id);
    const noisyAttemptsEnded = () => count(h.db('delivery_attempts as a').join('deliveries as d', 'd.id', 'a.delivery_id').whereIn('d.subscription_id', noisyIds));
    expect(await noisyAttemptsEnded()).toBe(0);
    expect(new Set(quietIds.map((id) => shardOf(id, SHARDS))).size).toBe(SHARDS);
    expect(h.receiver.to(`/ok/shards-quiet-${tag}`)).toHaveLength(2 * quietSubs.length);

    // The noisy account is not starved in turn: each of its first attempts is made (and times out), once.
    await waitFor(async () => (await noisyAttemptsEnded()) === noisyAttempts, 120_000, 'every attempt of the noisy account');
    expect(h.receiver.to(`/hang/shards-noisy-${tag}`)).toHaveLength(noisyAttempts);
  }, 180_000);
});
