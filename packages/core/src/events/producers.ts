import type { Db } from '../db/knex.js';
import { ConflictError, InputError, NotFoundError } from '../errors.js';
import { newId } from '../ids.js';
import type { AiMonitorRun } from '../ai-monitor/ai-run.repository.js';
import { assertPowerUpId, type PowerUpDeployment } from '../power-ups/deployment.repository.js';
import { parseEngineScores } from '../ai-monitor/engine-scores.js';
import { parseScanCategories } from '../scans/scan-inputs.js';
import { assertScore, explainNotRunning, type Scan } from '../scans/scan.repository.js';
import { producerBatchesFor, type ProducerAnswer, type ProducerDeps } from './producer-batches.js';
import type { ProducerInput } from './producer-statements.js';

export type { ProducerDeps } from './producer-batches.js';

/*
 * The one producer sequence (operator contract §4): record the fact and its event in one
 * transaction — one statement (producer-statements.ts), which also fans the event out — then
 * announce the event or its first attempts. Calls made together share the statement and the
 * announcement (producer-batches.ts, ADR 11); each call still answers only for itself.
 *
 * Each call's identity (its event's and fact's ids, and the producer's idempotency key if given)
 * is fixed here, before the first try, and every try writes it: a try that follows a lost
 * connection, whose commit may have happened, records nothing twice and answers what was recorded.
 */

/** An idempotency key: 1 to 200 visible ASCII characters (a UUID, `scanner:job-42`). */
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;

/** Optional on every producer call: the key a producer's own retry of the call passes again. */
export interface IdempotentCall {
  /**
   * Names the call across tries and processes: a call with a key already recorded records
   * nothing and answers the recorded fact and event id; with other input, ConflictError. Unique
   * service-wide, remembered as long as the event is kept.
   */
  idempotencyKey?: string;
}

/**
 * Records a completed scan, with its optional per-category breakdown, and its `scan.completed`
 * event in one transaction, then enqueues it. The event's data stays as spec §6.1 has it. Bad
 * input is refused with InputError before anything is written.
 */
export async function completeScan(
  deps: ProducerDeps,
  input: { scanId: string; score: number; categories?: unknown } & IdempotentCall,
): Promise<{ scan: Scan; eventId: string }> {
  const score = assertScore(input.score);
  const categories = parseScanCategories(input.categories);
  const produced = await submit(deps, { kind: 'scan', scanId: input.scanId, score, categories, ...identityOf(input) });
  if (!produced) return refuseScan(deps.db, input.scanId);
  return { scan: produced.fact as Scan, eventId: produced.eventId };
}

/**
 * Records a completed AI Monitor run, with its optional per-engine breakdown, and its
 * `ai_check.completed` event, then enqueues it. The event's data stays as spec §6.1 has it.
 */
export async function completeAiMonitorRun(
  deps: ProducerDeps,
  input: { siteId: string; compositeScore: number; engines?: unknown } & IdempotentCall,
): Promise<{ run: AiMonitorRun; eventId: string }> {
  const compositeScore = assertScore(input.compositeScore, 'compositeScore');
  const engines = parseEngineScores(input.engines);
  const produced = await submit(deps, { kind: 'aiRun', siteId: input.siteId, compositeScore, engines, runId: newId('run'), ...identityOf(input) });
  if (!produced) return missingSite(input.siteId);
  return { run: produced.fact as AiMonitorRun, eventId: produced.eventId };
}

/** Records a successful Power-Up deployment and its `power_up.deployed` event, then enqueues it. */
export async function deployPowerUp(
  deps: ProducerDeps,
  input: { siteId: string; powerUpId: string } & IdempotentCall,
): Promise<{ deployment: PowerUpDeployment; eventId: string }> {
  const powerUpId = assertPowerUpId(input.powerUpId);
  const produced = await submit(deps, { kind: 'deployment', siteId: input.siteId, powerUpId, deploymentId: newId('dep'), ...identityOf(input) });
  if (!produced) return missingSite(input.siteId);
  return { deployment: produced.fact as PowerUpDeployment, eventId: produced.eventId };
}

/** The call's event id and key, checked before anything is written. */
function identityOf(input: IdempotentCall): { eventId: string; idempotencyKey: string | null } {
  const key = input.idempotencyKey;
  if (key !== undefined && (typeof key !== 'string' || !IDEMPOTENCY_KEY.test(key))) {
    throw new InputError('idempotencyKey must be 1 to 200 visible ASCII characters');
  }
  return { eventId: newId('evt'), idempotencyKey: key ?? null };
}

/** Submits a call to the process's batches; its logger goes with it (not part of the batcher's key). */
async function submit(deps: ProducerDeps, input: ProducerInput): Promise<Exclude<ProducerAnswer, ConflictError>> {
  const answer = await producerBatchesFor(deps).submit(deps.logger ? { input, logger: deps.logger } : { input });
  if (answer instanceof ConflictError) throw answer;
  return answer;
}

function missingSite(siteId: string): never {
  throw new NotFoundError(`site ${siteId} does not exist`);
}

/** Why a scan could not be completed: it does not exist, or it is not running. */
async function refuseScan(db: Db, scanId: string): Promise<never> {
  throw await explainNotRunning(db, scanId);
}
