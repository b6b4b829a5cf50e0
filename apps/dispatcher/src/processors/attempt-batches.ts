import { type Db } from '@svc/core';
import { claimAttempts, recordAttempts, type AttemptOutcome, type AttemptRequest, type ClaimedAttempt, type ClaimResult, type FinishedAttempt, type RecordResult } from '@svc/core/dispatcher';
import { MicroBatcher } from '@svc/core/dispatcher';

/** At most the attempts a dispatcher has in flight (DISPATCHER_CONCURRENCY) per statement. */
const MAX_BATCH = 100;
/** Batches on the wire at once per kind: one forming while one commits keeps the pipeline full. */
const MAX_IN_FLIGHT = 2;

export interface AttemptBatches {
  /** claimAttempts, batched with the claims other workers of this process make meanwhile. */
  claim(request: AttemptRequest): Promise<ClaimResult>;
  /** recordAttempts, batched likewise. */
  record(attempt: Pick<ClaimedAttempt, 'deliveryId' | 'subscriptionId' | 'attempt'>, outcome: AttemptOutcome): Promise<RecordResult>;
  /** How long claims have waited with none answered meanwhile: readiness reports a claim loop that makes no progress. */
  claimsStalledForMs(): number;
}

/** Claims and records of the attempts in flight, paid per batch: one transaction (one commit) each. */
export function createAttemptBatches(deps: { db: Db; leaseMs: number; retryDelaysMs: readonly number[] }): AttemptBatches {
  const claims = new MicroBatcher<AttemptRequest, ClaimResult>((requests) => claimAttempts(deps.db, requests, deps.leaseMs), {
    maxBatch: MAX_BATCH,
    maxInFlight: MAX_IN_FLIGHT,
    key: (request) => request.deliveryId,
  });
  const records = new MicroBatcher<FinishedAttempt, RecordResult>((finished) => recordAttempts(deps.db, finished, deps.retryDelaysMs), {
    maxBatch: MAX_BATCH,
    maxInFlight: MAX_IN_FLIGHT,
    key: (finished) => finished.attempt.deliveryId,
  });
  return {
    claim: (request) => claims.submit(request),
    claimsStalledForMs: () => claims.stalledForMs(),
    record: (attempt, outcome) => records.submit({ attempt, outcome }),
  };
}
