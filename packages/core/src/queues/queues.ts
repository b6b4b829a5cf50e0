import { Queue, type ConnectionOptions, type JobsOptions } from 'bullmq';

/**
 * The one contract of each queue: its name, its payload (ids only, never a secret or a body)
 * and how its job ids are made. Producer and consumer import these and nothing else.
 *
 * Each queue's name is a Redis Cluster hash tag (`{…}`), so all of one queue's keys share a slot
 * and BullMQ's scripts run on a cluster; the delivery queue is split into DISPATCHER_QUEUE_SHARDS
 * shards, each under a tag of its own, so the shards spread over the cluster's masters.
 */
export const FANOUT_QUEUE = '{fanout}';

/** The names the queues had before they were hash-tagged; a dispatcher on one Redis moves what is left on them. */
export const LEGACY_QUEUES = { fanout: 'fanout', delivery: 'deliver' } as const;

/** Redis Cluster's hash slots. */
const HASH_SLOTS = 16_384;

/**
 * The name of delivery shard `shard` of `shards`: `{deliver-<shard>of<shards>-<salt>}`, the salt
 * the first that puts the tag's slot in the shard's own stretch of the slot range. A cluster whose
 * masters hold equal runs of slots (as `redis-cli --cluster create` assigns them) then holds
 * shards/masters shards on each master when shards is a multiple of the masters.
 */
export function deliveryQueueName(shard: number, shards: number): string {
  const from = Math.floor((shard * HASH_SLOTS) / shards);
  const to = Math.floor(((shard + 1) * HASH_SLOTS) / shards);
  for (let salt = 0; ; salt++) {
    const tag = `deliver-${shard}of${shards}-${salt}`;
    const slot = hashSlot(tag);
    if (slot >= from && slot < to) return `{${tag}}`;
  }
}

/** The shard of a subscription's deliveries: fixed by its id, so its attempts stay in order on one queue. */
export function shardOf(subscriptionId: string, shards: number): number {
  return hashSlot(subscriptionId) % shards;
}

/** Redis Cluster's slot of a key (CRC16-XMODEM of its hash tag, or of the whole key without one). */
export function hashSlot(key: string): number {
  const bytes = Buffer.from(key);
  const open = bytes.indexOf(0x7b); // {
  const close = open >= 0 ? bytes.indexOf(0x7d, open + 1) : -1; // }
  const hashed = open >= 0 && close > open + 1 ? bytes.subarray(open + 1, close) : bytes;
  let crc = 0;
  for (const byte of hashed) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % HASH_SLOTS;
}

export interface FanoutJob {
  eventId: string;
}

export interface DeliveryJob {
  deliveryId: string;
  /** Lets a dispatcher cap the attempts in flight per subscription before touching the database. */
  subscriptionId: string;
  /** The attempt number (1..7) this job makes; a job for an attempt already recorded does nothing. */
  attempt: number;
}

/** One fan-out job per event: enqueueing twice is a no-op while the first is stored. */
export function fanoutJobId(eventId: string): string {
  return eventId;
}

/** One job per delivery attempt, so a retry can be queued while the failing attempt's job is still active. */
export function deliveryJobId(deliveryId: string, attempt: number): string {
  return `${deliveryId}-${attempt}`;
}

export interface Queues {
  fanout: Queue<FanoutJob>;
  /** The delivery queue's shards, shard k at index k. */
  deliveries: ReadonlyArray<Queue<DeliveryJob>>;
  close(): Promise<void>;
}

/** The delivery shard a subscription's attempts go to. */
export function deliveryQueueOf(queues: Pick<Queues, 'deliveries'>, subscriptionId: string): Queue<DeliveryJob> {
  return queues.deliveries[shardOf(subscriptionId, queues.deliveries.length)] as Queue<DeliveryJob>;
}

/** Items grouped by the delivery shard of their subscription, each group in the items' order. */
export function byDeliveryShard<T>(queues: Pick<Queues, 'deliveries'>, items: Iterable<T>, subscriptionIdOf: (item: T) => string): Map<Queue<DeliveryJob>, T[]> {
  const groups = new Map<Queue<DeliveryJob>, T[]>();
  for (const item of items) {
    const queue = deliveryQueueOf(queues, subscriptionIdOf(item));
    const group = groups.get(queue);
    if (group) group.push(item);
    else groups.set(queue, [item]);
  }
  return groups;
}

