import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { insertEvent } from '@svc/core/dispatcher';
import { uniqueTag } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { waitForDelivery } from './support/delivery-probe.js';

const AN_HOUR_MS = 3_600_000;

/** Every timer but Date stays real: only the producer's wall clock is wrong. */
const ONLY_DATE: Parameters<typeof jest.useFakeTimers>[0] = {
  doNotFake: [
    'hrtime',
    'nextTick',
    'performance',
    'queueMicrotask',
    'requestAnimationFrame',
    'cancelAnimationFrame',
    'requestIdleCallback',
    'cancelIdleCallback',
    'setImmediate',
    'clearImmediate',
    'setInterval',
    'clearInterval',
    'setTimeout',
    'clearTimeout',
  ],
};

/** Issue 8, instance 5: the sweep must not compare a producer's clock with the database's. */
describe('an event recorded by a producer whose clock runs an hour ahead, its fan-out job lost', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    jest.useRealTimers();
    await h.close();
  });

  it('is dated by the database and fanned out by the sweep within seconds, not an hour later', async () => {
    const tenant = await seedTenant(h);
    const path = `/ok/skewed-${uniqueTag()}`;
    const sub = await tenant.subscribe(path);
    const scan = await tenant.newScan();

    jest.useFakeTimers({ ...ONLY_DATE, now: Date.now() + AN_HOUR_MS });
    let event;
    try {
      // As a producer would, but its job never reaches Redis: only the sweep can find it.
      event = await h.db.transaction((tx) =>
        insertEvent(tx, tenant.accountId, 'scan.completed', { scanId: scan.id, siteId: tenant.site.id, domain: tenant.site.domain, score: 3 }),
      );
    } finally {
      jest.useRealTimers();
    }
    const row = await h.db('events').where({ id: event.id }).first();
    const skew = await h.db.raw(`SELECT (EXTRACT(EPOCH FROM (clock_timestamp() - ?::timestamptz)) * 1000)::float8 AS ms`, [row.created_at]);
    h.startDispatcher();

    const delivery = await waitForDelivery(h, event.id, sub.id, (d) => d.status === 'delivered', 'the sweep to fan out and deliver the event', 15_000);

    expect(Math.abs(skew.rows[0].ms as number)).toBeLessThan(60_000);
    expect(JSON.parse(h.receiver.to(path)[0]!.body.toString('utf8')).timestamp).toBe((row.created_at as Date).toISOString());
    expect(event.createdAt.toISOString()).toBe((row.created_at as Date).toISOString());
    expect(delivery.attempt_count).toBe(1);
  });
});
