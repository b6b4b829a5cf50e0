import type { Db } from '../db/knex.js';
import { NotFoundError } from '../errors.js';
import type { AiMonitorRun } from '../ai-monitor/ai-run.repository.js';
import { assertPowerUpId, type PowerUpDeployment } from '../power-ups/deployment.repository.js';
import { parseEngineScores } from '../ai-monitor/engine-scores.js';
import { parseScanCategories } from '../scans/scan-inputs.js';
import { assertScore, explainNotRunning, type Scan } from '../scans/scan.repository.js';
import { producerBatchesFor, type ProducerDeps } from './producer-batches.js';

export type { ProducerDeps } from './producer-batches.js';

/*
 * The one producer sequence (operator contract §4): record the fact and its event in one
 * transaction — one statement (producer-statements.ts), which also fans the event out — then
 * announce the event or its first attempts. Calls made together share the statement and the
 * announcement (producer-batches.ts, ADR 14); each call still answers only for itself.
 */

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
  const produced = await producerBatchesFor(deps).submit({ kind: 'scan', scanId: input.scanId, score, categories });
  if (!produced) return refuseScan(deps.db, input.scanId);
  return { scan: produced.fact as Scan, eventId: produced.eventId };
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
  const produced = await producerBatchesFor(deps).submit({ kind: 'aiRun', siteId: input.siteId, compositeScore, engines });
  if (!produced) return missingSite(input.siteId);
  return { run: produced.fact as AiMonitorRun, eventId: produced.eventId };
}

/** Records a successful Power-Up deployment and its `power_up.deployed` event, then enqueues it. */
export async function deployPowerUp(
  deps: ProducerDeps,
  input: { siteId: string; powerUpId: string },
): Promise<{ deployment: PowerUpDeployment; eventId: string }> {
  const powerUpId = assertPowerUpId(input.powerUpId);
  const produced = await producerBatchesFor(deps).submit({ kind: 'deployment', siteId: input.siteId, powerUpId });
  if (!produced) return missingSite(input.siteId);
  return { deployment: produced.fact as PowerUpDeployment, eventId: produced.eventId };
}

function missingSite(siteId: string): never {
  throw new NotFoundError(`site ${siteId} does not exist`);
}

/** Why a scan could not be completed: it does not exist, or it is not running. */
async function refuseScan(db: Db, scanId: string): Promise<never> {
  throw await explainNotRunning(db, scanId);
}
