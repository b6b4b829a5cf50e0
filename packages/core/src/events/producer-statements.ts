/**
 * The facts and their events in ONE statement per batch of producer calls, whatever their kinds
 * (operator contract §4: each fact and its event in one transaction; ADR 11: the calls a process
 * makes together share that transaction; the three kinds share one statement). A batch of
 * one is a single call. The statement reads what it needs (the site, the scan) in the same
 * snapshot and inserts nothing for an input whose row does not exist or is in the wrong state (no
 * row comes back for that input). It also fans the events out (at most PRODUCER_FAN_OUT_MAX
 * matching subscriptions per event, ADR 11) and answers the first attempts to queue. The SQL text
 * is the same for every batch (arrays, unnest; a kind absent from a batch is three empty arrays),
 * so it is one prepared statement per connection.
 *
 * Each input carries the call's identity, minted when the call was made (producers.ts): its event
 * id, its fact's id and the producer's idempotency key if it gave one. A try of a call that an
 * earlier try already committed (its connection lost after COMMIT) therefore fails on a unique index
 * (the event's or fact's primary key, events_idempotency_key_idx) or, for a scan, finds it no
 * longer running: it writes nothing, and findRecordedCalls answers what the first try recorded.
 */
import type { Db } from '../db/knex.js';
import { runNamedStatement } from '../db/named-statement.js';
import { toAiMonitorRun, type AiMonitorRun, type AiMonitorRunRow } from '../ai-monitor/ai-run.repository.js';
import type { EngineScore } from '../ai-monitor/engine-scores.js';
import type { PowerUpDeployment } from '../power-ups/deployment.repository.js';
import type { ScanCategory } from '../scans/scan-inputs.js';
import { ConflictError } from '../errors.js';
import { toScan, type Scan, type ScanRow } from '../scans/scan.repository.js';
import { producerFanOutSql, toProducerFanOut, type ProducerFanOut } from '../deliveries/fan-out.js';
import { eventBodySegments, type EventDataByType, type EventType } from './event-types.js';

/** What a producer statement answers for one input: the fact, its event, and its fan-out. */
export type Produced<F> = { fact: F; eventId: string; fanOut: ProducerFanOut } | undefined;

/**
 * The event body of each input row as SQL: the literal segments come from the batch, one text[]
 * binding per position (`:<prefix>EvSeg<i>`, unnested as column `seg<i>` of `input`), the timestamp from
 * the database's clock and `fromDatabase` fields from the statement (docs of eventBodySegments).
 * The segments' positions depend only on the type and the fields, so the SQL is the same for
 * every batch; a dummy event gives them.
 */
function eventBodyTemplate<T extends EventType>(
  prefix: string,
  type: T,
  dummy: EventDataByType[T],
  fromDatabase: Partial<Record<keyof EventDataByType[T] & string, string>>,
) {
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
    /** `, :<prefix>EvSeg<i>::text[]` for the unnest, and `, seg<i>` for its column list. */
    unnestArgs: literalPositions.map((i) => `, :${prefix}EvSeg${i}::text[]`).join(''),
    unnestColumns: literalPositions.map((i) => `, seg${i}`).join(''),
    /** The literal segments of each event, as the bindings `<prefix>EvSeg<i>`. */
    bindings(datas: ReadonlyArray<EventDataByType[T]>): Record<string, string[]> {
      const columns: Record<string, string[]> = Object.fromEntries(literalPositions.map((i) => [`${prefix}EvSeg${i}`, [] as string[]]));
      for (const data of datas) {
        const rowSegments = eventBodySegments(type, data, fields);
        for (const i of literalPositions) (columns[`${prefix}EvSeg${i}`] as string[]).push(rowSegments[i] as string);
      }
      return columns;
    },
  };
}

/** The fan-out of the producer statement, over its `site` CTE (one row per event, its type in `ev_type`). */
const fanOut = producerFanOutSql('site', 'site.ev_type');

