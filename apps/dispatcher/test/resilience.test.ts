import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, deliveryJobId, type Db } from '@svc/core';
import { waitFor } from '@svc/core/testing';
import { spawnDispatcher } from './support/child-dispatcher.js';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import type { ReceivedRequest } from './support/receiver.js';

const BURST = 120;
let h: Harness;

beforeEach(async () => {
  h = await createHarness({ WEBHOOK_RETRY_DELAYS_MS: '100,100,100,100,100,100' });
});
afterEach(async () => {
  await h.close();
});

async function publishBurst(siteId: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    ids.push((await completeAiMonitorRun({ db: h.db, queues: h.queues }, { siteId, compositeScore: i })).eventId);
  }
  return ids;
}

/** Every delivery of the events arrived at least once, each copy with its delivery's own stored bytes. */
async function expectEveryDeliveryArrived(db: Db, eventIds: string[], received: ReceivedRequest[]): Promise<void> {
  const rows = await db('deliveries as d').join('events as e', 'e.id', 'd.event_id').whereIn('d.event_id', eventIds).select('d.id', 'd.status', 'e.body');
  expect(rows).toHaveLength(eventIds.length);
  const byId = new Map(rows.map((row) => [row.id as string, row.body as string]));
  const seen = new Set<string>();
  for (const request of received) {
    const id = String(request.headers['x-service-delivery-id']);
    expect(byId.has(id)).toBe(true);
    expect(request.body.toString('utf8')).toBe(byId.get(id));
    seen.add(id);
  }
  expect(seen.size).toBe(eventIds.length);
  expect(rows.every((row) => row.status === 'delivered')).toBe(true);
}

describe('nothing is lost', () => {
  it('delivers every event of a burst at least once after its dispatcher is SIGKILLed mid-burst and another starts', async () => {
    const tenant = await seedTenant(h);
    await tenant.subscribe('/slow/20/kill', ['ai_check.completed']);
    const first = spawnDispatcher(h);
    const eventIds = await publishBurst(tenant.site.id, BURST);
    await waitFor(() => h.receiver.to('/slow/20/kill').length >= 20, 30_000, 'the burst to be under way');

    first.child.kill('SIGKILL');
    await first.exited;
    const cutAt = new Set(h.receiver.to('/slow/20/kill').map((r) => r.headers['x-service-delivery-id'])).size;
    h.startDispatcher();

    await waitFor(
      async () => (await h.db('deliveries').whereIn('event_id', eventIds).where({ status: 'delivered' }).count({ n: '*' }))[0]!.n == BURST,
      90_000,
      'every delivery to be delivered after the restart',
    );
    expect(cutAt).toBeLessThan(BURST);
    await expectEveryDeliveryArrived(h.db, eventIds, h.receiver.to('/slow/20/kill'));
  });

  it('delivers every event of a burst, retries included, after Redis loses all its queue keys mid-burst', async () => {
    const tenant = await seedTenant(h);
    await tenant.subscribe('/slow/10/flush', ['ai_check.completed']);
    await tenant.subscribe('/flaky/2/flush', ['ai_check.completed']);
    h.startDispatcher();
    const eventIds = await publishBurst(tenant.site.id, BURST / 2);
    await waitFor(() => h.receiver.to('/slow/10/flush').length >= 15, 30_000, 'the burst to be under way');

    const keys = await h.queueKeys();
    expect(keys.length).toBeGreaterThan(0);
    await h.redis.unlink(...keys);

    await waitFor(
      async () => (await h.db('deliveries').whereIn('event_id', eventIds).where({ status: 'delivered' }).count({ n: '*' }))[0]!.n == BURST,
      60_000,
      'every delivery to be delivered after the flush',
    );
    const rows = await h.db('deliveries').whereIn('event_id', eventIds);
    expect(rows).toHaveLength(BURST);
    const allIds = new Set(rows.map((row) => row.id));
    const received = [...h.receiver.to('/slow/10/flush'), ...h.receiver.to('/flaky/2/flush')];
    for (const request of received) expect(allIds.has(String(request.headers['x-service-delivery-id']))).toBe(true);
    expect(new Set(received.filter((r) => r.path.startsWith('/slow')).map((r) => r.headers['x-service-delivery-id'])).size).toBe(BURST / 2);
    const flaky = h.receiver.to('/flaky/2/flush');
    const perDelivery = new Map<string, Set<string>>();
    for (const request of flaky) {
      const id = String(request.headers['x-service-delivery-id']);
      perDelivery.set(id, (perDelivery.get(id) ?? new Set()).add(request.body.toString('utf8')));
    }
    expect(perDelivery.size).toBe(BURST / 2);
    for (const bodies of perDelivery.values()) expect(bodies.size).toBe(1);
  });
});

describe('partial loss of Redis state', () => {
  it('re-queues a retry whose job hash survived without its delayed entry (a partial flush or an eviction)', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe('/flaky/1/orphan', ['ai_check.completed']);
    h.startDispatcher();
    await completeAiMonitorRun({ db: h.db, queues: h.queues }, { siteId: tenant.site.id, compositeScore: 9 });
    const delivery = await waitFor(async () => (await h.db('deliveries').where({ subscription_id: sub.id, attempt_count: 1 }).first()) ?? false);
    await waitFor(async () => (await h.queues.deliveries[0]!.getJobState(deliveryJobId(delivery.id, 2))) === 'delayed');

    await h.redis.del(h.queues.deliveries[0]!.toKey('delayed'));

    expect(await h.queues.deliveries[0]!.getJobState(deliveryJobId(delivery.id, 2))).toBe('unknown');
    const settled = await waitFor(
      async () => {
        const row = await h.db('deliveries').where({ id: delivery.id }).first();
        return row.status === 'delivered' && row;
      },
      20_000,
      'the orphaned retry to be re-queued and delivered',
    );
    expect(settled.attempt_count).toBe(2);
    expect(h.receiver.to('/flaky/1/orphan')).toHaveLength(2);
  });
});

describe('graceful shutdown', () => {
  it('lets an attempt in flight finish and records it before stop() resolves', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe('/slow/400/stop', ['ai_check.completed']);
    const dispatcher = h.startDispatcher();
    await completeAiMonitorRun({ db: h.db, queues: h.queues }, { siteId: tenant.site.id, compositeScore: 1 });
    await waitFor(async () => (await h.db('deliveries').where({ subscription_id: sub.id }).whereNotNull('locked_until').first()) ?? false);

    await dispatcher.stop();

    const delivery = await h.db('deliveries').where({ subscription_id: sub.id }).first();
    expect(delivery.status).toBe('delivered');
    expect(h.receiver.to('/slow/400/stop')).toHaveLength(1);
  });

  it('exits 0 on SIGTERM after finishing the attempt it was making', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe('/slow/400/sigterm', ['ai_check.completed']);
    const child = spawnDispatcher(h);
    await completeAiMonitorRun({ db: h.db, queues: h.queues }, { siteId: tenant.site.id, compositeScore: 1 });
    await waitFor(async () => (await h.db('deliveries').where({ subscription_id: sub.id }).whereNotNull('locked_until').first()) ?? false, 20_000);

    child.child.kill('SIGTERM');

    expect(await child.exited).toBe(0);
    const delivery = await h.db('deliveries').where({ subscription_id: sub.id }).first();
    expect(delivery.status).toBe('delivered');
    expect(child.stderr()).toBe('');
  });
});
