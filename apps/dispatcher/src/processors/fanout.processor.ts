import type { Job } from 'bullmq';
import { enqueueDeliveries, fanOutEvents, type Db, type FanoutJob, type Logger, type Queues } from '@svc/core';
import { MicroBatcher } from '@svc/core';

/** Fan-out jobs picked up together are fanned out by one statement and their first attempts queued by one bulk add. */
const FANOUT_BATCH = 100;

/** Fans events out to their subscriptions and queues each first attempt; idempotent. */
export function createFanoutProcessor(deps: { db: Db; queues: Pick<Queues, 'delivery'>; logger: Logger }) {
  const batcher = new MicroBatcher<string, void>(
    async (eventIds) => {
      const { firstAttempts } = await fanOutEvents(deps.db, eventIds);
      await enqueueDeliveries(
        deps.queues,
        firstAttempts.map((delivery) => ({ ...delivery, attempt: 1, delayMs: 0 })),
      );
      deps.logger.debug('events fanned out', { events: eventIds.length, deliveries: firstAttempts.length });
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
