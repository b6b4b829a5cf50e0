import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Queue } from 'bullmq';
import { Cluster, completeAiMonitorRun, deliveryQueueName, FANOUT_QUEUE, shardOf } from '@svc/core';
import { recoverSubscriptionDeliveries } from '@svc/core/operator';
import { scrapeSample, TestRedisCluster, uniqueTag, waitFor } from '@svc/core/testing';
import type { Dispatcher } from '../src/dispatcher.js';
import type { Readiness } from '../src/health/dispatcher-health.js';
import { Arrivals, expectSigned } from './support/arrivals.js';
import { attemptsOf, producerOf, waitForDelivery } from './support/delivery-probe.js';
import { countDelivered, deliveriesOf, expectEachDeliveredOnce, expectedDeliveries, publishTo, seedFleet } from './support/fleet.js';
import { createHarness, scanKeys, seedTenant, type Harness } from './support/harness.js';

const SHARDS = 3;
/** Retries far enough apart that some are always waiting, delayed, on the shards while events flow. */
const RETRY_DELAYS = '400,400,400,400,400,400';
/**
 * The receiver, both dispatchers and the producer share this process: a first TLS handshake under
 * a burst of 200 attempts can take longer than the harness's 2 s, which would be a timeout the
 * receiver never saw (a request not counted), not the exactly-once this file is about.
 */
const WEBHOOK_TIMEOUT_MS = '15000';

let cluster: TestRedisCluster;
let h: Harness;
let arrivals: Arrivals;
let dispatchers: Dispatcher[];

beforeAll(async () => {
  cluster = await new TestRedisCluster().start();
  h = await createHarness({ REDIS_CLUSTER_NODES: cluster.seeds, DISPATCHER_QUEUE_SHARDS: String(SHARDS), WEBHOOK_RETRY_DELAYS_MS: RETRY_DELAYS, WEBHOOK_TIMEOUT_MS });
  arrivals = new Arrivals(h.receiver, '/cluster');
  dispatchers = [h.startDispatcher(), h.startDispatcher()];
}, 60_000);

afterAll(async () => {
  try {
    await Promise.race([h?.close(), new Promise((resolve) => setTimeout(resolve, 20_000).unref())]);
  } finally {
    // Every redis-server of the cluster is killed by PID, whatever happened above.
    await cluster?.stop();
  }
}, 30_000);

const attemptsDelivered = async (dispatcher: Dispatcher) =>
  Number(/svc_dispatcher_attempts_total\{outcome="delivered"\} (\d+)/.exec(await dispatcher.metrics.registry.metrics())?.[1] ?? 'NaN');

