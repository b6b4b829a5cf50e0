import { Queue, type Job } from 'bullmq';
import { Cluster, deliveryQueueOf, FANOUT_QUEUE, LEGACY_QUEUES, type DeliveryJob, type FanoutJob, type Logger, type Queues, type RedisClient } from '@svc/core';

/** Jobs read from a retired queue at once, and the most batches one sweep moves. */
const MOVE_BATCH = 500;
const MAX_BATCHES_PER_SWEEP = 20;
/** The states in which a job waits to be taken: those are moved; an active job is left to finish where it is. */
const WAITING_STATES = ['waiting', 'prioritized', 'paused', 'delayed'] as const;

/** The Redis set of every queue a dispatcher has worked: where retired shards are found. */
export function queueRegistryKey(prefix: string): string {
  return `${prefix}:queues`;
}

/**
 * Queues no longer in use — shards of an earlier DISPATCHER_QUEUE_SHARDS, and (on one Redis) the
 * queues as named before their names became hash tags — keep the jobs queued on them before the
 * change. Every sweep, each dispatcher registers the queues it works, and moves the waiting jobs of
 * any other registered queue to the queue they belong on now (a delivery to its subscription's
 * shard, with its due time and priority), then removes a retired queue's keys and forgets it once it holds nothing.
 *
 * A job moved while a dispatcher still on the old setting takes it runs twice at most as a job, never
 * as an attempt: the claim in Postgres lets one job per attempt send. A job queued on a retired
 * queue after it was forgotten is never lost either: its delivery is in Postgres, and the sweep
 * queues it again on its shard when it is overdue.
 */
export class RetiredQueues {
  private readonly registry: string;
  private readonly current: Set<string>;

  constructor(
    private readonly deps: { redis: RedisClient; queues: Queues; prefix: string; logger: Logger },
  ) {
    this.registry = queueRegistryKey(deps.prefix);
    this.current = new Set([FANOUT_QUEUE, ...deps.queues.deliveries.map((queue) => queue.name)]);
  }

  /** One pass: registers this dispatcher's queues and moves what waits on retired ones. Returns the jobs moved. */
  async moveOnce(): Promise<number> {
    const { redis } = this.deps;
    // On one Redis the queues may still have their names from before the hash tags; a cluster never had them.
    const legacy = redis instanceof Cluster ? [] : await this.legacyQueuesInUse();
    await redis.sadd(this.registry, ...this.current, ...legacy);
    const retired = (await redis.smembers(this.registry)).filter((name) => !this.current.has(name));
    let moved = 0;
    for (const name of retired) moved += await this.drain(name);
    return moved;
  }

  private async legacyQueuesInUse(): Promise<string[]> {
    const names = [LEGACY_QUEUES.fanout, LEGACY_QUEUES.delivery];
    const present = await Promise.all(names.map((name) => this.deps.redis.exists(`${this.deps.prefix}:${name}:id`, `${this.deps.prefix}:${name}:meta`)));
    return names.filter((_, i) => (present[i] ?? 0) > 0);
  }

  private async drain(name: string): Promise<number> {
    // A name this service never made (a stray SADD) is not touched: only a fan-out or delivery queue is drained.
    if (name !== LEGACY_QUEUES.fanout && name !== LEGACY_QUEUES.delivery && !/^\{deliver-\d+of\d+-\d+\}$/.test(name)) {
      await this.deps.redis.srem(this.registry, name);
      return 0;
    }
    const retired = new Queue(name, { connection: this.deps.redis, prefix: this.deps.prefix });
    retired.on('error', () => undefined);
    try {
      let moved = 0;
      for (let batch = 0; batch < MAX_BATCHES_PER_SWEEP; batch++) {
        const jobs = await retired.getJobs([...WAITING_STATES], 0, MOVE_BATCH - 1);
        if (jobs.length === 0) break;
        await this.requeue(name, jobs);
        await Promise.all(jobs.map((job) => job.remove().catch(() => undefined)));
        moved += jobs.length;
      }
      const counts = await retired.getJobCounts(...WAITING_STATES, 'active');
      if (Object.values(counts).every((count) => count === 0)) {
        // Emptied: its keys go (a process still on the old setting would make them again, and be found again).
        await retired.obliterate().catch(() => undefined);
        await this.deps.redis.srem(this.registry, name);
      }
      if (moved > 0) this.deps.logger.info('moved jobs from a queue no longer in use', { queue: name, moved });
      return moved;
    } finally {
      await retired.close().catch(() => undefined);
    }
  }

  /** Adds each job, with its id, due time and priority, to the queue it belongs on now. */
  private async requeue(name: string, jobs: Job[]): Promise<void> {
    const now = Date.now();
    const optsOf = (job: Job) => ({
      jobId: job.id as string,
      delay: Math.max(0, job.timestamp + (job.delay ?? 0) - now),
      ...(job.priority ? { priority: job.priority } : {}),
    });
    if (name === LEGACY_QUEUES.fanout) {
      await this.deps.queues.fanout.addBulk(jobs.map((job) => ({ name: job.name, data: job.data as FanoutJob, opts: optsOf(job) })));
      return;
    }
    const byShard = new Map<Queue<DeliveryJob>, Job[]>();
    for (const job of jobs) {
      const queue = deliveryQueueOf(this.deps.queues, (job.data as DeliveryJob).subscriptionId);
      const shard = byShard.get(queue);
      if (shard) shard.push(job);
      else byShard.set(queue, [job]);
    }
    await Promise.all(
      [...byShard].map(([queue, shardJobs]) => queue.addBulk(shardJobs.map((job) => ({ name: job.name, data: job.data as DeliveryJob, opts: optsOf(job) })))),
    );
  }
}