const deploymentBody = eventBodyTemplate('d', 'power_up.deployed', { deploymentId: '', siteId: '', powerUpId: '' }, {});
const aiRunBody = eventBodyTemplate('a', 'ai_check.completed', { runId: '', siteId: '', domain: '', compositeScore: 0 }, { domain: 'input.domain' });
const scanBody = eventBodyTemplate('s', 'scan.completed', { scanId: '', siteId: '', domain: '', score: 0 }, { siteId: 'input.site_id', domain: 'input.domain' });

/**
 * The columns of every kind's fact, in one list: each answer row fills its kind's and leaves the
 * others NULL (`completed_at` is both an AI run's and a scan's). Then the answer's own columns.
 */
const FACT_COLUMNS = ['id', 'site_id', 'power_up_id', 'deployed_at', 'composite_score', 'completed_at', 'engines', 'status', 'score', 'trigger', 'started_at', 'failed_at', 'categories'] as const;
const NULL_OF: Record<(typeof FACT_COLUMNS)[number], string> = {
  id: 'NULL::text',
  site_id: 'NULL::text',
  power_up_id: 'NULL::text',
  deployed_at: 'NULL::timestamptz',
  composite_score: 'NULL::float8',
  completed_at: 'NULL::timestamptz',
  engines: 'NULL::jsonb',
  status: 'NULL::text',
  score: 'NULL::float8',
  trigger: 'NULL::text',
  started_at: 'NULL::timestamptz',
  failed_at: 'NULL::timestamptz',
  categories: 'NULL::jsonb',
};

/** One kind's answer rows: its fact's columns from `fact`, NULL for the other kinds'. */
function answerSql(kind: ProducerKind, fact: string, site: string, factOfSite: string, own: ReadonlyArray<(typeof FACT_COLUMNS)[number]>): string {
  const columns = FACT_COLUMNS.map((column) => (own.includes(column) ? `${fact}.${column}` : `${NULL_OF[column]} AS ${column}`)).join(', ');
  return `SELECT '${kind}'::text AS kind, ${site}.ord, event.id AS event_id, ${fanOut.firstAttemptsSql('event')},
            event.fanned_out_at IS NOT NULL AS fanned_out, ${columns}
       FROM ${fact} JOIN ${site} ON ${factOfSite} JOIN event ON event.id = ${site}.ev_id`;
}

/**
 * Each kind's inputs (`<k>_input`, unnested with their positions), the rows they read
 * (`<k>_site`) and the facts they write (`<k>_fact`); then `site`, one row per fact written with
 * its event's id, account, type and body (dated by the database's clock); then the fan-out
 * (`targets`, `event`, `created`: producerFanOutSql) and the answer, one row per fact.
 */
