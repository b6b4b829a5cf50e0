import { setTimeout as sleep } from 'node:timers/promises';
import { DelayedError, type Job } from 'bullmq';
import { enqueueDeliveries, MAX_ATTEMPTS, removeDeliveryJobs, type Db, type DeliveryJob, type Logger, type Queues } from '@svc/core';
import { failDeliveryOfDisabledSubscription, type AttemptOutcome, type ClaimedAttempt, type RecordResult } from '@svc/core/dispatcher';
import type { WebhookClient } from '../http/webhook-client.js';
import type { AttemptBatches } from './attempt-batches.js';
import { jobPriority, type DispatcherMetrics } from '../metrics/dispatcher-metrics.js';
import type { FairSlots } from './fair-slots.js';
import type { SigningSecrets } from './signing-secrets.js';
import type { SubscriptionAccounts } from './subscription-accounts.js';

/** Of an attempt's lease, what is kept back when retrying its record: past it, another dispatcher may claim it. */
const RECORD_DEADLINE_MARGIN_MS = 1_000;
const FIRST_RECORD_RETRY_MS = 25;
const MAX_RECORD_RETRY_MS = 500;

export interface DeliverDeps {
  db: Db;
  queues: Pick<Queues, 'deliveries'>;
  client: WebhookClient;
  /** Opens each claimed attempt's secrets before it is signed. */
  signing: SigningSecrets;
  slots: FairSlots;
  accounts: SubscriptionAccounts;
  /** The lease a claim takes (WEBHOOK_TIMEOUT_MS + ATTEMPT_LEASE_MARGIN_MS): a record is retried within it. */
  leaseMs: number;
  /** Claims and records, batched across the attempts in flight. */
  batches: AttemptBatches;
  logger: Logger;
  metrics: Pick<DispatcherMetrics, 'attemptFinished' | 'claimBusy' | 'recordRetried'>;
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

/**
 * An attempt not sent because its secret cannot be opened: it fails as a network error does,
 * retried on the schedule, with the reason in the delivery log.
 */
function unsentOutcome(error: string) {
  return { startedAt: new Date(), durationMs: 0, statusCode: null, error, responseBytes: null, ok: false, failure: 'other' as const };
}

async function putBack(job: Job, token: string | undefined, inMs: number): Promise<never> {
  await job.moveToDelayed(Date.now() + Math.ceil(inMs), token);
  throw new DelayedError();
}

function isDataError(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('22');
}

/**
 * Records a known outcome, so that the attempt is never sent again for want of a record. A
 * record is idempotent (its attempt row is unique, and it moves only a delivery still waiting
 * for that attempt), so every failure is retried with the same outcome while the lease lasts:
 * a deadlock, a serialization failure, a lock or statement timeout, a connection lost before
 * or after COMMIT. If Postgres refuses the record itself (a data error, class 22), the outcome
 * is recorded without the receiver's bytes. Past the lease the error propagates: the attempt
 * may then be claimed and sent again, and the claim limit bounds how often.
 */
async function recordKnownOutcome(deps: DeliverDeps, attempt: Pick<ClaimedAttempt, 'deliveryId' | 'subscriptionId' | 'attempt'>, outcome: AttemptOutcome, deadline: number): Promise<RecordResult> {
  let current = outcome;
  let waitMs = FIRST_RECORD_RETRY_MS;
  for (;;) {
    try {
      return await deps.batches.record(attempt, current);
    } catch (error) {
      const context = { deliveryId: attempt.deliveryId, attempt: attempt.attempt, error: (error as Error).message, code: (error as { code?: unknown }).code };
      if (isDataError(error) && current === outcome) {
        deps.logger.error('attempt outcome refused by Postgres; recording it without the response bytes', context);
        current = { ...outcome, responseBytes: null, error: outcome.error?.replace(/[^\x20-\x7e]/g, '?') ?? null };
        continue;
      }
      if (Date.now() + waitMs > deadline) throw error;
      deps.logger.warn('recording an attempt outcome failed; retrying it', context);
      deps.metrics.recordRetried();
      await sleep(waitMs);
      waitMs = Math.min(MAX_RECORD_RETRY_MS, waitMs * 2);
    }
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
    const admission = await deps.slots.acquire(await deps.accounts.accountOf(subscriptionId), subscriptionId);
    // No room to wait here: back to the queue for about as long as its account's waiting attempts take.
    if (!('slot' in admission)) return putBack(job, token, admission.backInMs);
    const { slot } = admission;
    try {
      const claimedFrom = Date.now();
      const claim = await deps.batches.claim({ deliveryId, attempt });
      if (!claim.claimed) {
        const { refusal } = claim;
        if (refusal.reason === 'not-due' || refusal.reason === 'in-flight-elsewhere') {
          await putBack(job, token, refusal.retryInMs);
        }
        if (refusal.reason === 'busy') {
          deps.metrics.claimBusy();
          await putBack(job, token, refusal.retryInMs * (1 + Math.random()));
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
      const signable = deps.signing.open(claim.attempt);
      const outcome = 'unavailable' in signable ? unsentOutcome(signable.unavailable) : await deps.client.send(signable.attempt);
      const result = await recordKnownOutcome(deps, claim.attempt, outcome, claimedFrom + deps.leaseMs - RECORD_DEADLINE_MARGIN_MS);
      deps.metrics.attemptFinished(outcome, result, claim.attempt.lateMs, jobPriority(job.opts.priority));
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
        await removeDeliveryJobs(deps.queues, subscriptionId, result.cancelled).catch(() => undefined);
      }
    } finally {
      slot.release();
    }
  };
}
