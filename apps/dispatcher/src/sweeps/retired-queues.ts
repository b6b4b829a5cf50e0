import { Queue, type Job } from 'bullmq';
import { byDeliveryShard, Cluster, FANOUT_QUEUE, LEGACY_QUEUES, type DeliveryJob, type FanoutJob, type Logger, type Queues, type RedisClient } from '@svc/core';

/** Jobs read from a retired queue at once, and the most batches one sweep moves. */
const MOVE_BATCH = 500;
const MAX_BATCHES_PER_SWEEP = 20;
/** The states in which a job waits to be taken: those are moved; an active job is left to finish where it is. */
const WAITING_STATES = ['waiting', 'prioritized', 'paused', 'delayed'] as const;

/** The Redis set of every queue a dispatcher has worked: where retired shards are found. */
export function queueRegistryKey(prefix: string): string {
  return `${prefix}:queues`;
}

/** The Redis set of the queues once retired and forgotten: a producer still on the old setting may make one again. */
export function retiredQueuesKey(prefix: string): string {
  return `${prefix}:queues:retired`;
}

/** Set (with an expiry) by every dispatcher that works the queue, each sweep: no dispatcher drains a queue another one works. */
export function queueWorkedKey(prefix: string, name: string): string {
  return `${prefix}:queues:worked:${name}`;
}

/** Longest a dispatcher holds a queue to drain it (a sweep moves at most MAX_BATCHES_PER_SWEEP × MOVE_BATCH jobs). */
const DRAIN_LOCK_MS = 60_000;
/** BullMQ's delayed set scores a job by its due time × 0x1000 (plus a counter). */
const DELAYED_SCORE_FACTOR = 0x1000;

/**
 * Queues no longer in use — shards of an earlier DISPATCHER_QUEUE_SHARDS, and (on one Redis) the
 * queues as named before their names became hash tags — keep the jobs queued on them before the
 * change. Every sweep, each dispatcher registers the queues it works and marks them worked for a
 * while (`workedForMs`, a few sweeps), and moves the waiting jobs of any other registered queue that
 * no dispatcher marks worked to the queue they belong on now (a delivery to its subscription's shard,
 * with its due time and priority), then removes a retired queue's keys and forgets it once it holds
 * nothing.
 *
 * During a rolling change both settings run side by side: each dispatcher leaves alone the queues a
 * dispatcher on the other setting works (moving jobs back and forth between two live settings, and
 * deleting a queue that was empty for an instant, would make work for nothing and could leave a live
 * queue paused by a deletion that failed). Once the last dispatcher on the old setting has stopped,
 * its queues are drained within `workedForMs` and a sweep. A job moved while a dispatcher still on
 * the old setting takes it runs twice at most as a job, never as an attempt: the claim in Postgres
 * lets one job per attempt send. A forgotten queue that a producer still on the old setting fills
 * again is found again (its keys exist) and drained; its deliveries are in Postgres in any case, and
 * the sweep queues an overdue one again on its shard.
 */
export class RetiredQueues {
  private readonly registry: string;
  private readonly retiredSet: string;
  private readonly current: Set<string>;

  constructor(
    private readonly deps: { redis: RedisClient; queues: Queues; prefix: string; logger: Logger; workedForMs: number },
  ) {
    this.registry = queueRegistryKey(deps.prefix);
    this.retiredSet = retiredQueuesKey(deps.prefix);
    this.current = new Set([FANOUT_QUEUE, ...deps.queues.deliveries.map((queue) => queue.name)]);
  }

  /** One pass: registers this dispatcher's queues and moves what waits on retired ones. Returns the jobs moved. */
  async moveOnce(): Promise<number> {
    const { redis } = this.deps;
    // Not while the connection is down: its commands would wait for it (BullMQ's connections queue
    // them), and the sweep with them, so a dispatcher that never reached Redis could not stop.
    if (redis.status !== 'ready') return 0;
    await this.markWorked();
    const again = await this.queuesMadeAgain();
    await redis.sadd(this.registry, ...this.current, ...again);
    const candidates = (await redis.smembers(this.registry)).filter((name) => !this.current.has(name));
    const worked = await Promise.all(candidates.map((name) => redis.exists(queueWorkedKey(this.deps.prefix, name))));
    let moved = 0;
    for (const [i, name] of candidates.entries()) if (worked[i] === 0) moved += await this.drain(name);
    // Again after the moves: a long sweep must not let the mark lapse.
    if (moved > 0) await this.markWorked();
    return moved;
  }

  private async markWorked(): Promise<void> {
    await Promise.all([...this.current].map((name) => this.deps.redis.set(queueWorkedKey(this.deps.prefix, name), '1', 'PX', this.deps.workedForMs)));
  }

