import type { Db } from '../db/knex.js';
import { InputError, NotFoundError } from '../errors.js';
import { newId } from '../ids.js';
import type { Logger } from '../logger.js';
import { enqueueFanout, type Queues } from '../queues/queues.js';
import { assertScore, markScanCompleted, type Scan } from '../scans/scan.repository.js';
import { findSiteById } from '../sites/site.repository.js';
import { insertEvent } from './event.repository.js';

/** What a producer needs: the database, the fan-out queue, and a logger for a failed enqueue. */
export interface ProducerDeps {
  db: Db;
  queues: Pick<Queues, 'fanout'>;
  logger?: Pick<Logger, 'warn'>;
}

/** A producer never waits longer than this on Redis: the event is committed and the sweep has it. */
const ENQUEUE_TIMEOUT_MS = 2_000;

/**
 * After commit, hand the event to the dispatcher. If Redis is away the event is already safe in
 * Postgres, and the dispatcher's sweep fans it out later, so this never fails the producer.
 */
async function announce(deps: ProducerDeps, eventId: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      enqueueFanout(deps.queues, eventId),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Redis did not accept the job within ${ENQUEUE_TIMEOUT_MS} ms`)), ENQUEUE_TIMEOUT_MS);
      }),
    ]);
  } catch (error) {
    deps.logger?.warn('event enqueue failed; the dispatcher sweep will fan it out', {
      eventId,
      error: (error as Error).message,
    });
  } finally {
    clearTimeout(timer);
  }
}

/** Records a completed scan and its `scan.completed` event in one transaction, then enqueues it. */
export async function completeScan(
  deps: ProducerDeps,
  input: { scanId: string; score: number },
): Promise<{ scan: Scan; eventId: string }> {
  const score = assertScore(input.score);
  const result = await deps.db.transaction(async (tx) => {
    const scan = await markScanCompleted(tx, input.scanId, score);
    const site = await findSiteById(tx, scan.siteId);
    if (!site) throw new NotFoundError(`site ${scan.siteId} does not exist`);
    const event = await insertEvent(tx, site.accountId, 'scan.completed', {
      scanId: scan.id,
      siteId: site.id,
      domain: site.domain,
      score,
    });
    return { scan, eventId: event.id };
  });
  await announce(deps, result.eventId);
  return result;
}

export interface AiMonitorRun {
  id: string;
  siteId: string;
  compositeScore: number;
  completedAt: Date;
}

/** Records a completed AI Monitor run and its `ai_check.completed` event, then enqueues it. */
export async function completeAiMonitorRun(
  deps: ProducerDeps,
  input: { siteId: string; compositeScore: number },
): Promise<{ run: AiMonitorRun; eventId: string }> {
  const compositeScore = assertScore(input.compositeScore, 'compositeScore');
  const result = await deps.db.transaction(async (tx) => {
    const site = await findSiteById(tx, input.siteId);
    if (!site) throw new NotFoundError(`site ${input.siteId} does not exist`);
    const [row] = await tx('ai_monitor_runs')
      .insert({ id: newId('run'), site_id: site.id, composite_score: compositeScore })
      .returning(['id', 'completed_at']);
    const event = await insertEvent(tx, site.accountId, 'ai_check.completed', {
      runId: row.id,
      siteId: site.id,
      domain: site.domain,
      compositeScore,
    });
    const run: AiMonitorRun = { id: row.id, siteId: site.id, compositeScore, completedAt: row.completed_at };
    return { run, eventId: event.id };
  });
  await announce(deps, result.eventId);
  return result;
}

export interface PowerUpDeployment {
  id: string;
  siteId: string;
  powerUpId: string;
  deployedAt: Date;
}

/** Records a successful Power-Up deployment and its `power_up.deployed` event, then enqueues it. */
export async function deployPowerUp(
  deps: ProducerDeps,
  input: { siteId: string; powerUpId: string },
): Promise<{ deployment: PowerUpDeployment; eventId: string }> {
  const powerUpId = input.powerUpId.trim();
  if (!powerUpId || powerUpId.length > 200) throw new InputError('powerUpId must be 1-200 characters');
  const result = await deps.db.transaction(async (tx) => {
    const site = await findSiteById(tx, input.siteId);
    if (!site) throw new NotFoundError(`site ${input.siteId} does not exist`);
    const [row] = await tx('power_up_deployments')
      .insert({ id: newId('dep'), site_id: site.id, power_up_id: powerUpId })
      .returning(['id', 'deployed_at']);
    const event = await insertEvent(tx, site.accountId, 'power_up.deployed', {
      deploymentId: row.id,
      siteId: site.id,
      powerUpId,
    });
    const deployment: PowerUpDeployment = { id: row.id, siteId: site.id, powerUpId, deployedAt: row.deployed_at };
    return { deployment, eventId: event.id };
  });
  await announce(deps, result.eventId);
  return result;
}
