import {
  enqueueAfterCommit,
  enqueueDeliveries,
  enqueueFanout,
  JOBS_ANNOUNCED_CHANNEL,
  parseJobsAnnouncement,
  PgListener,
  type Logger,
  type ParsedJobsAnnouncement,
  type Queues,
} from '@svc/core';

export interface AnnouncementListenerDeps {
  databaseUrl: string;
  /** This dispatcher's queues; announcements for another queue prefix are not ours to queue. */
  queues: Pick<Queues, 'fanout' | 'delivery'>;
  prefix: string;
  logger: Pick<Logger, 'warn'>;
}

/** The listening connection's application_name in pg_stat_activity. */
export const ANNOUNCEMENT_LISTENER_APPLICATION_NAME = 'svc dispatcher jobs announcements';

/**
 * Holds one Postgres connection (outside the pool; PgListener) that LISTENs for the jobs
 * producers announce instead of queueing them (`svc`: docs/adr/0015) and queues them, as the
 * producer would have. Every dispatcher listening queues them: the job ids are the producer's, so
 * a second add is a no-op while the job is stored, and a job run again for an attempt already
 * recorded does nothing.
 *
 * Nothing depends on this connection: while it is down (or no dispatcher runs) an announcement is
 * simply not heard, and the sweep queues the first attempts once they are overdue, or fans out the
 * event still unfanned, as it does for a job Redis lost (docs/operations.md gives the delay).
 */
export class AnnouncementListener {
  private readonly listener: PgListener;

  constructor(private readonly deps: AnnouncementListenerDeps) {
    this.listener = new PgListener({
      databaseUrl: deps.databaseUrl,
      applicationName: ANNOUNCEMENT_LISTENER_APPLICATION_NAME,
      channels: [JOBS_ANNOUNCED_CHANNEL],
      onNotification: (_channel, payload) => void this.queue(payload),
      logger: deps.logger,
      lostMessage: 'jobs announcement listener lost its connection; the sweep queues announced work meanwhile',
    });
  }

  start(): void {
    void this.listener.start();
  }

  /** Stops queueing announcements at once; resolves when its connection is closed. */
  stop(): Promise<void> {
    return this.listener.stop();
  }

  /** Queues what one announcement names, if it is for this dispatcher's queues. */
  private async queue(payload: string): Promise<void> {
    const announcement = parseJobsAnnouncement(payload);
    if (announcement === undefined) {
      this.deps.logger.warn('ignored a jobs announcement that is not one', { payload: payload.slice(0, 200) });
      return;
    }
    if (announcement.prefix !== this.deps.prefix) return;
    await enqueueAfterCommit(
      () => queueAnnounced(this.deps.queues, announcement),
      this.deps.logger,
      'announced jobs not queued; the sweep will queue them',
      { events: announcement.fanout.map((job) => job.eventId), deliveries: announcement.deliveries.map((job) => job.deliveryId) },
    );
  }
}

async function queueAnnounced(queues: Pick<Queues, 'fanout' | 'delivery'>, announcement: ParsedJobsAnnouncement): Promise<void> {
  await Promise.all([
    enqueueDeliveries(queues, announcement.deliveries.map((job) => ({ ...job, delayMs: 0 }))),
    ...announcement.fanout.map((job) => enqueueFanout(queues, job.eventId)),
  ]);
}