describe('deliveries over a Redis Cluster with the delivery queue in 3 shards', () => {
  it('delivers 64 events to 4 tenants’ subscriptions on every shard exactly once each with two dispatchers, signed, a flaky subscription’s attempts in order', async () => {
    const fleet = await seedFleet(h, arrivals, { tenants: 4, perTenant: 4, flakyEvery: 4, flakyFailures: 2, spread: [SHARDS], perShard: 3 });
    const subscriptions = fleet.flatMap((tenant) => tenant.subscriptions);
    expect(new Set(subscriptions.map((sub) => shardOf(sub.id, SHARDS))).size).toBe(SHARDS);

    const eventIds = await publishTo(h.db, h.queues, fleet, 16);
    expect(eventIds).toHaveLength(64);
    const expected = await expectedDeliveries(h, fleet, eventIds);
    await waitFor(async () => (await countDelivered(h, eventIds)) === expected, 40_000, `all ${expected} deliveries to be recorded delivered`);

    // One 2xx arrival per delivery id, each attempt sent once, the flaky ones 503, 503, 200 in order, every one signed.
    expect(await expectEachDeliveredOnce(h, arrivals, fleet, eventIds)).toBe(expected);
    expect(arrivals.all.filter((arrival) => arrival.status === 200)).toHaveLength(expected);
    // Both dispatchers took part, and between them recorded each delivery once.
    const delivered = await Promise.all(dispatchers.map(attemptsDelivered));
    expect(delivered.every((count) => count > 0)).toBe(true);
    expect(delivered.reduce((sum, count) => sum + count, 0)).toBe(expected);
    // Nothing is left on any shard (jobs are removed when done).
    for (const queue of h.queues.deliveries) {
      const counts = await queue.getJobCounts('waiting', 'delayed', 'active', 'prioritized', 'paused', 'completed', 'failed');
      expect({ queue: queue.name, counts }).toEqual({ queue: queue.name, counts: { waiting: 0, delayed: 0, active: 0, prioritized: 0, paused: 0, completed: 0, failed: 0 } });
    }
  }, 60_000);

  it('keeps each shard on a master of its own: every master holds the keys of exactly one shard, and only of it', async () => {
    const prefix = h.config.queuePrefix;
    const masters = (await cluster.masterPorts()).sort();
    expect(masters).toHaveLength(3);
    const shardNames = h.queues.deliveries.map((queue) => queue.name);
    expect(shardNames).toEqual(Array.from({ length: SHARDS }, (_, k) => deliveryQueueName(k, SHARDS)));
    const shardMaster = await Promise.all(shardNames.map((name) => cluster.masterOf(`${prefix}:${name}:meta`)));
    expect([...shardMaster].sort()).toEqual(masters);

    // Scanned on each master: its delivery keys are all of the one shard the slot map puts there.
    const nodes = (h.redis as Cluster).nodes('master');
    expect(nodes).toHaveLength(3);
    for (const node of nodes) {
      const port = node.options.port as number;
      const keys = await scanKeys(node, `${prefix}:{deliver-*`);
      const shardsHere = new Set(keys.map((key) => key.slice(prefix.length + 1, key.indexOf('}') + 1)));
      expect({ port, shards: [...shardsHere] }).toEqual({ port, shards: [shardNames[shardMaster.indexOf(port)]] });
      expect(keys.length).toBeGreaterThan(0);
    }
  }, 30_000);

  it('counts every shard in the queue gauge, and sends a recovery’s background jobs on their subscriptions’ shards', async () => {
    const tag = uniqueTag();
    const tenant = await seedTenant(h);
    const subs = await Promise.all(Array.from({ length: 6 }, (_, i) => tenant.subscribe(`/ok/gauge-${tag}-${i}`)));
    expect(new Set(subs.map((sub) => shardOf(sub.id, SHARDS))).size).toBeGreaterThan(1);
    const queuedJobs = async () => {
      const text = await dispatchers[0]!.metrics.registry.metrics();
      return ['waiting', 'prioritized', 'paused', 'delayed', 'active'].reduce((sum, state) => sum + (scrapeSample(text, 'svc_dispatcher_queue_jobs', { queue: 'deliver', state }) ?? 0), 0);
    };
    // The shards paused, the first attempts stay queued where the gauge can count them.
    await Promise.all(h.queues.deliveries.map((queue) => queue.pause()));
    let counted: number;
    try {
      await Promise.all([0, 1].map((score) => completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: score })));
      counted = await waitFor(async () => (await queuedJobs()) === 12 && 12, 10_000, 'the gauge to count the 12 first attempts over the shards');
    } finally {
      await Promise.all(h.queues.deliveries.map((queue) => queue.resume()));
    }
    expect(counted).toBe(12);
    const ids = subs.map((sub) => sub.id);
    await waitFor(async () => Number((await h.db('deliveries').whereIn('subscription_id', ids).where({ status: 'delivered' }).count<{ n: string }[]>({ n: '*' }))[0]?.n) === 12, 20_000, 'the 12 deliveries');
    await waitFor(async () => (await queuedJobs()) === 0, 10_000, 'the gauge to fall back to 0');

    // A subscription whose receiver fails every attempt, then recovered: its background job runs on its shard.
    const failing = await tenant.subscribe(`/gauge-failing-${tag}`);
    h.receiver.answerWith(`/gauge-failing-${tag}`, 500);
    const since = new Date(Date.now() - 60_000);
    const { eventId } = await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: 50 });
    const failed = await waitForDelivery(h, eventId, failing.id, (row) => row.status === 'failed', 'the delivery to fail for good', 30_000);
    h.receiver.answerWith(`/gauge-failing-${tag}`, 200);
    const recovery = await recoverSubscriptionDeliveries(producerOf(h), tenant.accountId, failing.id, { since, until: new Date(Date.now() + 60_000), dryRun: false });
    expect(recovery.count).toBe(1);
    const redelivered = await waitFor(async () => (await h.db('deliveries').where({ redelivery_of: failed.id, status: 'delivered' }).first('id')) as { id: string } | undefined, 20_000, 'the recovered delivery');
    expect(await attemptsOf(h, redelivered.id)).toEqual([expect.objectContaining({ n: 1, status_code: 200 })]);
    expect(h.receiver.to(`/gauge-failing-${tag}`).filter((arrival) => arrival.headers['x-service-delivery-id'] === redelivered.id)).toHaveLength(1);
  }, 90_000);

  it('loses no event when two masters are SIGKILLed mid-run, one after the other: each replica takes over, /readyz says not_ready then ready, every delivery ends delivered, and each dispatcher alone still works every shard', async () => {
    // Every subscription refuses each delivery's first request: every delivery has a retry delayed on its shard.
    const fleet = await seedFleet(h, arrivals, { tenants: 3, perTenant: 3, flakyEvery: 1, flakyFailures: 1, spread: [SHARDS], perShard: 2 });
    const prefix = h.config.queuePrefix;
    const masterOfShard = (queue: Queue) => cluster.masterOf(`${prefix}:${queue.name}:meta`);
    // A steady trickle of events, before, during and after the failover.
    const eventIds: string[] = [];
    let producing = true;
    const producer = (async () => {
      while (producing) {
        eventIds.push(...(await publishTo(h.db, h.queues, fleet, 1)));
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    const readinessSeen: Readiness[] = [];
    const victims: number[] = [];
    const victimShards: string[] = [];
    const readiness = async () => {
      const answer = await dispatchers[0]!.readiness();
      readinessSeen.push(answer);
      return answer;
    };
    try {
      // Two masters killed one after the other, each while retries wait on its shard and the trickle
      // goes on: first the master of the fan-out queue (it holds a delivery shard too), then another.
      const fanoutMaster = await cluster.masterOf(`${prefix}:${FANOUT_QUEUE}:meta`);
      for (const round of [1, 2]) {
        // The second victim is a master that still has its replica (not the one promoted in round 1).
        const promoted = round === 1 ? undefined : await cluster.masterOf(`${prefix}:${FANOUT_QUEUE}:meta`);
        const victim = round === 1 ? fanoutMaster : (await cluster.masterPorts()).find((port) => port !== promoted)!;
        const shard = (await Promise.all(h.queues.deliveries.map(async (queue) => ((await masterOfShard(queue)) === victim ? queue : undefined)))).find(Boolean)!;
        victims.push(victim);
        victimShards.push(shard.name);
        await waitFor(async () => eventIds.length >= 6 * round && (await shard.getDelayedCount()) > 0, 20_000, `retries delayed on the shard of victim ${round}`);
        await cluster.kill(victim);

        const down = await waitFor(async () => {
          const answer = await readiness();
          return answer.status === 'not_ready' && answer;
        }, 10_000, `/readyz to say not_ready after kill ${round}`);
        expect(down).toMatchObject({ checks: { redis: 'down' }, redisCluster: expect.objectContaining({ masters: expect.any(Number) }) });
        expect(down.reasons).toEqual(expect.arrayContaining([expect.stringContaining('Redis Cluster')]));

        await cluster.waitUntilHealthy(30_000);
        const masters = await cluster.masterPorts();
        expect(masters).toHaveLength(3);
        expect(masters).not.toContain(victim);
        const up = await waitFor(async () => {
          const answer = await readiness();
          return answer.status === 'ready' && answer;
        }, 20_000, `/readyz to say ready again after failover ${round}`);
        expect(up).toMatchObject({ status: 'ready', checks: { redis: 'ok' }, redisCluster: { state: 'ok', masters: 3, mastersAnswering: 3 } });

        const eventsAtFailover = eventIds.length;
        await waitFor(() => eventIds.length >= eventsAtFailover + 6, 20_000, `events produced after failover ${round}`);
      }
    } finally {
      producing = false;
      await producer;
    }

    // Every recorded event is delivered: the sweep queues again from Postgres whatever the dead master took with it.
    const expected = await expectedDeliveries(h, fleet, eventIds);
    await waitFor(async () => (await countDelivered(h, eventIds)) === expected, 40_000, `all ${expected} deliveries to be delivered after the failover`);
    const deliveries = await deliveriesOf(h, fleet, eventIds);
    expect(deliveries).toHaveLength(expected);
    const bodies = new Map(((await h.db('events').whereIn('id', eventIds).select('id', 'body')) as Array<{ id: string; body: string }>).map((event) => [event.id, event.body]));
    const byDelivery = arrivals.byDelivery();
    const ours = new Set(deliveries.map((delivery) => delivery.id));
    const fleetPaths = new Set(fleet.flatMap((tenant) => tenant.subscriptions.map((sub) => sub.path)));
    for (const delivery of deliveries) {
      const got = byDelivery.get(delivery.id) ?? [];
      const ok = got.filter((arrival) => arrival.status === 200);
      expect({ delivery: delivery.id, status: delivery.status, delivered: ok.length > 0 }).toEqual({ delivery: delivery.id, status: 'delivered', delivered: true });
      // A duplicate (an attempt sent again after the dead master lost its record of it) carries the same delivery id, to the same subscription.
      for (const arrival of got) expect(arrival.path).toBe(delivery.subscription.path);
      expectSigned(ok[0]!, delivery.subscription.secret, bodies.get(delivery.event_id)!);
      expect((await attemptsOf(h, delivery.id)).at(-1)?.status_code).toBe(200);
    }
    // Nothing arrived at this fleet's receivers but its deliveries.
    expect(arrivals.all.filter((arrival) => fleetPaths.has(arrival.path) && !ours.has(arrival.deliveryId))).toEqual([]);
    // The outage was seen (not_ready with the cluster's state) and is over.
    expect(readinessSeen.some((answer) => answer.status === 'not_ready' && answer.redisCluster !== undefined)).toBe(true);
    expect(readinessSeen.at(-1)?.status).toBe('ready');

    // Each dispatcher's workers came through the failover: one stops cleanly (a worker whose
    // blocking connection hung would never finish closing), and the other alone delivers a new
    // event to every subscription, on every shard, the victim's among them; then it stops cleanly too.
    const stopWithin = (dispatcher: Dispatcher) =>
      Promise.race([dispatcher.stop().then(() => 'stopped'), new Promise((resolve) => setTimeout(resolve, 10_000, 'still stopping after 10 s').unref())]);
    expect(await stopWithin(dispatchers[1]!)).toBe('stopped');
    const after = await publishTo(h.db, h.queues, fleet, 1);
    const afterExpected = await expectedDeliveries(h, fleet, after);
    await waitFor(async () => (await countDelivered(h, after)) === afterExpected, 20_000, `the remaining dispatcher alone to deliver all ${afterExpected} new deliveries`);
    expect(new Set(fleet.flatMap((tenant) => tenant.subscriptions.map((sub) => h.queues.deliveries[shardOf(sub.id, SHARDS)]!.name)))).toEqual(new Set(h.queues.deliveries.map((queue) => queue.name)));
    expect(new Set(victimShards).size).toBe(2);
    expect(await stopWithin(dispatchers[0]!)).toBe('stopped');
  }, 120_000);
});
