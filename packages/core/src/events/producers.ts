import type { Db } from '../db/knex.js';
import { NotFoundError } from '../errors.js';
import type { Logger } from '../logger.js';
import { enqueueAfterCommit } from '../queues/enqueue-after-commit.js';
import { enqueueDeliveries, enqueueFanout, type Queues } from '../queues/queues.js';
import type { ProducerFanOut } from '../deliveries/fan-out.js';
import type { AiMonitorRun } from '../ai-monitor/ai-run.repository.js';
import { assertPowerUpId, type PowerUpDeployment } from '../power-ups/deployment.repository.js';
import { parseEngineScores } from '../ai-monitor/engine-scores.js';
import { parseScanCategories } from '../scans/scan-inputs.js';
import { assertScore, explainNotRunning, type Scan } from '../scans/scan.repository.js';
import { completeScanWithEvent, insertAiRunWithEvent, insertDeploymentWithEvent } from './producer-statements.js';

/** What a producer needs: the database, both queues, and a logger for a failed enqueue. */
export interface ProducerDeps {
  db: Db;
  queues: Pick<Queues, 'fanout' | 'delivery'>;
  logger?: Pick<Logger, 'warn'>;
}

/**
 * After commit, hand the event to the dispatcher. When the producer's statement fanned it out
 * (ADR 13) that is its first attempts' jobs, and nothing at all for an event no subscription
 * wants; otherwise (an account with more than PRODUCER_FAN_OUT_MAX matching subscriptions) its
 * fan-out job. If Redis is away the rows are already in Postgres: the sweep queues the overdue
 * first attempts, or fans out the event whose fanned_out_at is still empty.
 */
function announce(deps: ProducerDeps, eventId: string, fanOut: ProducerFanOut): Promise<void> {
  if (fanOut.fannedOut && fanOut.firstAttempts.length === 0) return Promise.resolve();
  return enqueueAfterCommit(
    () =>
      fanOut.fannedOut
        ? enqueueDeliveries(deps.queues, fanOut.firstAttempts.map((attempt) => ({ ...attempt, attempt: 1, delayMs: 0 })))
        : enqueueFanout(deps.queues, eventId),
    deps.logger,
    // The operators' message since the first release (alerts match it); for an event fanned out
    // by its producer, "fan it out" is the sweep queueing its overdue first attempts.
    'event enqueue failed; the dispatcher sweep will fan it out',
    { eventId },
  );
}

/**
 * The one producer sequence (operator contract §4): record the fact and its event in one
 * transaction — one statement (producer-statements.ts), which also fans the event out — then
 * announce the event or its first attempts.
 */
async function produce<T extends { eventId: string }>(deps: ProducerDeps, record: () => Promise<T & { fanOut: ProducerFanOut }>): Promise<T> {
  const { fanOut, ...result } = await record();
  await announce(deps, result.eventId, fanOut);
  return result as unknown as T;
}

/**
 * Records a completed scan, with its optional per-category breakdown, and its `scan.completed`
 * event in one transaction, then enqueues it. The event's data stays as spec §6.1 has it. Bad
 * input is refused with InputError before anything is written.
 */
export async function completeScan(
  deps: ProducerDeps,
  input: { scanId: string; score: number; categories?: unknown },
): Promise<{ scan: Scan; eventId: string }> {
  const score = assertScore(input.score);
  const categories = parseScanCategories(input.categories);
  return produce(
    deps,
    async () => (await completeScanWithEvent(deps.db, input.scanId, score, categories)) ?? (await refuseScan(deps.db, input.scanId)),
  );
}

/**
 * Records a completed AI Monitor run, with its optional per-engine breakdown, and its
 * `ai_check.completed` event, then enqueues it. The event's data stays as spec §6.1 has it.
 */
export async function completeAiMonitorRun(
  deps: ProducerDeps,
  input: { siteId: string; compositeScore: number; engines?: unknown },
): Promise<{ run: AiMonitorRun; eventId: string }> {
  const compositeScore = assertScore(input.compositeScore, 'compositeScore');
  const engines = parseEngineScores(input.engines);
  return produce(deps, async () => (await insertAiRunWithEvent(deps.db, input.siteId, compositeScore, engines)) ?? missingSite(input.siteId));
}

/** Records a successful Power-Up deployment and its `power_up.deployed` event, then enqueues it. */
export async function deployPowerUp(
  deps: ProducerDeps,
  input: { siteId: string; powerUpId: string },
): Promise<{ deployment: PowerUpDeployment; eventId: string }> {
  const powerUpId = assertPowerUpId(input.powerUpId);
  return produce(deps, async () => (await insertDeploymentWithEvent(deps.db, input.siteId, powerUpId)) ?? missingSite(input.siteId));
}

function missingSite(siteId: string): never {
  throw new NotFoundError(`site ${siteId} does not exist`);
}

/** Why a scan could not be completed: it does not exist, or it is not running. */
async function refuseScan(db: Db, scanId: string): Promise<never> {
  throw await explainNotRunning(db, scanId);
}
