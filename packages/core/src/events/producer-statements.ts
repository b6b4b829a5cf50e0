/**
 * The facts and their events in ONE statement per batch of producer calls (operator contract §4:
 * each fact and its event in one transaction; ADR 14: the calls a process makes together share
 * that transaction). A batch of one is a single call. Each statement reads what it needs (the
 * site, the scan) in the same snapshot and inserts nothing for an input whose row does not exist
 * or is in the wrong state (no row comes back for that input). Each also fans its events out
 * (at most PRODUCER_FAN_OUT_MAX matching subscriptions per event, ADR 13) and answers the first
 * attempts to queue. The SQL text is the same for every batch size (arrays, unnest), so each is
 * one prepared statement per connection.
 */
import type { Db } from '../db/knex.js';
import { runNamedStatement } from '../db/named-statement.js';
import { newId } from '../ids.js';
import { toAiMonitorRun, type AiMonitorRun, type AiMonitorRunRow } from '../ai-monitor/ai-run.repository.js';
import type { EngineScore } from '../ai-monitor/engine-scores.js';
import type { PowerUpDeployment } from '../power-ups/deployment.repository.js';
import type { ScanCategory } from '../scans/scan-inputs.js';
import { toScan, type Scan, type ScanRow } from '../scans/scan.repository.js';
import { producerFanOutSql, toProducerFanOut, type ProducerFanOut } from '../deliveries/fan-out.js';
import { eventBodySegments, type EventDataByType, type EventType } from './event-types.js';

/** What a producer statement answers for one input: the fact, its event, and its fan-out. */
export type Produced<F> = { fact: F; eventId: string; fanOut: ProducerFanOut } | undefined;

/**
 * The event body of each input row as SQL: the literal segments come from the batch, one text[]
 * binding per position (`:evSeg<i>`, unnested as column `seg<i>` of `input`), the timestamp from
 * the database's clock and `fromDatabase` fields from the statement (docs of eventBodySegments).
 * The segments' positions depend only on the type and the fields, so the SQL is the same for
 * every batch; a dummy event gives them.
 */
function eventBodyTemplate<T extends EventType>(type: T, dummy: EventDataByType[T], fromDatabase: Partial<Record<keyof EventDataByType[T] & string, string>>) {
  const fields = Object.keys(fromDatabase) as Array<keyof EventDataByType[T] & string>;
  const segments = eventBodySegments(type, dummy, fields);
  const literalPositions: number[] = [];
  const sql = segments
    .map((segment, i) => {
      if (typeof segment === 'string') {
        literalPositions.push(i);
        return `input.seg${i}`;
      }
      if (segment.field === 'timestamp') return `to_json(to_char(clock.now AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text`;
      return `to_json((${fromDatabase[segment.field as keyof typeof fromDatabase] as string})::text)::text`;
    })
    .join(' || ');
  return {
    sql,
    /** `, :evSeg<i>::text[]` for the unnest, and `, seg<i>` for its column list. */
    unnestArgs: literalPositions.map((i) => `, :evSeg${i}::text[]`).join(''),
    unnestColumns: literalPositions.map((i) => `, seg${i}`).join(''),
    /** The literal segments of each event, as the bindings `evSeg<i>`. */
    bindings(datas: ReadonlyArray<EventDataByType[T]>): Record<string, string[]> {
      const columns: Record<string, string[]> = Object.fromEntries(literalPositions.map((i) => [`evSeg${i}`, [] as string[]]));
      for (const data of datas) {
        const rowSegments = eventBodySegments(type, data, fields);
        for (const i of literalPositions) (columns[`evSeg${i}`] as string[]).push(rowSegments[i] as string);
      }
      return columns;
    },
  };
}

/** The fan-out of every producer statement, over its `site` CTE. */
const fanOut = producerFanOutSql('site');

/**
 * The CTEs shared by every producer statement, after `site` (one row per input with a site:
 * `input.*`, `account_id`) and `fact` (the facts written; `factOfInput` joins a `site` row to its
 * fact): `targets`, `event` (dated by the database's clock; fanned out when its targets fit),
 * `created` (producerFanOutSql). Then the answer per fact: its columns, `ord` (its input's
 * position), `event_id`, `first_attempts` and `fanned_out`.
 */
