/**
 * The fact and its event in ONE statement each (operator contract §4: one transaction), so a
 * producer pays one round trip and one commit for both, not BEGIN, a read, two inserts and
 * COMMIT. Each statement reads what it needs (the site, the scan) in the same snapshot and
 * inserts nothing when that row does not exist or is in the wrong state (no row comes back).
 * Each also fans its event out (producerFanOutSql, ADR 13) and answers the first attempts to queue.
 */

/** The fan-out of a producer's statement over its `site` CTE. */
const fanOut = producerFanOutSql({ from: 'site', accountIdSql: 'site.account_id' });
import type { Db } from '../db/knex.js';
import { runNamedStatement } from '../db/named-statement.js';
import { newId } from '../ids.js';
import { toAiMonitorRun, type AiMonitorRun, type AiMonitorRunRow } from '../ai-monitor/ai-run.repository.js';
import type { EngineScore } from '../ai-monitor/engine-scores.js';
import type { PowerUpDeployment } from '../power-ups/deployment.repository.js';
import type { ScanCategory } from '../scans/scan-inputs.js';
import { toScan, type Scan, type ScanRow } from '../scans/scan.repository.js';
import { producerFanOutSql, toProducerFanOut, type ProducerFanOut } from '../deliveries/fan-out.js';
import { eventInsertCte } from './event.repository.js';

/** Records a Power-Up deployment and its `power_up.deployed` event; undefined when the site does not exist. */
export async function insertDeploymentWithEvent(
  db: Db,
  siteId: string,
  powerUpId: string,
): Promise<{ deployment: PowerUpDeployment; eventId: string; fanOut: ProducerFanOut } | undefined> {
  const deploymentId = newId('dep');
  const event = eventInsertCte(
    'power_up.deployed',
    { deploymentId, siteId, powerUpId },
    { from: 'fact JOIN site ON site.id = fact.site_id', accountIdSql: 'site.account_id', fannedOutSql: fanOut.fannedOutSql },
  );
  const [row] = await runNamedStatement<{ id: string; site_id: string; power_up_id: string; deployed_at: Date; first_attempts: unknown; fanned_out: boolean }>(
    db,
    'svc_produce_power_up_deployed_v3',
    `WITH site AS (SELECT id, account_id FROM sites WHERE id = :siteId),
       fact AS (
         INSERT INTO power_up_deployments (id, site_id, power_up_id) SELECT :deploymentId, site.id, :powerUpId FROM site
         RETURNING id, site_id, power_up_id, deployed_at
       ), ${fanOut.targetsCte}, ${event.sql}, ${fanOut.createdCte}
       SELECT fact.id, fact.site_id, fact.power_up_id, fact.deployed_at, ${fanOut.firstAttemptsSql} FROM fact, event`,
    { ...event.bindings, ...fanOut.bindings, siteId, deploymentId, powerUpId },
  );
  if (!row) return undefined;
  return {
    deployment: { id: row.id, siteId: row.site_id, powerUpId: row.power_up_id, deployedAt: row.deployed_at },
    eventId: event.eventId,
    fanOut: toProducerFanOut(row),
  };
}

/** Records a completed AI Monitor run and its `ai_check.completed` event; undefined when the site does not exist. */
export async function insertAiRunWithEvent(
  db: Db,
  siteId: string,
  compositeScore: number,
  engines: EngineScore[],
): Promise<{ run: AiMonitorRun; eventId: string; fanOut: ProducerFanOut } | undefined> {
  const runId = newId('run');
  const event = eventInsertCte(
    'ai_check.completed',
    { runId, siteId, domain: '', compositeScore },
    { from: 'fact JOIN site ON site.id = fact.site_id', accountIdSql: 'site.account_id', fromDatabase: { domain: 'site.domain' }, fannedOutSql: fanOut.fannedOutSql },
  );
  const [row] = await runNamedStatement<(AiMonitorRunRow & { first_attempts: unknown; fanned_out: boolean })>(
    db,
    'svc_produce_ai_check_completed_v4',
    `WITH site AS (SELECT id, account_id, domain FROM sites WHERE id = :siteId),
       fact AS (
         INSERT INTO ai_monitor_runs (id, site_id, composite_score, engines) SELECT :runId, site.id, :compositeScore, :engines::jsonb FROM site
         RETURNING id, site_id, composite_score, completed_at, engines
       ), ${fanOut.targetsCte}, ${event.sql}, ${fanOut.createdCte}
       SELECT fact.id, fact.site_id, fact.composite_score, fact.completed_at, fact.engines, ${fanOut.firstAttemptsSql} FROM fact, event`,
    { ...event.bindings, ...fanOut.bindings, siteId, runId, compositeScore, engines: JSON.stringify(engines) },
  );
  if (!row) return undefined;
  return { run: toAiMonitorRun(row), eventId: event.eventId, fanOut: toProducerFanOut(row) };
}

/** Completes a running scan and records its `scan.completed` event; undefined when the scan is not running (or missing). */
export async function completeScanWithEvent(
  db: Db,
  scanId: string,
  score: number,
  categories: ScanCategory[],
): Promise<{ scan: Scan; eventId: string; fanOut: ProducerFanOut } | undefined> {
  const event = eventInsertCte(
    'scan.completed',
    { scanId, siteId: '', domain: '', score },
    {
      from: 'fact JOIN site ON site.id = fact.site_id',
      accountIdSql: 'site.account_id',
      fromDatabase: { siteId: 'site.id', domain: 'site.domain' },
      fannedOutSql: fanOut.fannedOutSql,
    },
  );
  const [row] = await runNamedStatement<(ScanRow & { first_attempts: unknown; fanned_out: boolean })>(
    db,
    'svc_produce_scan_completed_v4',
    `WITH fact AS (
         UPDATE scans SET status = 'completed', score = :score, completed_at = CURRENT_TIMESTAMP(3), categories = :categories::jsonb
          WHERE id = :scanId AND status = 'running'
         RETURNING id, site_id, status, score, trigger, started_at, completed_at, failed_at, categories
       ), site AS (SELECT s.id, s.account_id, s.domain FROM sites s WHERE s.id IN (SELECT site_id FROM fact)),
       ${fanOut.targetsCte}, ${event.sql}, ${fanOut.createdCte}
       SELECT fact.*, ${fanOut.firstAttemptsSql} FROM fact, event`,
    { ...event.bindings, ...fanOut.bindings, scanId, score, categories: JSON.stringify(categories) },
  );
  if (!row) return undefined;
  const scan = toScan(row);
  return { scan, eventId: event.eventId, fanOut: toProducerFanOut(row) };
}