  /**
   * Queues not registered whose keys exist: those once retired and forgotten (a producer still on
   * the old setting queued on one again) and, on one Redis, the queues as named before the hash tags
   * (a cluster never had them). Every job added makes the queue's `id` key.
   */
  private async queuesMadeAgain(): Promise<string[]> {
    const legacy = this.deps.redis instanceof Cluster ? [] : [LEGACY_QUEUES.fanout, LEGACY_QUEUES.delivery];
    const names = [...new Set([...legacy, ...(await this.deps.redis.smembers(this.retiredSet))])].filter((name) => !this.current.has(name));
    const present = await Promise.all(names.map((name) => this.deps.redis.exists(`${this.deps.prefix}:${name}:id`, `${this.deps.prefix}:${name}:meta`)));
    return names.filter((_, i) => (present[i] ?? 0) > 0);
  }

  private async drain(name: string): Promise<number> {
    // A name this service never made (a stray SADD) is not touched: only a fan-out or delivery queue is drained.
    if (name !== LEGACY_QUEUES.fanout && name !== LEGACY_QUEUES.delivery && !/^\{deliver-\d+of\d+-\d+\}$/.test(name)) {
      await this.deps.redis.srem(this.registry, name);
      return 0;
    }
    // One dispatcher drains a queue at a time: two would move the same jobs twice, and one's deletion
    // could meet the other's pause and remove, leaving keys of the queue behind.
    const lock = `${this.deps.prefix}:queues:draining:${name}`;
    if ((await this.deps.redis.set(lock, '1', 'PX', DRAIN_LOCK_MS, 'NX')) !== 'OK') return 0;
    // skipMetasUpdate: opening a handle on the queue must not make its keys again (it would be found again).
    const retired = new Queue(name, { connection: this.deps.redis, prefix: this.deps.prefix, skipMetasUpdate: true });
    retired.on('error', () => undefined);
    try {
      let moved = 0;
      for (let batch = 0; batch < MAX_BATCHES_PER_SWEEP; batch++) {
        const jobs = await retired.getJobs([...WAITING_STATES], 0, MOVE_BATCH - 1);
        if (jobs.length === 0) break;
        await this.requeue(retired, jobs);
        await Promise.all(jobs.map((job) => job.remove().catch(() => undefined)));
        moved += jobs.length;
      }
      // An active job whose lock has lapsed was held by a dispatcher that died while still on the old
      // setting: no worker runs BullMQ's stalled check on a retired queue, so it would stay active (and
      // the queue listed) for ever. It moves as a waiting job does; a job still locked is left to finish.
      const active = await retired.getJobs(['active'], 0, MOVE_BATCH - 1);
      const locked = await Promise.all(active.map((job) => this.deps.redis.exists(`${retired.toKey(job.id as string)}:lock`)));
      const abandoned = active.filter((_, i) => locked[i] === 0);
      if (abandoned.length > 0) {
        await this.requeue(retired, abandoned);
        await Promise.all(abandoned.map((job) => job.remove().catch(() => undefined)));
        moved += abandoned.length;
      }
      const counts = await retired.getJobCounts(...WAITING_STATES, 'active');
      if (Object.values(counts).every((count) => count === 0)) {
        // Emptied: its keys go. BullMQ pauses a queue before deleting it; should the deletion fail
        // because a job was taken meanwhile, the queue is not left paused.
        await retired.obliterate().catch(async (error: Error) => {
          if (/active jobs/.test(error.message)) await retired.resume().catch(() => undefined);
        });
        await this.deps.redis.sadd(this.retiredSet, name);
        await this.deps.redis.srem(this.registry, name);
      }
      if (moved > 0) this.deps.logger.info('moved jobs from a queue no longer in use', { queue: name, moved });
      return moved;
    } finally {
      await retired.close().catch(() => undefined);
      await this.deps.redis.del(lock).catch(() => 0);
    }
  }

  /** Adds each job, with its id, due time and priority, to the queue it belongs on now. */
  private async requeue(retired: Queue, jobs: Job[]): Promise<void> {
    // A delayed job's due time is its score in the delayed set: a job a dispatcher put back for
    // later (moveToDelayed) keeps the timestamp it was first queued with, and its delay counts from
    // when it was put back, so timestamp + delay would make it due early.
    const scores = await this.deps.redis.zmscore(retired.keys.delayed!, ...jobs.map((job) => job.id as string));
    const now = Date.now();
    const optsOf = (job: Job, i: number) => {
      const score = scores[i];
      const due = score != null ? Math.floor(Number(score) / DELAYED_SCORE_FACTOR) : job.timestamp + (job.delay ?? 0);
      return { jobId: job.id as string, delay: Math.max(0, due - now), ...(job.priority ? { priority: job.priority } : {}) };
    };
    if (retired.name === LEGACY_QUEUES.fanout) {
      await this.deps.queues.fanout.addBulk(jobs.map((job, i) => ({ name: job.name, data: job.data as FanoutJob, opts: optsOf(job, i) })));
      return;
    }
    const byShard = byDeliveryShard(
      this.deps.queues,
      jobs.map((job, i) => ({ job, i })),
      ({ job }) => (job.data as DeliveryJob).subscriptionId,
    );
    await Promise.all(
      [...byShard].map(([queue, shardJobs]) => queue.addBulk(shardJobs.map(({ job, i }) => ({ name: job.name, data: job.data as DeliveryJob, opts: optsOf(job, i) })))),
    );
  }
}
