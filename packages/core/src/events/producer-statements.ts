/**
 * A producer's fact and its event in ONE statement per kind (operator contract §4: each fact and
 * its event in one transaction): deployments, AI Monitor runs and scan completions each have their
 * own, made by one template (defineProducerKind). The statement takes arrays, so the calls of one
 * kind a process makes together share it (producer-batches.ts); a batch of one is a single call.
 * It reads what it needs (the site, the scan) in the same snapshot and writes nothing for an input
 * whose row does not exist or is in the wrong state (no row comes back for that input). It also
 * fans the events out (at most PRODUCER_FAN_OUT_MAX matching subscriptions per event, ADR 11) and
 * answers the first attempts to queue.
 *
 * Each input carries the call's identity, minted when the call was made (producers.ts): its event
 * id, its fact's id and the producer's idempotency key if it gave one. A try of a call that an
 * earlier try already committed (its connection lost after COMMIT) therefore fails on a unique index
 * (the event's or fact's primary key, events_idempotency_key_idx) or, for a scan, finds it no
 * longer running: it writes nothing, and findRecorded answers what the first try recorded.
 */
import type { Db } from '../db/knex.js';
import { toAiMonitorRun, type AiMonitorRun, type AiMonitorRunRow } from '../ai-monitor/ai-run.repository.js';
import type { EngineScore } from '../ai-monitor/engine-scores.js';
import type { PowerUpDeployment } from '../power-ups/deployment.repository.js';
import type { ScanCategory } from '../scans/scan-inputs.js';
import { ConflictError } from '../errors.js';
import { toScan, type Scan, type ScanRow } from '../scans/scan.repository.js';
import { insertDeliveriesSql, matchingSubscriptionsSql, PRODUCER_FAN_OUT_MAX, toProducerFanOut, type ProducerFanOut } from '../deliveries/fan-out.js';
import { CLOCK_CTE, eventBodySql, jsonString } from './event.repository.js';
import type { EventField, EventType } from './event-types.js';

/** What a producer statement answers for one input: the fact, its event, and its fan-out. */
export type Produced<F> = { fact: F; eventId: string; fanOut: ProducerFanOut } | undefined;

/** A producer call's identity, the same for every try of the call (a scan's fact id is the scan's). */
export interface CallIdentity {
  factId: string;
  eventId: string;
  /** The producer's idempotency key; null when it gave none. */
  idempotencyKey: string | null;
}

export type DeploymentInput = CallIdentity & { siteId: string; powerUpId: string };
export type AiRunInput = CallIdentity & { siteId: string; compositeScore: number; engines: EngineScore[] };
export type ScanCompletionInput = CallIdentity & { score: number; categories: ScanCategory[] };

/** A kind of producer call, as producer-batches.ts uses it. */
export interface ProducerKind<I extends CallIdentity, F> {
  readonly type: EventType;
  /**
   * Records a batch of calls and their events in one statement; one answer per input, in input
   * order: undefined where nothing was written (the site does not exist, the scan is not running).
   */
  produce(db: Db, inputs: readonly I[]): Promise<Array<Produced<F>>>;
  /**
   * For each input, what an earlier try of the same call recorded (same event id, or same
   * idempotency key): its fact and event, with the first attempts still waiting (queued again by
   * the producer: BullMQ ignores a job id it holds); a ConflictError when the key was recorded for
   * another call (another kind, site, Power-Up or score) or for a fact since deleted; undefined
   * when nothing was recorded. One read.
   */
  findRecorded(db: Db, inputs: readonly I[]): Promise<Array<Produced<F> | ConflictError>>;
  /** Calls with one key never share a batch: one UPDATE … FROM cannot move a row twice. */
  readonly key?: (input: I) => string;
}

/** A row the fact CTE returns: the fact table's row. */
type FactRow = { id: string; site_id: string };

/**
 * What a kind is made of: the one place a fourth event type is added (beside its type and data
 * fields in event-types.ts, and its call in producers.ts).
 */
interface ProducerKindSpec<T extends EventType, I extends CallIdentity, F, R extends FactRow> {
  type: T;
  /** The fact's table; the event's data field holding the fact's id (to find a recorded call's fact). */
  table: string;
  idField: EventField<T>;
  /** The input's columns beside fact_id, ev_id and ev_key: name, Postgres type, value of an input. */
  columns: ReadonlyArray<readonly [name: string, pgType: string, value: (input: I) => unknown]>;
  /** The CTE `fact`: writes the facts of the rows of `input`, RETURNING * of the table. */
  factSql: string;
  /** Each data field as JSON text (eventBodySql), over `fact`, `input` and the fact's site `s`. */
  data: Readonly<Record<EventField<T>, string>>;
  toFact(row: R): F;
  /** True when a recorded fact is the one this input would have written. */
  records(fact: F, input: I): boolean;
  key?: (input: I) => string;
}

/** The fan-out and answer columns of a producer statement's row, beside the fact's. */
type AnswerColumns = { event_id: string; fanned_out: boolean; first_attempts: unknown };

