import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, createDb, type Db, type DbOrTx } from '@svc/core';
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
    // A receiver in this same process answers late when the machine is loaded: a generous timeout
    // keeps the attempts this story is about from timing out for that alone.
    h = await createHarness({ WEBHOOK_TIMEOUT_MS: '10000' });
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

  it('records every outcome without a deadlock and sends no attempt whose outcome was known again', async () => {
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
    const attempts = await h.db('delivery_attempts as a')
      .join('deliveries as d', 'd.id', 'a.delivery_id')
      .whereIn('d.subscription_id', subscriptionIds)
      .orderBy(['a.delivery_id', 'a.n'])
      .select<{ delivery_id: string; n: number; status_code: number | null; error: string | null }[]>('a.delivery_id', 'a.n', 'a.status_code', 'a.error');
    const recorded = new Map<string, typeof attempts>();
    for (const attempt of attempts) recorded.set(attempt.delivery_id, [...(recorded.get(attempt.delivery_id) ?? []), attempt]);
    // Each POST a receiver got is a recorded attempt: an attempt sent again because its outcome was
    // not recorded (a record lost to a deadlock, then the lease ran out) shows as more arrivals than
    // attempts. The other way round is a loaded machine, not a defect: an attempt that timed out or
    // lost its connection before the receiver read it is recorded with its error and never arrived.
    const sentWithoutARecord = [...arrivals]
      .filter(([id, n]) => n > (recorded.get(id)?.length ?? 0))
      .map(([id, n]) => ({ id, arrivals: n, recorded: recorded.get(id)?.map((a) => `${a.n}:${a.status_code ?? a.error}`) ?? [] }));
    expect(sentWithoutARecord).toEqual([]);
    const recordedButNeverArrivedAnswered = [...recorded]
      .filter(([id, list]) => list.filter((a) => a.status_code !== null).length > (arrivals.get(id) ?? 0))
      .map(([id, list]) => ({ id, arrivals: arrivals.get(id) ?? 0, recorded: list.map((a) => `${a.n}:${a.status_code ?? a.error}`) }));
    expect(recordedButNeverArrivedAnswered).toEqual([]);
    const deliveredTwice = [...recorded].filter(([, list]) => list.filter((a) => a.status_code !== null && a.status_code < 300).length !== 1);
    expect(deliveredTwice).toEqual([]);
    expect(arrivals.size).toBe(EVENTS * 3);
    expect((await deadlocks(h)) - before).toBe(0);
  });
});

describe('an outcome whose record Postgres fails for a moment', () => {
  let h: Harness;
  let db: Db;

  beforeAll(async () => {
    h = await createHarness();
    // The dispatcher's own pool waits 200 ms at most for a row lock: its record fails while the test holds the row.
    db = createDb(h.config.databaseUrl, { poolMax: 5, bounds: { statementTimeoutMs: 30_000, lockTimeoutMs: 200 } });
  });
  afterAll(async () => {
    await h.close();
    await db.destroy();
  });

  it('is recorded by retrying the record with the same answer, and the receiver gets the delivery once', async () => {
    const tag = uniqueTag();
    const holds: Array<Promise<void>> = [];
    // The receiver answers 200 only once it holds the delivery's row (another transaction, as a
    // revocation or a purge would), and lets it go a second later: the first records fail with a lock timeout.
    h.receiver.handle(`/held-${tag}`, (req, res) => {
      const deliveryId = String(req.headers['x-service-delivery-id']);
      holds.push(
        h.db.transaction(async (tx: DbOrTx) => {
          await tx('deliveries').where({ id: deliveryId }).forUpdate().first('id');
          res.writeHead(200).end('ok');
          await new Promise((resolve) => setTimeout(resolve, 1_000));
        }),
      );
    });
    const dispatcher = h.startDispatcher({}, { db });
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe(`/held-${tag}`);
    const { eventId } = await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: 50 });

    const delivered = await waitFor(
      () => h.db('deliveries').where({ event_id: eventId, subscription_id: sub.id, status: 'delivered' }).first<{ id: string; attempt_count: number }>('id', 'attempt_count'),
      20_000,
      'the delivery recorded delivered',
    );
    await Promise.all(holds);
    expect(delivered.attempt_count).toBe(1);
    expect(h.receiver.to(`/held-${tag}`)).toHaveLength(1);
    expect(await h.db('delivery_attempts').where({ delivery_id: delivered.id }).select('n', 'status_code')).toEqual([{ n: 1, status_code: 200 }]);
    const metrics = await dispatcher.metrics.registry.getSingleMetricAsString('svc_dispatcher_record_retries_total');
    expect(Number(/svc_dispatcher_record_retries_total (\d+)/.exec(metrics)?.[1])).toBeGreaterThan(0);
  });
});

describe('a dispatcher whose claims get no answer from Postgres', () => {
  let h: Harness;
  let db: Db;

  beforeAll(async () => {
    h = await createHarness();
    // One connection: the test's open transaction takes it, and every claim waits behind it.
    db = createDb(h.config.databaseUrl, { poolMax: 1 });
  });
  afterAll(async () => {
    await h.close();
    await db.destroy();
  });

  it('says it is not ready, naming the stalled claims, until they are answered again', async () => {
    const dispatcher = h.startDispatcher({}, { db, claimStallMs: 500 });
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe(`/ok/stall-${uniqueTag()}`);
    await waitFor(async () => (await dispatcher.readiness()).status === 'ready', 10_000, 'ready at first');

    const holder = await db.transaction();
    let stalled: Awaited<ReturnType<typeof dispatcher.readiness>>;
    try {
      const { eventId } = await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: 1 });
      stalled = await waitFor(async () => {
        const readiness = await dispatcher.readiness();
        return readiness.status === 'not_ready' ? readiness : undefined;
      }, 10_000, 'the stalled claims reported');
      expect(await h.db('deliveries').where({ event_id: eventId }).first('status')).toEqual({ status: 'pending' });
    } finally {
      await holder.rollback();
    }
    expect(stalled.checks.claims).toBe('stalled');
    expect(stalled.reasons?.join(' ')).toMatch(/deliveries make no progress/);

    await waitFor(async () => (await h.db('deliveries').where({ subscription_id: sub.id, status: 'delivered' }).first('id')) !== undefined, 15_000, 'the delivery once Postgres answers');
    expect((await dispatcher.readiness()).checks.claims).toBe('progressing');
  });
});
