import type { AiMonitorRun } from '../ai-monitor/ai-run.repository.js';
import { MicroBatcher } from '../batching/micro-batcher.js';
import type { Db } from '../db/knex.js';
import { ConflictError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { PowerUpDeployment } from '../power-ups/deployment.repository.js';
import { enqueueAfterCommit } from '../queues/enqueue-after-commit.js';
import { enqueueDeliveries, enqueueFanout, type Queues } from '../queues/queues.js';
import type { Scan } from '../scans/scan.repository.js';
import { findRecordedCalls, produceWithEvents, type Produced, type ProducerInput } from './producer-statements.js';

/** What a producer needs: the database, both queues, and a logger for a failed enqueue. */
export interface ProducerDeps {
  db: Db;
  queues: Pick<Queues, 'fanout' | 'deliveries'>;
  logger?: Pick<Logger, 'warn'>;
}

/**
 * Producer calls a process makes together (while the event loop turns, or while the previous
 * batch of their kind is on the wire) share one statement, one commit and one Redis round trip
 * (ADR 11). At most this many per batch: a batch's statement also writes each event's deliveries
 * (up to PRODUCER_FAN_OUT_MAX each), so it stays a bounded transaction.
 */
export const PRODUCER_BATCH_MAX = 50;
/**
 * Batches on the wire at once, per process. The calls made while they are on the wire form the
 * next batch, so batches grow with the load. With one batch per kind, two in flight halved the
 * batches and cost 60 % more Postgres CPU per event; with the kinds in one batch (ADR 11), two in
 * flight measured at least as cheap per delivery as one, with more deliveries per second (two
 * paired bench runs: 1.27 and 1.06 ms against 1.40 and 1.40; 0.55× and 0.59× the got loop against
 * 0.50× and 0.53×), and a batch waiting on a row lock (a scan row another transaction holds) no
 * longer holds back every call behind it: the other batch goes on.
 */
export const PRODUCER_BATCHES_IN_FLIGHT = 2;

/** The operators' message since the first release (alerts match it), once per event not announced. */
const ENQUEUE_FAILED = 'event enqueue failed; the dispatcher sweep will fan it out';

/** One producer call in a batch: its input (with its identity) and where its failed enqueue is logged. */
export interface ProducerCall {
  input: ProducerInput;
  logger?: Pick<Logger, 'warn'>;
}

/**
 * A call's answer: its fact and event (written now, or by an earlier try of the call), undefined
 * when nothing was written nor recorded (the site is missing, the scan not running), or the
 * ConflictError of an idempotency key recorded for another call.
 */
export type ProducerAnswer = Produced<PowerUpDeployment | AiMonitorRun | Scan> | ConflictError;

/**
 * After commit, hands a batch's events to the dispatcher in one round trip: the first attempts of
 * those the statement fanned out (nothing at all for an event no subscription wants), and the
 * fan-out job of any it did not (an account with more than PRODUCER_FAN_OUT_MAX matching
 * subscriptions). An event an earlier try recorded is announced the same way, with the first
 * attempts still waiting: that try never got to announce it, and BullMQ ignores a job id it
 * already holds. If Redis is away the rows are already in Postgres: the sweep queues the overdue
 * first attempts, or fans out the event whose fanned_out_at is still empty. Never throws.
 */
async function announce(queues: ProducerDeps['queues'], calls: ReadonlyArray<ProducerCall>, answers: ReadonlyArray<ProducerAnswer>): Promise<void> {
  const events = answers.flatMap((p, i) => (p === undefined || p instanceof ConflictError ? [] : [{ ...p, logger: calls[i]?.logger }]));
  const firstAttempts = events.flatMap((p) => (p.fanOut.fannedOut ? p.fanOut.firstAttempts.map((a) => ({ ...a, attempt: 1, delayMs: 0 })) : []));
  const unfanned = events.filter((p) => !p.fanOut.fannedOut).map((p) => p.eventId);
  const announced = events.filter((p) => !p.fanOut.fannedOut || p.fanOut.firstAttempts.length > 0);
  if (announced.length === 0) return;
  // One warning per event, on its own call's logger, as a single producer call always logged it.
  const perEvent = { warn: (message: string, meta: Record<string, unknown>) => announced.forEach(({ eventId, logger }) => logger?.warn(message, { ...meta, eventId })) };
  await enqueueAfterCommit(
    () => Promise.all([firstAttempts.length > 0 ? enqueueDeliveries(queues, firstAttempts) : undefined, ...unfanned.map((eventId) => enqueueFanout(queues, eventId))]),
    perEvent,
    ENQUEUE_FAILED,
    {},
  );
}

/** A unique index refused the statement: for a call alone, one of its ids or its key is recorded. */
function isUniqueViolation(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '23505';
}

/**
 * Writes a batch's calls, or finds what an earlier try of each recorded. A batch the statement
 * cannot write fails whole and the batcher tries each call alone; a call alone that a unique index
 * refuses (its earlier try committed although its connection was lost, or a twin with its key did
 * meanwhile), or that writes nothing (its scan is completed already), is looked up by its identity.
 */
async function produceOrRecover(db: Db, inputs: ProducerInput[]): Promise<ProducerAnswer[]> {
  let refused: unknown;
  let answers: ProducerAnswer[];
  try {
    answers = await produceWithEvents(db, inputs);
  } catch (error) {
    if (inputs.length > 1 || !isUniqueViolation(error)) throw error;
    refused = error;
    answers = [undefined];
  }
  const unwritten = inputs.filter((_, i) => answers[i] === undefined);
  if (unwritten.length === 0) return answers;
  const recorded = await findRecordedCalls(db, unwritten);
  let next = 0;
  answers = answers.map((answer) => (answer === undefined ? recorded[next++] : answer));
  // Nothing recorded under the call's identity: the unique violation was another row's; it stands.
  if (refused !== undefined && answers[0] === undefined) throw refused;
  return answers;
}

/**
 * Producer calls a process makes together, of any kind, share one batch: the statement writes
 * the three kinds in one go (ADR 11). One kind per batch made batches of 2.7 calls in the bench
 * (10 callers over three kinds, each kind's batch waiting for its own previous one), so each
 * call paid a third of a round trip and a commit to Postgres and one to Redis.
 */
export type ProducerBatches = MicroBatcher<ProducerCall, ProducerAnswer>;

function createProducerBatches(db: Db, queues: ProducerDeps['queues']): ProducerBatches {
  // Each flush: the statement (all or nothing: a batch that fails is retried item by item by the
  // batcher, so one refused input fails only its own call; every try of a call writes the same
  // ids, so a batch that did commit is not written twice), then the announcement, which never throws.
  return new MicroBatcher(
    async (calls: ProducerCall[]) => {
      const answers = await produceOrRecover(db, calls.map((call) => call.input));
      await announce(queues, calls, answers);
      return answers;
    },
    {
      maxBatch: PRODUCER_BATCH_MAX,
      maxInFlight: PRODUCER_BATCHES_IN_FLIGHT,
      // One UPDATE … FROM cannot complete a scan twice: two calls for one scan never share a batch.
      key: ({ input }) => (input.kind === 'scan' ? input.scanId : undefined),
    },
  );
}

/**
 * The batches of calls that share a database and queues (a process's producer dependencies, made
 * once); held weakly, so deps made per call simply batch nothing together. The logger is not part
 * of the key but of each call: a producer passing `logger.child(…)` per call still shares one
 * batcher, instead of leaving one behind per logger.
 */
const batchesByDeps = new WeakMap<Db, WeakMap<object, ProducerBatches>>();

/** The batcher shared by the producer calls made with this database and these queues. */
export function producerBatchesFor(deps: ProducerDeps): ProducerBatches {
  let byQueues = batchesByDeps.get(deps.db);
  if (!byQueues) batchesByDeps.set(deps.db, (byQueues = new WeakMap()));
  let batches = byQueues.get(deps.queues);
  if (!batches) byQueues.set(deps.queues, (batches = createProducerBatches(deps.db, deps.queues)));
  return batches;
}
