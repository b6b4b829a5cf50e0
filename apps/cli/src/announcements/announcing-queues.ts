import { JOBS_ANNOUNCED_CHANNEL, type Db, type DeliveryJob, type FanoutJob, type JobsAnnouncement, type Queues } from '@svc/core';

/**
 * How `svc` hands a committed event to the dispatchers without Redis (docs/adr/0015): instead of
 * adding the producer's jobs to BullMQ, it announces them with a Postgres NOTIFY, and each
 * dispatcher LISTENing queues them itself (apps/dispatcher/src/announcements/). Loading BullMQ
 * and ioredis, connecting to Redis and adding one job cost a one-shot command ~50 ms of CPU,
 * a third of the whole command.
 *
 * Postgres stays the truth: the announcement is sent after the producer's commit, like the jobs
 * it replaces, and if no dispatcher hears it (none running, or its listening connection down) the
 * sweep queues the overdue first attempts, or fans out the event still unfanned, as it does when
 * Redis lost a job.
 */

/** Deliveries per notification: 40 × ~120 bytes (about 4.9 KB) stays well under Postgres's 8,000-byte payload limit. */
const DELIVERIES_PER_NOTIFICATION = 40;

interface JobOptions {
  delay?: number;
}

/**
 * Stand-ins for the two queues a producer of core adds to after its commit (ProducerDeps): the
 * jobs they are given become NOTIFYs on the command's own database connection, one statement
 * for all of them. Only jobs due now can be announced (a producer's first attempts and fan-out
 * job are); any other is refused, so the producer logs it and the sweep queues it when due.
 */
export function announcingQueues(db: Db, prefix: string): Pick<Queues, 'fanout' | 'delivery'> {
  const announce = async (announcements: JobsAnnouncement[]): Promise<void> => {
    if (announcements.length === 0) return;
    await db.raw(
      `SELECT ${announcements.map(() => 'pg_notify(?, ?)').join(', ')}`,
      announcements.flatMap((announcement) => [JOBS_ANNOUNCED_CHANNEL, JSON.stringify(announcement)]),
    );
  };
  const dueNow = (options: JobOptions | undefined): void => {
    if ((options?.delay ?? 0) > 0) throw new Error('only jobs due now are announced; the sweep queues this one when it falls due');
  };
  const fanout = {
    async add(_name: string, data: FanoutJob, options?: JobOptions): Promise<void> {
      dueNow(options);
      await announce([{ prefix, fanout: [{ eventId: data.eventId }] }]);
    },
  };
  const delivery = {
    async add(_name: string, data: DeliveryJob, options?: JobOptions): Promise<void> {
      dueNow(options);
      await announce([{ prefix, deliveries: [deliveryJob(data)] }]);
    },
    async addBulk(jobs: ReadonlyArray<{ data: DeliveryJob; opts?: JobOptions }>): Promise<void> {
      for (const job of jobs) dueNow(job.opts);
      const all = jobs.map((job) => deliveryJob(job.data));
      const announcements: JobsAnnouncement[] = [];
      for (let i = 0; i < all.length; i += DELIVERIES_PER_NOTIFICATION) {
        announcements.push({ prefix, deliveries: all.slice(i, i + DELIVERIES_PER_NOTIFICATION) });
      }
      await announce(announcements);
    },
  };
  // A producer calls only `add` (and `addBulk` on the delivery queue) on these, which is all they
  // implement: the rest of BullMQ's Queue is not there to call, hence the one cast.
  return { fanout, delivery } as unknown as Pick<Queues, 'fanout' | 'delivery'>;
}

function deliveryJob(data: DeliveryJob): DeliveryJob {
  return { deliveryId: data.deliveryId, subscriptionId: data.subscriptionId, attempt: data.attempt };
}
