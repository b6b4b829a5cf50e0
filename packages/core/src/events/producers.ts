import type { Db, DbOrTx } from '../db/knex.js';
import { NotFoundError } from '../errors.js';
import type { Logger } from '../logger.js';
import { enqueueAfterCommit } from '../queues/enqueue-after-commit.js';
import { enqueueFanout, type Queues } from '../queues/queues.js';
import { insertAiMonitorRun, type AiMonitorRun } from '../ai-monitor/ai-run.repository.js';
import { parseEngineScores } from '../ai-monitor/engine-scores.js';
import { parseScanCategories } from '../scans/scan-inputs.js';
import { assertPowerUpId, insertPowerUpDeployment, type PowerUpDeployment } from '../power-ups/deployment.repository.js';
import { assertScore, markScanCompleted, type Scan } from '../scans/scan.repository.js';
import { findSiteById, type SiteSummary } from '../sites/site.repository.js';
import { insertEvent } from './event.repository.js';

/** What a producer needs: the database, the fan-out queue, and a logger for a failed enqueue. */
export interface ProducerDeps {
  db: Db;
  queues: Pick<Queues, 'fanout'>;
  logger?: Pick<Logger, 'warn'>;
}

/** After commit, hand the event to the dispatcher; the sweep fans it out if Redis is away. */
function announce(deps: ProducerDeps, eventId: string): Promise<void> {
  return enqueueAfterCommit(() => enqueueFanout(deps.queues, eventId), deps.logger, 'event enqueue failed; the dispatcher sweep will fan it out', { eventId });
}

/**
 * The one producer sequence (operator contract §4): record the fact and its event in one
 * transaction, then announce the event. `record` returns the fact and the event's id.
 */
async function produce<T>(deps: ProducerDeps, record: (tx: DbOrTx) => Promise<T & { eventId: string }>): Promise<T & { eventId: string }> {
  const result = await deps.db.transaction(record);
  await announce(deps, result.eventId);
  return result;
}

async function requireSite(tx: DbOrTx, siteId: string): Promise<SiteSummary & { accountId: string }> {
  const site = await findSiteById(tx, siteId);
  if (!site) throw new NotFoundError(`site ${siteId} does not exist`);
  return site;
}

/**
 * Records a completed scan, with its optional per-category breakdown, and its `scan.completed`
 * event in one transaction, then enqueues it. The event's data stays as spec §6.1 has it.
 */
export async function completeScan(
  deps: ProducerDeps,
  input: { scanId: string; score: number; categories?: unknown },
): Promise<{ scan: Scan; eventId: string }> {
  const score = assertScore(input.score);
  const categories = parseScanCategories(input.categories);
  return produce(deps, async (tx) => {
    const scan = await markScanCompleted(tx, input.scanId, score, categories);
    const site = await requireSite(tx, scan.siteId);
    const event = await insertEvent(tx, site.accountId, 'scan.completed', { scanId: scan.id, siteId: site.id, domain: site.domain, score });
    return { scan, eventId: event.id };
  });
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
  return produce(deps, async (tx) => {
    const site = await requireSite(tx, input.siteId);
    const run = await insertAiMonitorRun(tx, site.id, compositeScore, engines);
    const event = await insertEvent(tx, site.accountId, 'ai_check.completed', { runId: run.id, siteId: site.id, domain: site.domain, compositeScore });
    return { run, eventId: event.id };
  });
}

/** Records a successful Power-Up deployment and its `power_up.deployed` event, then enqueues it. */
export async function deployPowerUp(
  deps: ProducerDeps,
  input: { siteId: string; powerUpId: string },
): Promise<{ deployment: PowerUpDeployment; eventId: string }> {
  const powerUpId = assertPowerUpId(input.powerUpId);
  return produce(deps, async (tx) => {
    const site = await requireSite(tx, input.siteId);
    const deployment = await insertPowerUpDeployment(tx, site.id, powerUpId);
    const event = await insertEvent(tx, site.accountId, 'power_up.deployed', { deploymentId: deployment.id, siteId: site.id, powerUpId });
    return { deployment, eventId: event.id };
  });
}
