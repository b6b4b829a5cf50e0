import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Queue, Worker } from 'bullmq';
import { completeAiMonitorRun, createQueues, deliveryJobId, deliveryQueueName, FANOUT_QUEUE, LEGACY_QUEUES, type DeliveryJob, type Queues } from '@svc/core';
import { createCapturingLogger, uniqueTag, waitFor, type LogEntry } from '@svc/core/testing';
import type { Dispatcher } from '../src/dispatcher.js';
import { queueRegistryKey } from '../src/sweeps/retired-queues.js';
import { Arrivals } from './support/arrivals.js';
import { attemptsOf, producerOf, type DeliveryRow } from './support/delivery-probe.js';
import { countDelivered, expectEachDeliveredOnce, expectedDeliveries, publishTo, seedFleet, type FleetTenant } from './support/fleet.js';
import { createHarness, scanKeys, seedTenant, type Harness } from './support/harness.js';

/** Retries due well after the shard count changes under them. */
const RETRY_DELAY_MS = 1_500;
const RETRY_DELAYS = Array(6).fill(RETRY_DELAY_MS).join(',');
/**
 * The 3-shard dispatchers' schedule: a second attempt 4 s on, due after their queues, still marked
 * worked for three sweeps and 2 s once they stop, are handed to the 1-shard dispatchers.
 */
const LONG_FIRST_RETRY = [4_000, ...Array(5).fill(RETRY_DELAY_MS)].join(',');
/** How early a moved job may run: the move's own round trips, and the millisecond BullMQ rounds to. */
const EARLY_MARGIN_MS = 50;

/** Each delayed job's due time (BullMQ's delayed score is the due time × 0x1000 plus a counter), by job id. */
async function dueTimes(h: Harness, queue: Queue): Promise<Map<string, number>> {
  const flat = await h.redis.zrange(queue.toKey('delayed'), 0, -1, 'WITHSCORES');
  const due = new Map<string, number>();
  for (let i = 0; i < flat.length; i += 2) due.set(flat[i]!, Math.floor(Number(flat[i + 1]) / 0x1000));
  return due;
}

async function jobsOn(queues: Queues): Promise<number> {
  const counts = await Promise.all(queues.deliveries.map((queue) => queue.getJobCounts('waiting', 'delayed', 'active', 'prioritized', 'paused')));
  return counts.reduce((sum, c) => sum + Object.values(c).reduce((a, b) => a + b, 0), 0);
}

/** Each retry's arrival came no earlier than its due time: the attempt before it plus the delay. */
async function expectRetriesOnTime(h: Harness, arrivals: Arrivals, deliveries: DeliveryRow[]): Promise<void> {
  for (const delivery of deliveries) {
    const attempts = await attemptsOf(h, delivery.id);
    const got = arrivals.of(delivery.id);
    for (let n = 1; n < attempts.length; n++) {
      const previousEnded = attempts[n - 1]!.at.getTime() + attempts[n - 1]!.duration_ms;
      expect({ delivery: delivery.id, attempt: n + 1, early: got[n]!.receivedAt < previousEnded + RETRY_DELAY_MS - EARLY_MARGIN_MS }).toEqual({
        delivery: delivery.id,
        attempt: n + 1,
        early: false,
      });
    }
  }
}