/** Producer-side handles on the fan-out queue and every delivery shard (DISPATCHER_QUEUE_SHARDS). */
export function createQueues(connection: ConnectionOptions, prefix: string, shards: number): Queues {
  const fanout = new Queue<FanoutJob>(FANOUT_QUEUE, { connection, prefix });
  const deliveries = Array.from({ length: shards }, (_, shard) => new Queue<DeliveryJob>(deliveryQueueName(shard, shards), { connection, prefix }));
  // A queue's 'error' is its connection's, which the connection's creator handles (and logs);
  // unheard, BullMQ would throw it.
  for (const queue of [fanout, ...deliveries]) queue.on('error', () => undefined);
  return {
    fanout,
    deliveries,
    async close() {
      await Promise.all([fanout.close(), ...deliveries.map((queue) => queue.close())]);
    },
  };
}

/** Enqueues the fan-out of a committed event. */
export async function enqueueFanout(queues: Pick<Queues, 'fanout'>, eventId: string): Promise<void> {
  await queues.fanout.add('f', { eventId }, { jobId: fanoutJobId(eventId) });
}

/** Enqueues delivery attempts; each due at its own time (delay 0 for a first attempt). */
export async function enqueueDeliveries(
  queues: Pick<Queues, 'deliveries'>,
  jobs: ReadonlyArray<DeliveryJob & { delayMs: number }>,
  options: { background?: boolean } = {},
): Promise<void> {
  const bulk = jobs.map((job) => ({
    name: 'd',
    data: { deliveryId: job.deliveryId, subscriptionId: job.subscriptionId, attempt: job.attempt },
    opts: {
      jobId: deliveryJobId(job.deliveryId, job.attempt),
      delay: Math.max(0, Math.ceil(job.delayMs)),
      // BullMQ takes every job without a priority before any job with one: a background batch
      // (a recovery's thousands) waits behind the events arriving meanwhile, whatever their account.
      ...(options.background ? { priority: BACKGROUND_PRIORITY } : {}),
    },
  }));
  await Promise.all(
    [...byDeliveryShard(queues, bulk, (job) => job.data.subscriptionId)].map(([queue, jobs]) => {
      const [only] = jobs;
      // One job (a producer's event with one subscription, the commonest case) goes without a MULTI:
      // each ioredis pipeline copies BullMQ's ~50 script commands onto itself, which cost a producer
      // more CPU than the job itself (profiled: a quarter of the publisher's time in ioredis).
      return jobs.length === 1 && only ? queue.add(only.name, only.data, only.opts) : queue.addBulk(jobs);
    }),
  );
}

/** The priority of background jobs (lower comes first; jobs without one come before all of them). */
const BACKGROUND_PRIORITY = 1;

/** Removes one subscription's queued attempt jobs (best effort: a job that runs anyway finds its delivery gone or closed). */
export async function removeDeliveryJobs(
  queues: Pick<Queues, 'deliveries'>,
  subscriptionId: string,
  jobs: ReadonlyArray<{ deliveryId: string; attempt: number }>,
): Promise<void> {
  const queue = deliveryQueueOf(queues, subscriptionId);
  await Promise.all(jobs.map((job) => queue.remove(deliveryJobId(job.deliveryId, job.attempt)).catch(() => 0)));
}

/** Job states in which a job will still run by itself. */
const LIVE_STATES = new Set(['waiting', 'delayed', 'active', 'prioritized', 'waiting-children']);

/**
 * For the sweep: queues each job again unless a job with its id is live. A job hash left behind
 * without its queue entry (a partial flush, an eviction) would make a plain `add` a silent no-op
 * forever, so such a leftover is removed first.
 */
export async function requeueUnlessLive<T>(
  queue: Queue<T>,
  jobs: ReadonlyArray<{ name: string; data: T; jobId: string; opts?: JobsOptions }>,
): Promise<number> {
  const lost = (
    await Promise.all(
      jobs.map(async (job) => {
        const state = await queue.getJobState(job.jobId);
        if (LIVE_STATES.has(state)) return undefined;
        await queue.remove(job.jobId).catch(() => 0);
        return job;
      }),
    )
  ).filter((job): job is NonNullable<typeof job> => job !== undefined);
  if (lost.length) {
    // Queue<T>'s addBulk types its data through BullMQ's own generics; the payload is exactly T.
    await (queue as Queue).addBulk(lost.map((job) => ({ name: job.name, data: job.data, opts: { ...job.opts, jobId: job.jobId } })));
  }
  return lost.length;
}

/** For the sweep: requeueUnlessLive for delivery attempts, each on its subscription's shard. */
export async function requeueDeliveriesUnlessLive(queues: Pick<Queues, 'deliveries'>, deliveries: ReadonlyArray<DeliveryJob>): Promise<number> {
  const counts = await Promise.all(
    [...byDeliveryShard(queues, deliveries, (delivery) => delivery.subscriptionId)].map(([queue, jobs]) =>
      requeueUnlessLive(
        queue,
        jobs.map((job) => ({ name: 'd', data: job, jobId: deliveryJobId(job.deliveryId, job.attempt) })),
      ),
    ),
  );
  return counts.reduce((sum, count) => sum + count, 0);
}
