import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, createDb, type Db } from '@svc/core';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { producerOf } from './support/delivery-probe.js';

const EVENTS = 1200;
const DISPATCHERS = 3;

/** Deadlocks Postgres has detected in this test's own database so far. */
async function deadlocks(h: Harness): Promise<number> {
  const row = await h.db('pg_stat_database').where({ datname: h.db.raw('current_database()') }).first<{ deadlocks: string }>('deadlocks');
  return Number(row?.deadlocks ?? 0);
}

describe('three dispatchers on one database, with fan-out and retries at once', () => {
  let h: Harness;
  const pools: Db[] = [];

  beforeAll(async () => {
    h = await createHarness();
    for (let i = 0; i < DISPATCHERS; i += 1) {
      // A pool each, as three processes would have: their statements truly run side by side.
      const db = createDb(h.config.databaseUrl, { poolMax: 10 });
      pools.push(db);
      h.startDispatcher({}, { db });
    }
  });
  afterAll(async () => {
    await h.close();
    await Promise.all(pools.map((db) => db.destroy()));
  });

  it('records every outcome without a deadlock and sends no delivered attempt twice', async () => {
    const tenant = await seedTenant(h);
    const tag = uniqueTag();
    const steady = [await tenant.subscribe(`/ok/contention-a-${tag}`), await tenant.subscribe(`/ok/contention-b-${tag}`)];
    // Answers 503 to the first arrival of each delivery, 200 to the second: every delivery is retried once.
    const flaky = await tenant.subscribe(`/flaky/1/contention-${tag}`);
    const before = await deadlocks(h);

    // Published in waves, as producers in several processes would: fan-outs, first attempts and
    // retries of earlier events all run at once across the three dispatchers.
    for (let wave = 0; wave < 10; wave += 1) {
      await Promise.all(
        Array.from({ length: EVENTS / 10 }, (_, i) => completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: (wave * 30 + i) % 100 })),
      );
    }

    const subscriptionIds = [...steady, flaky].map((s) => s.id);
    await waitFor(
      async () => {
        const row = await h.db('deliveries').whereIn('subscription_id', subscriptionIds).where({ status: 'delivered' }).count<{ n: string }[]>({ n: '*' });
        return Number(row[0]?.n) === EVENTS * 3;
      },
      90_000,
      'every delivery delivered',
    );

    const arrivals = new Map<string, number>();
    for (const request of h.receiver.requests) {
      if (!request.path.includes(tag)) continue;
      const id = String(request.headers['x-service-delivery-id']);
      arrivals.set(id, (arrivals.get(id) ?? 0) + 1);
    }
    const steadyIds = new Set(
      (await h.db('deliveries').whereIn('subscription_id', steady.map((s) => s.id)).select<{ id: string }[]>('id')).map((row) => row.id),
    );
    const sentAgainAfterDelivered = [...arrivals].filter(([id, n]) => n > (steadyIds.has(id) ? 1 : 2));
    expect(sentAgainAfterDelivered).toEqual([]);
    expect(arrivals.size).toBe(EVENTS * 3);
    expect((await deadlocks(h)) - before).toBe(0);
  });
});