describe('changing DISPATCHER_QUEUE_SHARDS on a running system', () => {
  let h: Harness;
  let arrivals: Arrivals;
  let fleet: FleetTenant[];
  const log = createCapturingLogger('info');
  const at: Record<number, Queues> = {};

  beforeAll(async () => {
    h = await createHarness({ DISPATCHER_QUEUE_SHARDS: '2', WEBHOOK_RETRY_DELAYS_MS: RETRY_DELAYS, WEBHOOK_TIMEOUT_MS: '10000' });
    arrivals = new Arrivals(h.receiver, '/reshard');
    // Every third subscription refuses each delivery twice: its retries wait on the shards while the count changes.
    fleet = await seedFleet(h, arrivals, { tenants: 3, perTenant: 4, flakyEvery: 3, flakyFailures: 2, spread: [1, 2, 3], perShard: 2 });
    at[2] = h.queues;
    at[3] = createQueues(h.redis, h.config.queuePrefix, 3);
    at[1] = createQueues(h.redis, h.config.queuePrefix, 1);
  });
  afterAll(async () => {
    await Promise.all([at[3]?.close(), at[1]?.close()]);
    await h.close();
  });

  const start = (shards: number, more: Record<string, string> = {}): Dispatcher => h.startDispatcher({ DISPATCHER_QUEUE_SHARDS: String(shards), ...more }, { logger: log.logger });
  const names = (shards: number) => Array.from({ length: shards }, (_, k) => deliveryQueueName(k, shards));
  const moves = () => log.entries.filter((entry: LogEntry) => entry.message === 'moved jobs from a queue no longer in use');

  it('from 2 shards to 3 side by side, then down to 1 after a stop: every delivery sent once per attempt, retries not early, retired shards emptied and forgotten', async () => {
    const registry = queueRegistryKey(h.config.queuePrefix);
    const eventIds: string[] = [];

    // 2 shards: two dispatchers and the producer; the flaky deliveries' retries are delayed on the shards.
    const twos = [start(2), start(2)];
    const first = await publishTo(h.db, at[2]!, fleet, 5);
    eventIds.push(...first);
    await waitFor(async () => (await Promise.all(at[2]!.deliveries.map((queue) => queue.getDelayedCount()))).every((n) => n > 0), 10_000, 'retries delayed on both shards of 2');

    // 3 shards, rolled out beside the 2-shard dispatchers: producers on either setting for a while.
    // Their second attempts wait longer: due after the shards of 3 are handed over, further down.
    const threes = [start(3, { WEBHOOK_RETRY_DELAYS_MS: LONG_FIRST_RETRY }), start(3, { WEBHOOK_RETRY_DELAYS_MS: LONG_FIRST_RETRY })];
    eventIds.push(...(await publishTo(h.db, at[3]!, fleet, 3)), ...(await publishTo(h.db, at[2]!, fleet, 2)));
    await waitFor(async () => (await Promise.all(at[3]!.deliveries.map((queue) => queue.getDelayedCount()))).some((n) => n > 0), 10_000, 'retries delayed on the shards of 3');
    await Promise.all(twos.map((dispatcher) => dispatcher.stop()));
    // Side by side, neither setting touched the other's queues (no job moved back and forth, no live queue deleted).
    const movesWhileSideBySide = moves().map((entry) => entry.queue);
    // A producer still on 2 shards after the last 2-shard dispatcher stopped: its jobs are moved.
    eventIds.push(...(await publishTo(h.db, at[2]!, fleet, 2)));

    const expectedSoFar = await expectedDeliveries(h, fleet, eventIds);
    await waitFor(async () => (await countDelivered(h, eventIds)) === expectedSoFar, 30_000, `all ${expectedSoFar} deliveries made at 2 and 3 shards`);
    const forgotten = await waitFor(async () => {
      const members = (await h.redis.smembers(registry)).sort();
      return members.every((name) => !names(2).includes(name)) && (await jobsOn(at[2]!)) === 0 && members;
    }, 10_000, 'the shards of 2 emptied and forgotten');
    expect(forgotten).toEqual([FANOUT_QUEUE, ...names(3)].sort());
    expect(movesWhileSideBySide).toEqual([]);
    expect(new Set(moves().map((entry) => entry.queue))).toEqual(new Set(names(2)));
    expect(await scanKeys(h.redis, `${h.config.queuePrefix}:{deliver-?of2-*`)).toEqual([]);

    // A producer still on 2 shards after they were forgotten queues on them again: they are found and drained again.
    const late = await publishTo(h.db, at[2]!, fleet, 1);
    eventIds.push(...late);
    await waitFor(async () => (await scanKeys(h.redis, `${h.config.queuePrefix}:{deliver-?of2-*`)).length === 0, 10_000, 'the shards of 2 drained again');
    expect((await h.redis.smembers(registry)).sort()).toEqual([FANOUT_QUEUE, ...names(3)].sort());
    const lateExpected = await expectedDeliveries(h, fleet, late);
    await waitFor(async () => (await countDelivered(h, late)) === lateExpected, 10_000, 'the late producer’s deliveries');

    // Down to 1 after a stop: second attempts delayed on every shard of 3 when the 3-shard dispatchers stop.
    const last = await publishTo(h.db, at[3]!, fleet, 2);
    eventIds.push(...last);
    const flakyOfLast = await h.db('deliveries as d')
      .join('webhook_subscriptions as s', 's.id', 'd.subscription_id')
      .whereIn('d.event_id', last)
      .where('s.url', 'like', '%/flaky%')
      .count<{ n: string }[]>({ n: '*' });
    await waitFor(
      async () =>
        (await h.db('delivery_attempts as a').join('deliveries as d', 'd.id', 'a.delivery_id').whereIn('d.event_id', last).where('a.n', 1).where('a.status_code', 503).count<{ n: string }[]>({ n: '*' }))[0]!.n ===
          flakyOfLast[0]!.n && (await Promise.all(at[3]!.deliveries.map((queue) => queue.getDelayedCount()))).every((n) => n > 0),
      10_000,
      'the first attempts of the last batch refused, their retries delayed on every shard of 3',
    );
    await Promise.all(threes.map((dispatcher) => dispatcher.stop()));
    const dueBefore = new Map<string, number>();
    for (const queue of at[3]!.deliveries) for (const [id, due] of await dueTimes(h, queue)) dueBefore.set(id, due);
    expect(dueBefore.size).toBeGreaterThan(0);

    // The first sweep of a 1-shard dispatcher moves them, each still due when it was.
    const ones = [start(1), start(1)];
    const dueAfter = new Map<string, number>();
    await waitFor(async () => {
      for (const [id, due] of await dueTimes(h, at[1]!.deliveries[0]!)) if (dueBefore.has(id) && !dueAfter.has(id)) dueAfter.set(id, due);
      return (await jobsOn(at[3]!)) === 0;
    }, 10_000, 'the shards of 3 emptied');
    for (const [id, due] of await dueTimes(h, at[1]!.deliveries[0]!)) if (dueBefore.has(id) && !dueAfter.has(id)) dueAfter.set(id, due);
    expect(dueAfter.size).toBeGreaterThan(0);
    for (const [id, due] of dueAfter) expect({ id, shift: Math.abs(due - dueBefore.get(id)!) <= EARLY_MARGIN_MS }).toEqual({ id, shift: true });
    eventIds.push(...(await publishTo(h.db, at[1]!, fleet, 1)));

    const expected = await expectedDeliveries(h, fleet, eventIds);
    await waitFor(async () => (await countDelivered(h, eventIds)) === expected, 30_000, `all ${expected} deliveries`);
    // Each delivery: its refusals and one 200, each attempt sent once, numbered in order, signed.
    expect(await expectEachDeliveredOnce(h, arrivals, fleet, eventIds)).toBe(expected);
    await expectRetriesOnTime(h, arrivals, (await h.db('deliveries').whereIn('event_id', eventIds).select('*')) as DeliveryRow[]);

    // What is left: the 1-shard queue and the fan-out queue registered, nothing on or of the retired shards.
    const left = await waitFor(async () => {
      const members = (await h.redis.smembers(registry)).sort();
      return members.length === 2 && members;
    }, 10_000, 'the shards of 3 forgotten');
    expect(left).toEqual([FANOUT_QUEUE, ...names(1)].sort());
    expect(await scanKeys(h.redis, `${h.config.queuePrefix}:{deliver-?of3-*`)).toEqual([]);
    expect(await jobsOn(at[1]!)).toBe(0);
    expect(new Set(moves().map((entry) => entry.queue))).toEqual(new Set([...names(2), ...names(3)]));
    await Promise.all(ones.map((dispatcher) => dispatcher.stop()));
  }, 90_000);
});