const PRODUCE_SQL = `WITH d_input AS (
       SELECT * FROM unnest(:dSiteIds::text[], :dDeploymentIds::text[], :dPowerUpIds::text[], :dEvIds::text[], :dEvKeys::text[]${deploymentBody.unnestArgs})
         WITH ORDINALITY AS i(site_id, deployment_id, power_up_id, ev_id, ev_key${deploymentBody.unnestColumns}, ord)
     ), d_site AS (
       SELECT d_input.*, s.account_id FROM d_input JOIN sites s ON s.id = d_input.site_id
     ), d_fact AS (
       INSERT INTO power_up_deployments (id, site_id, power_up_id) SELECT deployment_id, site_id, power_up_id FROM d_site
       RETURNING id, site_id, power_up_id, deployed_at
     ), a_input AS (
       SELECT * FROM unnest(:aSiteIds::text[], :aRunIds::text[], :aCompositeScores::float8[], :aEngines::text[], :aEvIds::text[], :aEvKeys::text[]${aiRunBody.unnestArgs})
         WITH ORDINALITY AS i(site_id, run_id, composite_score, engines, ev_id, ev_key${aiRunBody.unnestColumns}, ord)
     ), a_site AS (
       SELECT a_input.*, s.account_id, s.domain FROM a_input JOIN sites s ON s.id = a_input.site_id
     ), a_fact AS (
       INSERT INTO ai_monitor_runs (id, site_id, composite_score, engines) SELECT run_id, site_id, composite_score, engines::jsonb FROM a_site
       RETURNING id, site_id, composite_score, completed_at, engines
     ), s_input AS (
       SELECT * FROM unnest(:sScanIds::text[], :sScores::float8[], :sCategories::text[], :sEvIds::text[], :sEvKeys::text[]${scanBody.unnestArgs})
         WITH ORDINALITY AS i(scan_id, score, categories, ev_id, ev_key${scanBody.unnestColumns}, ord)
     ), s_fact AS (
       UPDATE scans SET status = 'completed', score = s_input.score, completed_at = CURRENT_TIMESTAMP(3), categories = s_input.categories::jsonb
         FROM s_input
        WHERE scans.id = s_input.scan_id AND scans.status = 'running'
       RETURNING scans.id, scans.site_id, scans.status, scans.score, scans.trigger, scans.started_at, scans.completed_at, scans.failed_at, scans.categories
     ), s_site AS (
       SELECT s_input.*, s_fact.site_id, s.account_id, s.domain FROM s_fact JOIN s_input ON s_input.scan_id = s_fact.id JOIN sites s ON s.id = s_fact.site_id
     ), clock AS (
       SELECT date_trunc('milliseconds', clock_timestamp()) AS now
     ), site AS (
       SELECT input.ev_id, input.ev_key, input.account_id, 'power_up.deployed'::text AS ev_type, ${deploymentBody.sql} AS body
         FROM d_fact JOIN d_site input ON input.deployment_id = d_fact.id, clock
       UNION ALL
       SELECT input.ev_id, input.ev_key, input.account_id, 'ai_check.completed'::text, ${aiRunBody.sql}
         FROM a_fact JOIN a_site input ON input.run_id = a_fact.id, clock
       UNION ALL
       SELECT input.ev_id, input.ev_key, input.account_id, 'scan.completed'::text, ${scanBody.sql}
         FROM s_fact JOIN s_site input ON input.scan_id = s_fact.id, clock
     ), ${fanOut.targetsCte}, event AS (
       INSERT INTO events (id, account_id, type, body, created_at, fanned_out_at, idempotency_key)
       SELECT site.ev_id, site.account_id, site.ev_type, site.body, clock.now, ${fanOut.fannedOutSql('site.ev_id')}, site.ev_key
         FROM site, clock
       RETURNING id, fanned_out_at
     ), ${fanOut.createdCte}
     ${answerSql('deployment', 'd_fact', 'd_site', 'd_site.deployment_id = d_fact.id', ['id', 'site_id', 'power_up_id', 'deployed_at'])}
     UNION ALL
     ${answerSql('aiRun', 'a_fact', 'a_site', 'a_site.run_id = a_fact.id', ['id', 'site_id', 'composite_score', 'completed_at', 'engines'])}
     UNION ALL
     ${answerSql('scan', 's_fact', 's_site', 's_site.scan_id = s_fact.id', ['id', 'site_id', 'status', 'score', 'trigger', 'started_at', 'completed_at', 'failed_at', 'categories'])}`;

/** The name the statement is prepared under; a new text needs a new name (runNamedStatement). */
const PRODUCE_STATEMENT = 'svc_produce_v2';

export type ProducerKind = 'deployment' | 'aiRun' | 'scan';

/**
 * One producer call's input, by kind, with its identity: the ids of the event and of the fact it
 * creates (a scan's is the scan's own) and the producer's idempotency key (null when it gave none),
 * the same for every try of the call.
 */
export type ProducerInput = (
  | { kind: 'deployment'; siteId: string; powerUpId: string; deploymentId: string }
  | { kind: 'aiRun'; siteId: string; compositeScore: number; engines: EngineScore[]; runId: string }
  | { kind: 'scan'; scanId: string; score: number; categories: ScanCategory[] }
) & { eventId: string; idempotencyKey: string | null };

/** An answer row: the kind, the input's position among its kind's, the fan-out, and the fact's columns. */
type ProducedRow = {
  kind: ProducerKind;
  ord: string | number;
  event_id: string;
  first_attempts: unknown;
  fanned_out: boolean;
} & Record<(typeof FACT_COLUMNS)[number], unknown>;

