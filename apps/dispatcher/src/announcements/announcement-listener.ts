import pg from 'pg';
import {
  enqueueAfterCommit,
  enqueueDeliveries,
  enqueueFanout,
  JOBS_ANNOUNCED_CHANNEL,
  parseJobsAnnouncement,
  type Logger,
  type ParsedJobsAnnouncement,
  type Queues,
} from '@svc/core';

const RECONNECT_DELAY_MS = 1_000;
/** TCP keep-alive probes start after this much silence (the OS then notices a dead peer). */
const TCP_KEEPALIVE_DELAY_MS = 10_000;

export interface AnnouncementListenerDeps {
  databaseUrl: string;
  /** This dispatcher's queues; announcements for another queue prefix are not ours to queue. */
  queues: Pick<Queues, 'fanout' | 'delivery'>;
  prefix: string;
  logger: Pick<Logger, 'warn'>;
}

/**
 * Holds one Postgres connection (outside the pool) that LISTENs for the jobs producers announce
 * instead of queueing them (`svc`: docs/adr/0015) and queues them, as the producer would have.
 * Every dispatcher listening queues them: the job ids are the producer's, so a second add is a
 * no-op while the job is stored, and a job run again for an attempt already recorded does nothing.
 *
 * Nothing depends on this connection: while it is down (or no dispatcher runs) an announcement is
 * simply not heard, and the sweep queues the first attempts once they are overdue, or fans out the
 * event still unfanned, as it does for a job Redis lost (docs/operations.md gives the delay).
 */
export class AnnouncementListener {
  private client: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly deps: AnnouncementListenerDeps) {}

  start(): void {
    void this.connect();
  }

  /** Stops queueing announcements at once; resolves when its connection is closed. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({
      connectionString: this.deps.databaseUrl,
      keepAlive: true,
      keepAliveInitialDelayMillis: TCP_KEEPALIVE_DELAY_MS,
    });
    client.on('notification', (message) => {
      if (message.channel === JOBS_ANNOUNCED_CHANNEL && !this.stopped) void this.queue(message.payload ?? '');
    });
    client.on('error', (error) => this.lose(client, error));
    client.on('end', () => this.lose(client));
    this.client = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${JOBS_ANNOUNCED_CHANNEL}`);
    } catch (error) {
      this.lose(client, error as Error);
    }
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

  private lose(client: pg.Client, error?: Error): void {
    if (this.client !== client) return;
    this.client = undefined;
    if (!this.stopped) {
      this.deps.logger.warn('jobs announcement listener lost its connection; the sweep queues announced work meanwhile', {
        error: error?.message,
      });
      this.timer = setTimeout(() => void this.connect(), RECONNECT_DELAY_MS);
    }
    client.end().catch(() => undefined);
  }
}

async function queueAnnounced(queues: Pick<Queues, 'fanout' | 'delivery'>, announcement: ParsedJobsAnnouncement): Promise<void> {
  await Promise.all([
    enqueueDeliveries(queues, announcement.deliveries.map((job) => ({ ...job, delayMs: 0 }))),
    ...announcement.fanout.map((job) => enqueueFanout(queues, job.eventId)),
  ]);
}