describe('jobs left on the delivery queue as named before the hash tags (`deliver`)', () => {
  let h: Harness;
  let legacy: Queue<DeliveryJob>;

  beforeAll(async () => {
    h = await createHarness();
    legacy = new Queue<DeliveryJob>(LEGACY_QUEUES.delivery, { connection: h.redis, prefix: h.config.queuePrefix });
  });
  afterAll(async () => {
    await legacy.close();
    await h.close();
  });

  it('are moved to their shard and delivered once each, one put back for later still not sent before its time, and the old queue is removed', async () => {
    const tenant = await seedTenant(h);
    const tag = uniqueTag();
    const subs = await Promise.all(Array.from({ length: 3 }, (_, i) => tenant.subscribe(`/ok/legacy-${tag}-${i}`)));
    // Published with no dispatcher running; the jobs are then moved to `deliver`, as a previous release would have queued them.
    const events = await Promise.all(Array.from({ length: 4 }, (_, i) => completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: i })));
    const deliveries = (await h.db('deliveries').whereIn('event_id', events.map((event) => event.eventId)).select('id', 'subscription_id')) as Array<{ id: string; subscription_id: string }>;
    expect(deliveries).toHaveLength(12);
    const shard = h.queues.deliveries[0]!;
    const [putBack, prioritized, ...plain] = deliveries;
    // The one to be put back first, so it is the first a worker takes.
    await legacy.add('d', { deliveryId: putBack!.id, subscriptionId: putBack!.subscription_id, attempt: 1 }, { jobId: deliveryJobId(putBack!.id, 1) });
    await legacy.addBulk(
      [...plain, prioritized!].map((delivery) => ({
        name: 'd',
        data: { deliveryId: delivery.id, subscriptionId: delivery.subscription_id, attempt: 1 },
        opts: { jobId: deliveryJobId(delivery.id, 1), ...(delivery === prioritized ? { priority: 1 } : {}) },
      })),
    );
    for (const delivery of deliveries) await shard.remove(deliveryJobId(delivery.id, 1));
    expect(await shard.getJobCounts('waiting', 'delayed', 'prioritized', 'paused')).toEqual({ waiting: 0, delayed: 0, prioritized: 0, paused: 0 });

    // A previous release's dispatcher took one job a while after it was queued and put it back for
    // later (its slots were full), as the processor does: moveToDelayed, which keeps the job's timestamp.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const taker = new Worker<DeliveryJob>(LEGACY_QUEUES.delivery, null, { connection: h.redis, prefix: h.config.queuePrefix, autorun: false });
    let due: number;
    try {
      // The put-back delivery's job is the oldest: the first taken.
      const job = await taker.getNextJob('previous-release');
      expect(job?.id).toBe(deliveryJobId(putBack!.id, 1));
      due = Date.now() + 3_000;
      await job!.moveToDelayed(due, 'previous-release');
    } finally {
      await taker.close();
    }
    const dueBefore = (await dueTimes(h, legacy as unknown as Queue)).get(deliveryJobId(putBack!.id, 1));
    expect(Math.abs(dueBefore! - due)).toBeLessThanOrEqual(1);

    h.startDispatcher();
    const dueAfter = await waitFor(async () => (await dueTimes(h, shard)).get(deliveryJobId(putBack!.id, 1)), 5_000, 'the put-back job moved to the shard');
    expect(Math.abs(dueAfter - dueBefore!)).toBeLessThanOrEqual(EARLY_MARGIN_MS);

    await waitFor(
      async () => Number((await h.db('deliveries').whereIn('id', deliveries.map((d) => d.id)).where({ status: 'delivered' }).count<{ n: string }[]>({ n: '*' }))[0]!.n) === 12,
      15_000,
      'the 12 deliveries',
    );
    const received = h.receiver.to(`/ok/legacy-${tag}`);
    expect(received).toHaveLength(12);
    expect(new Set(received.map((request) => request.headers['x-service-delivery-id'])).size).toBe(12);
    const putBackArrival = received.find((request) => request.headers['x-service-delivery-id'] === putBack!.id)!;
    expect(putBackArrival.receivedAt).toBeGreaterThanOrEqual(due - EARLY_MARGIN_MS);
    for (const delivery of deliveries) expect((await attemptsOf(h, delivery.id)).map((attempt) => attempt.n)).toEqual([1]);
    expect(subs).toHaveLength(3);

    // The queue as named before is gone, keys and registration.
    await waitFor(async () => (await h.redis.sismember(queueRegistryKey(h.config.queuePrefix), LEGACY_QUEUES.delivery)) === 0, 5_000, '`deliver` forgotten');
    expect(await scanKeys(h.redis, `${h.config.queuePrefix}:${LEGACY_QUEUES.delivery}:*`)).toEqual([]);
    expect((await h.redis.smembers(queueRegistryKey(h.config.queuePrefix))).sort()).toEqual([FANOUT_QUEUE, shard.name].sort());
  }, 40_000);
});
