import { DelayedError, type Job } from 'bullmq';
import {
  enqueueDeliveries,
  failDeliveryOfDisabledSubscription,
  MAX_ATTEMPTS,
  removeDeliveryJobs,
  type Db,
  type DeliveryJob,
  type Logger,
  type Queues,
  type AttemptOutcome,
  type ClaimedAttempt,
  type RecordResult,
} from '@svc/core';
import type { WebhookClient } from '../http/webhook-client.js';
import type { AttemptBatches } from './attempt-batches.js';
import type { DispatcherMetrics } from '../metrics/dispatcher-metrics.js';
import type { SubscriptionSlots } from './subscription-slots.js';

/** How long to put back a job whose subscription has no free slot in this process. */
const SLOT_BUSY_DELAY_MS = 200;

export interface DeliverDeps {
  db: Db;
  queues: Pick<Queues, 'delivery'>;
  client: WebhookClient;
  slots: SubscriptionSlots;
  /** Claims and records, batched across the attempts in flight. */
  batches: AttemptBatches;
  logger: Logger;
  metrics: Pick<DispatcherMetrics, 'attemptFinished'>;
}

function isDeliveryJob(data: unknown): data is DeliveryJob {
  const job = data as Partial<DeliveryJob> | null;
  return (
    typeof job?.deliveryId === 'string' &&
    typeof job.subscriptionId === 'string' &&
    Number.isInteger(job.attempt) &&
    (job.attempt as number) >= 1 &&
    (job.attempt as number) <= MAX_ATTEMPTS
  );
}

async function putBack(job: Job, token: string | undefined, inMs: number): Promise<never> {
  await job.moveToDelayed(Date.now() + Math.ceil(inMs), token);
  throw new DelayedError();
}

/**
 * Records the outcome; if Postgres refuses the record itself (a data error, class 22), records
 * it again without the receiver's bytes, so the attempt is not left to be claimed and sent
 * again. Anything else (Postgres unreachable) propagates: the lease runs out, and the claim
 * limit bounds how often the attempt is sent again.
 */
async function recordOrDegrade(deps: DeliverDeps, attempt: ClaimedAttempt, outcome: AttemptOutcome): Promise<RecordResult> {
  try {
    return await deps.batches.record(attempt, outcome);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code !== 'string' || !code.startsWith('22')) throw error;
    deps.logger.error('attempt outcome refused by Postgres; recording it without the response bytes', {
      deliveryId: attempt.deliveryId,
      attempt: attempt.attempt,
      error: (error as Error).message,
    });
    return deps.batches.record(attempt, { ...outcome, responseBytes: null, error: outcome.error?.replace(/[^\x20-\x7e]/g, '?') ?? null });
  }
}

/**
 * One attempt of one delivery: claim it in Postgres (due, next in line, nobody else sending,
 * subscription active), POST it, record the outcome, and queue the next attempt if one is due.
 * Running it twice for the same attempt sends at most once.
 */
export function createDeliverProcessor(deps: DeliverDeps) {
  return async (job: Job<DeliveryJob>, token?: string): Promise<void> => {
    if (!isDeliveryJob(job.data)) {
      deps.logger.error('delivery job with malformed data dropped', { jobId: job.id });
      return;
    }
    const { deliveryId, subscriptionId, attempt } = job.data;
    if (!deps.slots.tryAcquire(subscriptionId)) {
      await putBack(job, token, SLOT_BUSY_DELAY_MS + Math.random() * SLOT_BUSY_DELAY_MS);
    }
    try {
      const claim = await deps.batches.claim({ deliveryId, attempt });
      if (!claim.claimed) {
        const { refusal } = claim;
        if (refusal.reason === 'not-due' || refusal.reason === 'in-flight-elsewhere') {
          await putBack(job, token, refusal.retryInMs);
        }
        if (refusal.reason === 'subscription-disabled') await failDeliveryOfDisabledSubscription(deps.db, deliveryId);
        if (refusal.reason === 'claim-limit') {
          deps.logger.error('delivery failed: its attempt was claimed again and again without a recorded outcome', {
            deliveryId,
            subscriptionId,
            attempt,
            failureReason: refusal.failureReason,
          });
        }
        return;
      }
      const outcome = await deps.client.send(claim.attempt);
      const result = await recordOrDegrade(deps, claim.attempt, outcome);
      deps.metrics.attemptFinished(outcome, result, claim.attempt.lateMs);
      // winston formats (timestamp, JSON) every entry before its transport drops it by level: an
      // info line per attempt cost ~2 % of the dispatcher's CPU under LOG_LEVEL=warn.
      if (deps.logger.isInfoEnabled()) {
        deps.logger.info(outcome.ok ? 'delivery attempt succeeded' : 'delivery attempt failed', {
          deliveryId,
          subscriptionId,
          attempt,
          status: outcome.statusCode,
          error: outcome.error,
          durationMs: Math.round(outcome.durationMs),
          result: result.kind,
        });
      }
      if (result.kind === 'retry') {
        await enqueueDeliveries(deps.queues, [
          { deliveryId, subscriptionId, attempt: result.nextAttempt, delayMs: result.delayMs },
        ]).catch((error: Error) => {
          deps.logger.warn('retry enqueue failed; the sweep will queue it when due', { deliveryId, error: error.message });
        });
      } else if (result.kind === 'failed' && result.disabledSubscription) {
        deps.logger.warn('subscription auto-disabled after repeated permanent failures', { subscriptionId });
        await removeDeliveryJobs(deps.queues, result.cancelled).catch(() => undefined);
      }
    } finally {
      deps.slots.release(subscriptionId);
    }
  };
}
