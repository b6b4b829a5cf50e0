import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Queue, Worker } from 'bullmq';
import { createLogger, createQueues, createRedis, deliveryJobId, deliveryQueueName, type Queues, type Redis } from '@svc/core';
import { TEST_REDIS_URL, uniqueTag, waitFor } from '@svc/core/testing';
import { queueRegistryKey, RetiredQueues } from '../src/sweeps/retired-queues.js';

describe('a queue of an earlier shard count that a dispatcher died holding a job of', () => {
  let redis: Redis;
  let prefix: string;
  let queues: Queues;

  beforeAll(() => {
    redis = createRedis(TEST_REDIS_URL, 'bullmq');
    prefix = `test-retired-${uniqueTag()}`;
    queues = createQueues(redis, prefix, 1);
  });
  afterAll(async () => {
    await queues.close();
    redis.disconnect();
  });

  it('moves the abandoned active job to its shard now once its lock has lapsed, then deletes and forgets the queue', async () => {
    const oldName = deliveryQueueName(1, 3);
    const old = new Queue(oldName, { connection: redis, prefix });
    const job = { deliveryId: `dlv_${uniqueTag()}`, subscriptionId: `sub_${uniqueTag()}`, attempt: 2 };
    await old.add('d', job, { jobId: deliveryJobId(job.deliveryId, job.attempt) });
    // A dispatcher on 3 shards takes the job and dies (its worker closed without finishing it): the job stays active, its lock lapses.
    const worker = new Worker(oldName, null, { connection: redis, prefix, lockDuration: 300, autorun: false });
    const taken = await worker.getNextJob('dead-dispatcher');
    expect(taken?.id).toBe(deliveryJobId(job.deliveryId, job.attempt));
    await worker.close(true);
    await redis.sadd(queueRegistryKey(prefix), oldName);
    await waitFor(async () => (await redis.exists(`${old.toKey(taken!.id!)}:lock`)) === 0, 5_000, 'the dead worker’s lock to lapse');
    expect(await old.getJobCounts('active')).toEqual({ active: 1 });

    const retired = new RetiredQueues({ redis, queues, prefix, logger: createLogger('error', { silent: true }), workedForMs: 1_000 });
    const moved = await retired.moveOnce();

    expect(moved).toBe(1);
    const now = await queues.deliveries[0]!.getJob(deliveryJobId(job.deliveryId, job.attempt));
    expect(now?.data).toEqual(job);
    expect(await queues.deliveries[0]!.getJobState(now!.id!)).toBe('waiting');
    expect(await redis.sismember(queueRegistryKey(prefix), oldName)).toBe(0);
    expect(await old.getJobCounts('active', 'waiting', 'delayed')).toMatchObject({ active: 0, waiting: 0, delayed: 0 });
    await old.close();
  }, 20_000);
});
