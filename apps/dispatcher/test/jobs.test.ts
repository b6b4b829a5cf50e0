import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeScan, enqueueDeliveries, enqueueFanout } from '@svc/core';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import {
  attemptsOf,
  lastQueueEventId,
  producerOf,
  waitForDelivery,
  waitForQueueEvent,
} from './support/delivery-probe.js';

const LONG_DELAYS = Array(6).fill('600000').join(',');

/** Every value stored under the harness's queue prefix in Redis, whatever the key type. */
async function everythingInRedis(h: Harness): Promise<string> {
  const keys = await h.queueKeys();
  const values: unknown[] = [];
  for (const key of keys) {
    const type = await h.redis.type(key);
    if (type === 'string') values.push(await h.redis.get(key));
    else if (type === 'hash') values.push(await h.redis.hgetall(key));
    else if (type === 'list') values.push(await h.redis.lrange(key, 0, -1));
    else if (type === 'set') values.push(await h.redis.smembers(key));
    else if (type === 'zset') values.push(await h.redis.zrange(key, 0, -1));
    else if (type === 'stream') values.push(await h.redis.xrange(key, '-', '+'));
  }
  return JSON.stringify({ keys, values });
}

describe('queue jobs carry ids only and do not pile up (architecture: secrets never in job data)', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await createHarness({ WEBHOOK_RETRY_DELAYS_MS: LONG_DELAYS });
  });
  afterAll(async () => {
    await h.close();
  });

  function ensureDispatcher(): void {
    if (h.dispatchers.length === 0) h.startDispatcher();
  }

  it('queues fan-out and delivery jobs with ids only, and nothing in Redis holds the secret or the body', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe(`/fail/ids-only-${uniqueTag()}`);

    // Published before any dispatcher runs, so the producer's first-attempt job can be read as queued.
    const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 64 });
    const { id: deliveryId } = await h.db('deliveries').where({ event_id: eventId }).first('id');
    const firstJob = await h.queues.deliveries[0]!.getJob(`${deliveryId as string}-1`);
    expect(firstJob?.data).toEqual({ deliveryId, subscriptionId: sub.id, attempt: 1 });
    // The fan-out job of a wider account (ADR 11), as enqueueFanout makes it: the event's id only.
    await enqueueFanout(h.queues, eventId);
    const fanoutJob = await h.queues.fanout.getJob(eventId);
    expect(fanoutJob?.id).toBe(eventId);
    expect(Object.keys(fanoutJob!.data).sort()).toEqual(['eventId']);

    ensureDispatcher();
    const delivery = await waitForDelivery(h, eventId, sub.id, (row) => row.attempt_count === 1 && row.locked_until === null, 'attempt 1 to be recorded');
    const retry = await waitFor(
      async () => (await h.queues.deliveries[0]!.getDelayed()).find((job) => job.data.deliveryId === delivery.id),
      5_000,
      'the delayed retry job',
    );

    expect(retry.id).toBe(`${delivery.id}-2`);
    expect(Object.keys(retry.data).sort()).toEqual(['attempt', 'deliveryId', 'subscriptionId']);
    expect(retry.data).toEqual({ deliveryId: delivery.id, subscriptionId: sub.id, attempt: 2 });
    expect(retry.opts.delay).toBeGreaterThan(590_000);
    const { body } = await h.db('events').where({ id: eventId }).first('body');
    expect(JSON.stringify(retry)).not.toContain(sub.secret);
    expect(JSON.stringify(retry)).not.toContain(body);
    const redis = await everythingInRedis(h);
    expect(redis).toContain(delivery.id);
    expect(redis).not.toContain(sub.secret);
    expect(redis).not.toContain(JSON.parse(body).data.scanId);
  });

  it('does nothing when the job of attempt 1 runs again while the delivery waits for attempt 2', async () => {
    const tenant = await seedTenant(h);
    const path = `/fail/rerun-waiting-${uniqueTag()}`;
    const sub = await tenant.subscribe(path);
    ensureDispatcher();
    const { eventId } = await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: 1 });
    const waiting = await waitForDelivery(h, eventId, sub.id, (row) => row.attempt_count === 1 && row.locked_until === null, 'attempt 1 to be recorded');

    const position = await lastQueueEventId(h, h.queues.deliveries[0]!);
    await enqueueDeliveries(h.queues, [{ deliveryId: waiting.id, subscriptionId: sub.id, attempt: 1, delayMs: 0 }]);
    await waitForQueueEvent(h, h.queues.deliveries[0]!, `${waiting.id}-1`, 'completed', position);

    expect(h.receiver.to(path)).toHaveLength(1);
    expect(await attemptsOf(h, waiting.id)).toHaveLength(1);
    expect(await h.db('deliveries').where({ id: waiting.id }).first()).toEqual(waiting);
  });

  it('keeps no completed or failed jobs in either queue once work has settled', async () => {
    const tenant = await seedTenant(h);
    const path = `/ok/settle-${uniqueTag()}`;
    const sub = await tenant.subscribe(path);
    ensureDispatcher();

    const eventIds: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      eventIds.push((await completeScan(producerOf(h), { scanId: (await tenant.newScan()).id, score: i })).eventId);
    }
    for (const eventId of eventIds) {
      await waitForDelivery(h, eventId, sub.id, (row) => row.status === 'delivered', 'each delivery to be delivered');
    }
    // A job whose processor throws (Postgres rejects the NUL byte in the id) must not be kept as failed either.
    const fanoutPosition = await lastQueueEventId(h, h.queues.fanout);
    const deliveryPosition = await lastQueueEventId(h, h.queues.deliveries[0]!);
    const poisonedEventId = `evt_poison\u0000${uniqueTag()}`;
    const poisonedDeliveryId = `dlv_poison\u0000${uniqueTag()}`;
    await enqueueFanout(h.queues, poisonedEventId);
    await enqueueDeliveries(h.queues, [{ deliveryId: poisonedDeliveryId, subscriptionId: sub.id, attempt: 1, delayMs: 0 }]);
    await waitForQueueEvent(h, h.queues.fanout, poisonedEventId, 'failed', fanoutPosition);
    await waitForQueueEvent(h, h.queues.deliveries[0]!, `${poisonedDeliveryId}-1`, 'failed', deliveryPosition);

    expect(h.receiver.to(path)).toHaveLength(5);
    expect(await h.queues.deliveries[0]!.getJobCounts('completed', 'failed')).toEqual({ completed: 0, failed: 0 });
    expect(await h.queues.fanout.getJobCounts('completed', 'failed')).toEqual({ completed: 0, failed: 0 });
    expect(await h.queues.fanout.getJob(poisonedEventId)).toBeUndefined();
    expect(await h.queues.deliveries[0]!.getJob(`${poisonedDeliveryId}-1`)).toBeUndefined();
    for (const eventId of eventIds) expect(await h.queues.fanout.getJob(eventId)).toBeUndefined();
  });
});