function defineProducerKind<T extends EventType, I extends CallIdentity, F, R extends FactRow>(
  spec: ProducerKindSpec<T, I, F, R>,
): ProducerKind<I, F> {
  const columns = [...spec.columns.map(([name, pgType]) => [name, pgType] as const), ['fact_id', 'text'], ['ev_id', 'text'], ['ev_key', 'text']] as const;
  // `input`: the batch, one row per call; `fact`: the kind's write; `source`: one row per fact
  // written, with its event's id, key, account and body; then the event and its fan-out.
  const produceSql = `WITH input AS (
       SELECT * FROM unnest(${columns.map(([name, pgType]) => `:${name}::${pgType}[]`).join(', ')})
         WITH ORDINALITY AS input (${columns.map(([name]) => name).join(', ')}, ord)
     ), fact AS (
       ${spec.factSql}
     ), ${CLOCK_CTE}, source AS (
       SELECT input.ord, input.fact_id, input.ev_id, input.ev_key, s.account_id, ${eventBodySql(spec.type, spec.data)} AS body
         FROM fact JOIN input ON input.fact_id = fact.id JOIN sites s ON s.id = fact.site_id, clock
     ), targets AS (
       SELECT source.ev_id, t.id FROM source CROSS JOIN LATERAL (
         SELECT s.id FROM webhook_subscriptions s WHERE ${matchingSubscriptionsSql('source.account_id', ':type::text')}
          LIMIT ${PRODUCER_FAN_OUT_MAX + 1}
       ) t
     ), event AS (
       -- Fanned out here when the account has at most PRODUCER_FAN_OUT_MAX matching subscriptions
       -- (fanned_out_at = created_at); a wider event is left NULL, for the dispatcher's fan-out job.
       INSERT INTO events (id, account_id, type, body, created_at, fanned_out_at, idempotency_key)
       SELECT source.ev_id, source.account_id, :type, source.body, clock.now,
              CASE WHEN (SELECT count(*) FROM targets WHERE targets.ev_id = source.ev_id) <= ${PRODUCER_FAN_OUT_MAX} THEN clock.now END,
              source.ev_key
         FROM source, clock
       RETURNING id, fanned_out_at
     ), created AS (
       ${insertDeliveriesSql('SELECT event.id, targets.id FROM event JOIN targets ON targets.ev_id = event.id WHERE event.fanned_out_at IS NOT NULL')}
     )
     SELECT source.ord, event.id AS event_id, event.fanned_out_at IS NOT NULL AS fanned_out,
            (SELECT coalesce(json_agg(json_build_array(created.id, created.subscription_id)), '[]') FROM created WHERE created.event_id = event.id) AS first_attempts,
            fact.*
       FROM source JOIN fact ON fact.id = source.fact_id JOIN event ON event.id = source.ev_id`;
  // The fact is found by the id in the event's body, so a key recorded by another process's try is found too.
  const recordedSql = `SELECT e.id AS event_id, e.idempotency_key, e.type = :type AS same_kind, e.fanned_out_at IS NOT NULL AS fanned_out,
         (SELECT coalesce(json_agg(json_build_array(d.id, d.subscription_id)), '[]') FROM deliveries d
           WHERE d.event_id = e.id AND d.redelivery_of IS NULL AND d.status = 'pending' AND d.attempt_count = 0) AS first_attempts,
         fact.*
    FROM events e LEFT JOIN ${spec.table} fact ON e.type = :type AND fact.id = e.body::jsonb #>> '{data,${spec.idField}}'
   WHERE e.id = ANY(:eventIds::text[]) OR e.idempotency_key = ANY(:keys::text[])`;
  // A name per text: pg parses and plans it once per connection.
  const statementName = `svc_produce_${spec.table}_v3`;

  return {
    type: spec.type,
    key: spec.key,
    async produce(db, inputs) {
      if (spec.key && new Set(inputs.map(spec.key)).size !== inputs.length) throw new Error(`${spec.type}: two calls with one key in one batch`);
      const bindings: Record<string, unknown> = {
        type: spec.type,
        fact_id: inputs.map((input) => input.factId),
        ev_id: inputs.map((input) => input.eventId),
        ev_key: inputs.map((input) => input.idempotencyKey),
      };
      for (const [name, , value] of spec.columns) bindings[name] = inputs.map(value);
      const { rows } = (await db.raw(produceSql, bindings as Record<string, never>).options({ name: statementName })) as { rows: Array<R & AnswerColumns & { ord: string }> };
      const answers: Array<Produced<F>> = new Array(inputs.length).fill(undefined);
      for (const row of rows) answers[Number(row.ord) - 1] = { fact: spec.toFact(row), eventId: row.event_id, fanOut: toProducerFanOut(row) };
      return answers;
    },
    async findRecorded(db, inputs) {
      if (inputs.length === 0) return [];
      const keys = inputs.map((input) => input.idempotencyKey).filter((key): key is string => key !== null);
      const { rows } = (await db.raw(recordedSql, { type: spec.type, eventIds: inputs.map((input) => input.eventId), keys })) as {
        rows: Array<(R | { id: null }) & AnswerColumns & { idempotency_key: string | null; same_kind: boolean }>;
      };
      return inputs.map((input) => {
        const row = rows.find((r) => r.event_id === input.eventId || (input.idempotencyKey !== null && r.idempotency_key === input.idempotencyKey));
        if (!row) return undefined;
        const name = input.idempotencyKey === null ? `event id ${input.eventId}` : `idempotency key ${JSON.stringify(input.idempotencyKey)}`;
        if (!row.same_kind) return new ConflictError(`${name} was already used for another call`);
        if (row.id === null) return new ConflictError(`the call with ${name} was recorded, but what it recorded has since been deleted`);
        const fact = spec.toFact(row as R);
        if (!spec.records(fact, input)) return new ConflictError(`${name} was already used for another call`);
        return { fact, eventId: row.event_id, fanOut: toProducerFanOut(row) };
      });
    },
  };
}