function factOf(row: Omit<ProducedRow, 'ord'>): PowerUpDeployment | AiMonitorRun | Scan {
  switch (row.kind) {
    case 'deployment':
      return { id: row.id as string, siteId: row.site_id as string, powerUpId: row.power_up_id as string, deployedAt: row.deployed_at as Date };
    case 'aiRun':
      return toAiMonitorRun(row as unknown as AiMonitorRunRow);
    default:
      return toScan(row as unknown as ScanRow);
  }
}

/**
 * Records a batch of producer calls, of any kinds, and their events in one statement; one answer
 * per input, in input order: undefined where nothing was written (the site does not exist, the
 * scan is not running or missing). No two inputs may complete the same scan (one UPDATE … FROM
 * cannot move a row twice): the producer batches keep them apart.
 */
export async function produceWithEvents(db: Db, inputs: readonly ProducerInput[]): Promise<Array<Produced<PowerUpDeployment | AiMonitorRun | Scan>>> {
  const positions: Record<ProducerKind, number[]> = { deployment: [], aiRun: [], scan: [] };
  inputs.forEach((input, i) => positions[input.kind].push(i));
  const deployments = positions.deployment.map((i) => inputs[i] as Extract<ProducerInput, { kind: 'deployment' }>);
  const aiRuns = positions.aiRun.map((i) => inputs[i] as Extract<ProducerInput, { kind: 'aiRun' }>);
  const scans = positions.scan.map((i) => inputs[i] as Extract<ProducerInput, { kind: 'scan' }>);
  if (new Set(scans.map((input) => input.scanId)).size !== scans.length) throw new Error('produceWithEvents: a scan named twice in one batch');

  const rows = await runNamedStatement<ProducedRow>(db, PRODUCE_STATEMENT, PRODUCE_SQL, {
    dSiteIds: deployments.map((input) => input.siteId),
    dDeploymentIds: deployments.map((input) => input.deploymentId),
    dPowerUpIds: deployments.map((input) => input.powerUpId),
    dEvIds: deployments.map((input) => input.eventId),
    dEvKeys: deployments.map((input) => input.idempotencyKey),
    ...deploymentBody.bindings(deployments.map((input) => ({ deploymentId: input.deploymentId, siteId: input.siteId, powerUpId: input.powerUpId }))),
    aSiteIds: aiRuns.map((input) => input.siteId),
    aRunIds: aiRuns.map((input) => input.runId),
    aCompositeScores: aiRuns.map((input) => input.compositeScore),
    aEngines: aiRuns.map((input) => JSON.stringify(input.engines)),
    aEvIds: aiRuns.map((input) => input.eventId),
    aEvKeys: aiRuns.map((input) => input.idempotencyKey),
    ...aiRunBody.bindings(aiRuns.map((input) => ({ runId: input.runId, siteId: input.siteId, domain: '', compositeScore: input.compositeScore }))),
    sScanIds: scans.map((input) => input.scanId),
    sScores: scans.map((input) => input.score),
    sCategories: scans.map((input) => JSON.stringify(input.categories)),
    sEvIds: scans.map((input) => input.eventId),
    sEvKeys: scans.map((input) => input.idempotencyKey),
    ...scanBody.bindings(scans.map((input) => ({ scanId: input.scanId, siteId: '', domain: '', score: input.score }))),
    ...fanOut.bindings,
  });

  const answers: Array<Produced<PowerUpDeployment | AiMonitorRun | Scan>> = new Array(inputs.length).fill(undefined);
  for (const row of rows) {
    const at = positions[row.kind][Number(row.ord) - 1];
    if (at === undefined) throw new Error(`produceWithEvents: an answer for ${row.kind} #${row.ord}, which the batch does not have`);
    answers[at] = { fact: factOf(row), eventId: row.event_id, fanOut: toProducerFanOut(row) };
  }
  return answers;
}

/**
 * What the earlier tries of calls recorded: the event with the call's id or idempotency key, the
 * fact it announces and its first attempts still waiting (queued again by the producer: BullMQ
 * ignores a job id it holds). The fact is found by the id in the event's body, so a key recorded by
 * another process's try is found too.
 */