function fanOutAndEventSql(bodySql: string, factColumns: string, factOfInput: (alias: string) => string): string {
  return `${fanOut.targetsCte}, event AS (
       INSERT INTO events (id, account_id, type, body, created_at, fanned_out_at)
       SELECT input.ev_id, input.account_id, :evType, ${bodySql}, clock.now, ${fanOut.fannedOutSql('input.ev_id')}
         FROM fact JOIN site input ON ${factOfInput('input')}, (SELECT date_trunc('milliseconds', clock_timestamp()) AS now) clock
       RETURNING id, fanned_out_at
     ), ${fanOut.createdCte}
     SELECT ${factColumns}, site.ord, event.id AS event_id, ${fanOut.firstAttemptsSql('event')},
            event.fanned_out_at IS NOT NULL AS fanned_out
       FROM fact JOIN site ON ${factOfInput('site')} JOIN event ON event.id = site.ev_id`;
}

/** The columns every answer row has beside the fact's own. */
interface FanOutColumns {
  ord: string | number;
  event_id: string;
  first_attempts: unknown;
  fanned_out: boolean;
}

/** One answer per input, in input order: undefined where the statement wrote nothing. */
function byInput<R extends FanOutColumns, F>(count: number, rows: R[], toFact: (row: R) => F): Array<Produced<F>> {
  const answers: Array<Produced<F>> = new Array(count).fill(undefined);
  for (const row of rows) answers[Number(row.ord) - 1] = { fact: toFact(row), eventId: row.event_id, fanOut: toProducerFanOut(row) };
  return answers;
}

// ---------------------------------------------------------------------------------------------
// power_up.deployed

const deploymentBody = eventBodyTemplate('power_up.deployed', { deploymentId: '', siteId: '', powerUpId: '' }, {});

const DEPLOYMENTS_SQL = `WITH input AS (
       SELECT * FROM unnest(:siteIds::text[], :deploymentIds::text[], :powerUpIds::text[], :evIds::text[]${deploymentBody.unnestArgs})
         WITH ORDINALITY AS i(site_id, deployment_id, power_up_id, ev_id${deploymentBody.unnestColumns}, ord)
     ), site AS (
       SELECT input.*, s.account_id FROM input JOIN sites s ON s.id = input.site_id
     ), fact AS (
       INSERT INTO power_up_deployments (id, site_id, power_up_id) SELECT deployment_id, site_id, power_up_id FROM site
       RETURNING id, site_id, power_up_id, deployed_at
     ), ${fanOutAndEventSql(deploymentBody.sql, 'fact.id, fact.site_id, fact.power_up_id, fact.deployed_at', (a) => `${a}.deployment_id = fact.id`)}`;

/** Records Power-Up deployments and their `power_up.deployed` events; undefined for an input whose site does not exist. */
export async function insertDeploymentsWithEvents(
  db: Db,
  inputs: ReadonlyArray<{ siteId: string; powerUpId: string }>,
): Promise<Array<Produced<PowerUpDeployment>>> {
  const deploymentIds = inputs.map(() => newId('dep'));
  const evIds = inputs.map(() => newId('evt'));
  const rows = await runNamedStatement<{ id: string; site_id: string; power_up_id: string; deployed_at: Date } & FanOutColumns>(
    db,
    'svc_produce_power_up_deployed_v4',
    DEPLOYMENTS_SQL,
    {
      siteIds: inputs.map((input) => input.siteId),
      deploymentIds,
      powerUpIds: inputs.map((input) => input.powerUpId),
      evIds,
      ...deploymentBody.bindings(inputs.map((input, i) => ({ deploymentId: deploymentIds[i] as string, siteId: input.siteId, powerUpId: input.powerUpId }))),
      evType: 'power_up.deployed',
      ...fanOut.bindings,
    },
  );
  return byInput(inputs.length, rows, (row) => ({ id: row.id, siteId: row.site_id, powerUpId: row.power_up_id, deployedAt: row.deployed_at }));
}

// ---------------------------------------------------------------------------------------------
// ai_check.completed

const aiRunBody = eventBodyTemplate('ai_check.completed', { runId: '', siteId: '', domain: '', compositeScore: 0 }, { domain: 'input.domain' });

