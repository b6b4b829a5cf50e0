import { Queue, type ConnectionOptions, type JobsOptions } from 'bullmq';

/**
 * The one contract of each queue: its name, its payload (ids only, never a secret or a body)
 * and how its job ids are made. Producer and consumer import these and nothing else.
 */
export const FANOUT_QUEUE = 'fanout';
export const DELIVERY_QUEUE = 'deliver';

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
  delivery: Queue<DeliveryJob>;
  close(): Promise<void>;
}

/** Producer-side handles on both queues. */
export function createQueues(connection: ConnectionOptions, prefix: string): Queues {
  const fanout = new Queue<FanoutJob>(FANOUT_QUEUE, { connection, prefix });
  const delivery = new Queue<DeliveryJob>(DELIVERY_QUEUE, { connection, prefix });
  // A queue's 'error' is its connection's, which the connection's creator handles (and logs);
  // unheard, BullMQ would throw it.
  for (const queue of [fanout, delivery]) queue.on('error', () => undefined);
  return {
    fanout,
    delivery,
    async close() {
      await Promise.all([fanout.close(), delivery.close()]);
    },
  };
}

/** Enqueues the fan-out of a committed event. */
export async function enqueueFanout(queues: Pick<Queues, 'fanout'>, eventId: string): Promise<void> {
  await queues.fanout.add('f', { eventId }, { jobId: fanoutJobId(eventId) });
}

/** Enqueues delivery attempts; each due at its own time (delay 0 for a first attempt). */
export async function enqueueDeliveries(
  queues: Pick<Queues, 'delivery'>,
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
  const [only] = bulk;
  if (only === undefined) return;
  // One job (a producer's event with one subscription, the commonest case) goes without a MULTI:
  // each ioredis pipeline copies BullMQ's ~50 script commands onto itself, which cost a producer
  // more CPU than the job itself (profiled: a quarter of the publisher's time in ioredis).
  if (bulk.length === 1) await queues.delivery.add(only.name, only.data, only.opts);
  else await queues.delivery.addBulk(bulk);
}

/** The priority of background jobs (lower comes first; jobs without one come before all of them). */
const BACKGROUND_PRIORITY = 1;

/** Removes queued attempt jobs (best effort: a job that runs anyway finds its delivery gone or closed). */
export async function removeDeliveryJobs(
  queues: Pick<Queues, 'delivery'>,
  jobs: ReadonlyArray<{ deliveryId: string; attempt: number }>,
): Promise<void> {
  await Promise.all(
    jobs.map((job) => queues.delivery.remove(deliveryJobId(job.deliveryId, job.attempt)).catch(() => 0)),
  );
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