const RECORDED_SQL = `SELECT e.id AS event_id, e.idempotency_key,
         CASE e.type WHEN 'power_up.deployed' THEN 'deployment' WHEN 'ai_check.completed' THEN 'aiRun' ELSE 'scan' END AS kind,
         e.fanned_out_at IS NOT NULL AS fanned_out,
         (SELECT coalesce(json_agg(json_build_array(d.id, d.subscription_id)), '[]') FROM deliveries d
           WHERE d.event_id = e.id AND d.redelivery_of IS NULL AND d.status = 'pending' AND d.attempt_count = 0) AS first_attempts,
         coalesce(dep.id, run.id, scan.id) AS id, coalesce(dep.site_id, run.site_id, scan.site_id) AS site_id,
         dep.power_up_id, dep.deployed_at, run.composite_score, coalesce(run.completed_at, scan.completed_at) AS completed_at,
         run.engines, scan.status, scan.score, scan.trigger, scan.started_at, scan.failed_at, scan.categories
    FROM events e
    LEFT JOIN power_up_deployments dep ON e.type = 'power_up.deployed' AND dep.id = e.body::jsonb #>> '{data,deploymentId}'
    LEFT JOIN ai_monitor_runs run ON e.type = 'ai_check.completed' AND run.id = e.body::jsonb #>> '{data,runId}'
    LEFT JOIN scans scan ON e.type = 'scan.completed' AND scan.id = e.body::jsonb #>> '{data,scanId}'
   WHERE e.id = ANY(:eventIds::text[]) OR e.idempotency_key = ANY(:keys::text[])`;

type RecordedRow = Omit<ProducedRow, 'ord'> & { idempotency_key: string | null };

/**
 * For each input, what an earlier try of the same call recorded (same event id, or same
 * idempotency key): the fact and event it answered, with the first attempts still waiting; a
 * ConflictError when the key was recorded for another input (another site, kind, Power-Up or
 * score), or for a fact since deleted; undefined when nothing was recorded. One read.
 */
export async function findRecordedCalls(
  db: Db,
  inputs: readonly ProducerInput[],
): Promise<Array<Produced<PowerUpDeployment | AiMonitorRun | Scan> | ConflictError>> {
  if (inputs.length === 0) return [];
  const keys = inputs.map((input) => input.idempotencyKey).filter((key): key is string => key !== null);
  const { rows } = (await db.raw(RECORDED_SQL, { eventIds: inputs.map((input) => input.eventId), keys })) as { rows: RecordedRow[] };
  return inputs.map((input) => {
    const row = rows.find((r) => r.event_id === input.eventId || (input.idempotencyKey !== null && r.idempotency_key === input.idempotencyKey));
    if (!row) return undefined;
    const name = input.idempotencyKey === null ? `event id ${input.eventId}` : `idempotency key ${JSON.stringify(input.idempotencyKey)}`;
    if (row.id === null) return new ConflictError(`the call with ${name} was recorded, but what it recorded has since been deleted`);
    const fact = factOf(row);
    if (!recordsInput(row.kind, fact, input)) return new ConflictError(`${name} was already used for another call`);
    return { fact, eventId: row.event_id, fanOut: toProducerFanOut(row) };
  });
}

/** True when a recorded fact is the one this input would have recorded. */
function recordsInput(kind: ProducerKind, fact: PowerUpDeployment | AiMonitorRun | Scan, input: ProducerInput): boolean {
  if (kind !== input.kind) return false;
  switch (input.kind) {
    case 'deployment': {
      const deployment = fact as PowerUpDeployment;
      return deployment.siteId === input.siteId && deployment.powerUpId === input.powerUpId;
    }
    case 'aiRun': {
      const run = fact as AiMonitorRun;
      return run.siteId === input.siteId && run.compositeScore === input.compositeScore && sameScores(run.engines.map((e) => [e.engine, e.score]), input.engines.map((e) => [e.engine, e.score]));
    }
    case 'scan': {
      const scan = fact as Scan;
      return scan.id === input.scanId && scan.score === input.score && sameScores(scan.categories.map((c) => [c.name, c.score]), input.categories.map((c) => [c.name, c.score]));
    }
  }
}

function sameScores(a: ReadonlyArray<[string, number]>, b: ReadonlyArray<[string, number]>): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
