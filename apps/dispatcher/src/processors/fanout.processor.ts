import type { Job } from 'bullmq';
import { enqueueDeliveries, type Db, type FanoutJob, type Logger, type Queues } from '@svc/core';
import { fanOutEventsInPages } from '@svc/core/dispatcher';
import { MicroBatcher } from '@svc/core/dispatcher';

/**
 * Fan-out jobs picked up together are fanned out by one flush, event after event, each in pages of
 * at most FAN_OUT_PAGE_MAX deliveries whose first attempts are queued (one bulk add) before the next
 * page is made. A flush is not one transaction: when it fails, the batcher runs each event again
 * alone, which is safe because a fan-out run again skips what an earlier run made.
 */
const FANOUT_BATCH = 100;

/** Fans events out to their subscriptions and queues each first attempt; idempotent. */
export function createFanoutProcessor(deps: { db: Db; queues: Pick<Queues, 'deliveries'>; logger: Logger }) {
  const batcher = new MicroBatcher<string, void>(
    async (eventIds) => {
      const summary = await fanOutEventsInPages(deps.db, eventIds, async (page) => {
        await enqueueDeliveries(
          deps.queues,
          page.firstAttempts.map((delivery) => ({ ...delivery, attempt: 1, delayMs: 0 })),
        );
        deps.logger.debug('fan-out page queued', { eventId: page.eventId, created: page.created, queued: page.firstAttempts.length });
      });
      deps.logger.debug('events fanned out', { events: eventIds.length, deliveries: summary.created, pages: summary.pages });
      return eventIds.map(() => undefined);
    },
    { maxBatch: FANOUT_BATCH, maxInFlight: 2, key: (eventId) => eventId },
  );
  return async (job: Job<FanoutJob>): Promise<void> => {
    const eventId = job.data?.eventId;
    if (typeof eventId !== 'string') {
      deps.logger.error('fan-out job with malformed data dropped', { jobId: job.id });
      return;
    }
    await batcher.submit(eventId);
  };
}
