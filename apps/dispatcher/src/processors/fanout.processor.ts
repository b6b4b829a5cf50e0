import type { Job } from 'bullmq';
import { enqueueDeliveries, fanOutEvent, type Db, type FanoutJob, type Logger, type Queues } from '@svc/core';

/** Fans one event out to its subscriptions and queues each first attempt; idempotent. */
export function createFanoutProcessor(deps: { db: Db; queues: Pick<Queues, 'delivery'>; logger: Logger }) {
  return async (job: Job<FanoutJob>): Promise<void> => {
    const eventId = job.data?.eventId;
    if (typeof eventId !== 'string') {
      deps.logger.error('fan-out job with malformed data dropped', { jobId: job.id });
      return;
    }
    const { firstAttempts } = await fanOutEvent(deps.db, eventId);
    await enqueueDeliveries(
      deps.queues,
      firstAttempts.map((delivery) => ({ ...delivery, attempt: 1, delayMs: 0 })),
    );
    deps.logger.debug('event fanned out', { eventId, deliveries: firstAttempts.length });
  };
}
