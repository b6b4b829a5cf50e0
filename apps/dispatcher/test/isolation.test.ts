import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun } from '@svc/core';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { producerOf, sendCanary } from './support/delivery-probe.js';

/**
 * Long enough that 30 fast deliveries finish first even on a loaded 2-core CI machine (3 s was
 * seen to fall short at a load average of 10); the story is the order, not the speed.
 */
const TIMEOUT_MS = 8_000;

async function publishRuns(h: Harness, siteId: string, count: number): Promise<string[]> {
  const published = await Promise.all(
    Array.from({ length: count }, (_, i) => completeAiMonitorRun(producerOf(h), { siteId, compositeScore: i })),
  );
  return published.map((p) => p.eventId);
}

async function countRows(h: Harness, query: ReturnType<Harness['db']>): Promise<number> {
  const row = await query.count({ n: '*' }).first();
  return Number(row?.n ?? 0);
}

/** Waits for `count` delivered deliveries of a subscription; on timeout, says what the attempts recorded. */
async function waitForDelivered(h: Harness, subscriptionId: string, count: number, timeoutMs: number): Promise<void> {
  try {
    await waitFor(
      async () => (await countRows(h, h.db('deliveries').where({ subscription_id: subscriptionId, status: 'delivered' }))) === count,
      timeoutMs,
      `${count} deliveries to ${subscriptionId}`,
    );
  } catch (error) {
    const outcomes = await h.db('deliveries as d')
      .leftJoin('delivery_attempts as a', 'a.delivery_id', 'd.id')
      .where('d.subscription_id', subscriptionId)
      .groupBy('d.status', 'a.error')
      .select('d.status', 'a.error', h.db.raw('count(*)::int AS n'));
    throw new Error(`${(error as Error).message}; deliveries by status and attempt error: ${JSON.stringify(outcomes)}`);
  }
}

/**
 * Fills the dispatchers' keep-alive pools with connections to the receiver first: with a test CA,
 * every new TLS connection builds a secure context on the event loop (~50 ms each on a busy
 * machine), which would otherwise eat the margins these tests measure.
 */
async function warmConnectionPools(h: Harness): Promise<void> {
  const warm = await seedTenant(h);
  const subs = [await warm.subscribe(`/ok/warm-a-${uniqueTag()}`), await warm.subscribe(`/ok/warm-b-${uniqueTag()}`)];
  await publishRuns(h, warm.site.id, 8);
  await waitFor(
    async () => (await countRows(h, h.db('deliveries').whereIn('subscription_id', subs.map((s) => s.id)).where({ status: 'delivered' }))) === 16,
    15_000,
    'the warm-up deliveries',
  );
}

describe('a hanging receiver does not hold back other subscriptions', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness({ WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS) });
    h.startDispatcher();
    await warmConnectionPools(h);
  });

  afterAll(async () => {
    await h.close();
  });

  it('delivers all 30 events to the fast subscription before the first attempt at the hanging one has even timed out', async () => {
    const tenant = await seedTenant(h);
    const tag = uniqueTag();
    const hang = await tenant.subscribe(`/hang/isolation-${tag}`);
    const ok = await tenant.subscribe(`/ok/isolation-${tag}`);

    const eventIds = await publishRuns(h, tenant.site.id, 30);
    await waitForDelivered(h, ok.id, 30, TIMEOUT_MS * 2);
    const hangAttemptsRecorded = await countRows(
      h,
      h.db('delivery_attempts as a').join('deliveries as d', 'd.id', 'a.delivery_id').where('d.subscription_id', hang.id),
    );
    const hangRequestsSoFar = h.receiver.to(`/hang/isolation-${tag}`).length;

    expect(hangAttemptsRecorded).toBe(0);
    expect(hangRequestsSoFar).toBeGreaterThan(0);
    expect(hangRequestsSoFar).toBeLessThanOrEqual(h.config.perSubscriptionConcurrency);
    const fast = h.receiver.to(`/ok/isolation-${tag}`);
    expect(fast).toHaveLength(30);
    const okDeliveries = await h.db('deliveries').where({ subscription_id: ok.id }).select('id', 'event_id', 'attempt_count');
    expect(okDeliveries.map((d) => d.event_id).sort()).toEqual([...eventIds].sort());
    expect(okDeliveries.every((d) => d.attempt_count === 1)).toBe(true);
    expect(new Set(fast.map((r) => r.headers['x-service-delivery-id']))).toEqual(new Set(okDeliveries.map((d) => d.id)));
  });
});

describe('several dispatchers on one database and one Redis', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness();
    h.startDispatcher();
    h.startDispatcher();
    await warmConnectionPools(h);
  });
  afterAll(async () => {
    await h.close();
  });

  it('share 60 events so that every delivery id is received exactly once', async () => {
    const tenant = await seedTenant(h);
    const path = `/ok/shared-${uniqueTag()}`;
    const sub = await tenant.subscribe(path);

    const eventIds = await publishRuns(h, tenant.site.id, 60);
    await waitForDelivered(h, sub.id, 60, 15_000);
    await sendCanary(h);

    const received = h.receiver.to(path);
    const deliveries = await h.db('deliveries').where({ subscription_id: sub.id }).select('id', 'event_id', 'attempt_count');
    expect(deliveries.map((d) => d.event_id).sort()).toEqual([...eventIds].sort());
    expect(received).toHaveLength(60);
    expect(received.map((r) => r.headers['x-service-delivery-id']).sort()).toEqual(deliveries.map((d) => d.id).sort());
    const attempts = await h.db('delivery_attempts').whereIn('delivery_id', deliveries.map((d) => d.id)).select('delivery_id', 'n', 'status_code');
    expect(attempts).toHaveLength(60);
    expect(attempts.every((a) => a.n === 1 && a.status_code === 200)).toBe(true);
  });
});