const AI_RUNS_SQL = `WITH input AS (
       SELECT * FROM unnest(:siteIds::text[], :runIds::text[], :compositeScores::float8[], :engines::text[], :evIds::text[]${aiRunBody.unnestArgs})
         WITH ORDINALITY AS i(site_id, run_id, composite_score, engines, ev_id${aiRunBody.unnestColumns}, ord)
     ), site AS (
       SELECT input.*, s.account_id, s.domain FROM input JOIN sites s ON s.id = input.site_id
     ), fact AS (
       INSERT INTO ai_monitor_runs (id, site_id, composite_score, engines) SELECT run_id, site_id, composite_score, engines::jsonb FROM site
       RETURNING id, site_id, composite_score, completed_at, engines
     ), ${fanOutAndEventSql(aiRunBody.sql, 'fact.id, fact.site_id, fact.composite_score, fact.completed_at, fact.engines', (a) => `${a}.run_id = fact.id`)}`;

/** Records completed AI Monitor runs and their `ai_check.completed` events; undefined for an input whose site does not exist. */
export async function insertAiRunsWithEvents(
  db: Db,
  inputs: ReadonlyArray<{ siteId: string; compositeScore: number; engines: EngineScore[] }>,
): Promise<Array<Produced<AiMonitorRun>>> {
  const runIds = inputs.map(() => newId('run'));
  const rows = await runNamedStatement<AiMonitorRunRow & FanOutColumns>(db, 'svc_produce_ai_check_completed_v5', AI_RUNS_SQL, {
    siteIds: inputs.map((input) => input.siteId),
    runIds,
    compositeScores: inputs.map((input) => input.compositeScore),
    engines: inputs.map((input) => JSON.stringify(input.engines)),
    evIds: inputs.map(() => newId('evt')),
    ...aiRunBody.bindings(inputs.map((input, i) => ({ runId: runIds[i] as string, siteId: input.siteId, domain: '', compositeScore: input.compositeScore }))),
    evType: 'ai_check.completed',
    ...fanOut.bindings,
  });
  return byInput(inputs.length, rows, toAiMonitorRun);
}

// ---------------------------------------------------------------------------------------------
// scan.completed

const scanBody = eventBodyTemplate('scan.completed', { scanId: '', siteId: '', domain: '', score: 0 }, { siteId: 'input.site_id', domain: 'input.domain' });

/**
 * No two inputs may name the same scan (one UPDATE … FROM cannot move a row twice): the producer
 * batches keep them apart.
 */
const SCANS_SQL = `WITH input AS (
       SELECT * FROM unnest(:scanIds::text[], :scores::float8[], :categories::text[], :evIds::text[]${scanBody.unnestArgs})
         WITH ORDINALITY AS i(scan_id, score, categories, ev_id${scanBody.unnestColumns}, ord)
     ), fact AS (
       UPDATE scans SET status = 'completed', score = input.score, completed_at = CURRENT_TIMESTAMP(3), categories = input.categories::jsonb
         FROM input
        WHERE scans.id = input.scan_id AND scans.status = 'running'
       RETURNING scans.id, scans.site_id, scans.status, scans.score, scans.trigger, scans.started_at, scans.completed_at, scans.failed_at, scans.categories
     ), site AS (
       SELECT input.*, fact.site_id, s.account_id, s.domain FROM fact JOIN input ON input.scan_id = fact.id JOIN sites s ON s.id = fact.site_id
     ), ${fanOutAndEventSql(scanBody.sql, 'fact.id, fact.site_id, fact.status, fact.score, fact.trigger, fact.started_at, fact.completed_at, fact.failed_at, fact.categories', (a) => `${a}.scan_id = fact.id`)}`;

/** Completes running scans and records their `scan.completed` events; undefined for an input whose scan is not running (or missing). */
export async function completeScansWithEvents(
  db: Db,
  inputs: ReadonlyArray<{ scanId: string; score: number; categories: ScanCategory[] }>,
): Promise<Array<Produced<Scan>>> {
  if (new Set(inputs.map((input) => input.scanId)).size !== inputs.length) throw new Error('completeScansWithEvents: a scan named twice in one batch');
  const rows = await runNamedStatement<ScanRow & FanOutColumns>(db, 'svc_produce_scan_completed_v5', SCANS_SQL, {
    scanIds: inputs.map((input) => input.scanId),
    scores: inputs.map((input) => input.score),
    categories: inputs.map((input) => JSON.stringify(input.categories)),
    evIds: inputs.map(() => newId('evt')),
    ...scanBody.bindings(inputs.map((input) => ({ scanId: input.scanId, siteId: '', domain: '', score: input.score }))),
    evType: 'scan.completed',
    ...fanOut.bindings,
  });
  return byInput(inputs.length, rows, toScan);
}