type DeploymentRow = FactRow & { power_up_id: string; deployed_at: Date };

/** A Power-Up deployed: a deployment row for a site that exists, and `power_up.deployed`. */
export const deployments = defineProducerKind<'power_up.deployed', DeploymentInput, PowerUpDeployment, DeploymentRow>({
  type: 'power_up.deployed',
  table: 'power_up_deployments',
  idField: 'deploymentId',
  columns: [
    ['site_id', 'text', (input) => input.siteId],
    ['power_up_id', 'text', (input) => input.powerUpId],
  ],
  factSql: `INSERT INTO power_up_deployments (id, site_id, power_up_id)
       SELECT input.fact_id, input.site_id, input.power_up_id FROM input JOIN sites s ON s.id = input.site_id
       RETURNING *`,
  data: { deploymentId: jsonString('fact.id'), siteId: jsonString('fact.site_id'), powerUpId: jsonString('fact.power_up_id') },
  toFact: (row) => ({ id: row.id, siteId: row.site_id, powerUpId: row.power_up_id, deployedAt: row.deployed_at }),
  records: (fact, input) => fact.siteId === input.siteId && fact.powerUpId === input.powerUpId,
});

/**
 * An AI Monitor run completed: a run row for a site that exists, and `ai_check.completed`. The
 * score travels as its JSON text, so the body holds the number as JavaScript writes it (Postgres
 * writes some floats otherwise: 1e-05 for 0.00001); the row gets the same number.
 */
export const aiRuns = defineProducerKind<'ai_check.completed', AiRunInput, AiMonitorRun, AiMonitorRunRow & FactRow>({
  type: 'ai_check.completed',
  table: 'ai_monitor_runs',
  idField: 'runId',
  columns: [
    ['site_id', 'text', (input) => input.siteId],
    ['composite_score', 'text', (input) => JSON.stringify(input.compositeScore)],
    ['engines', 'text', (input) => JSON.stringify(input.engines)],
  ],
  factSql: `INSERT INTO ai_monitor_runs (id, site_id, composite_score, engines)
       SELECT input.fact_id, input.site_id, input.composite_score::float8, input.engines::jsonb FROM input JOIN sites s ON s.id = input.site_id
       RETURNING *`,
  data: { runId: jsonString('fact.id'), siteId: jsonString('fact.site_id'), domain: jsonString('s.domain'), compositeScore: 'input.composite_score' },
  toFact: toAiMonitorRun,
  records: (run, input) =>
    run.siteId === input.siteId && run.compositeScore === input.compositeScore && sameScores(run.engines.map((e) => [e.engine, e.score]), input.engines.map((e) => [e.engine, e.score])),
});

/** A running scan completed (its fact id is the scan's), and `scan.completed`; score as for AI runs. */
export const scanCompletions = defineProducerKind<'scan.completed', ScanCompletionInput, Scan, ScanRow>({
  type: 'scan.completed',
  table: 'scans',
  idField: 'scanId',
  columns: [
    ['score', 'text', (input) => JSON.stringify(input.score)],
    ['categories', 'text', (input) => JSON.stringify(input.categories)],
  ],
  factSql: `UPDATE scans SET status = 'completed', score = input.score::float8, completed_at = CURRENT_TIMESTAMP(3), categories = input.categories::jsonb
         FROM input
        WHERE scans.id = input.fact_id AND scans.status = 'running'
       RETURNING scans.*`,
  data: { scanId: jsonString('fact.id'), siteId: jsonString('fact.site_id'), domain: jsonString('s.domain'), score: 'input.score' },
  toFact: toScan,
  records: (scan, input) =>
    scan.id === input.factId && scan.score === input.score && sameScores(scan.categories.map((c) => [c.name, c.score]), input.categories.map((c) => [c.name, c.score])),
  key: (input) => input.factId,
});

function sameScores(a: ReadonlyArray<[string, number]>, b: ReadonlyArray<[string, number]>): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
