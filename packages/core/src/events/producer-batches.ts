import { MicroBatcher } from '../batching/micro-batcher.js';
import type { Db } from '../db/knex.js';
import { ConflictError } from '../errors.js';
import type { Logger } from '../logger.js';
import { enqueueAfterCommit } from '../queues/enqueue-after-commit.js';
import { enqueueDeliveries, enqueueFanout, type Queues } from '../queues/queues.js';
import type { CallIdentity, Produced, ProducerKind } from './producer-statements.js';

/** What a producer needs: the database, both queues, and a logger for a failed enqueue. */
export interface ProducerDeps {
  db: Db;
  queues: Pick<Queues, 'fanout' | 'delivery'>;
  logger?: Pick<Logger, 'warn'>;
}

/**
 * Producer calls of one kind a process makes together (while the event loop turns, or while the
 * previous batch of that kind is on the wire) share one statement, one commit and one Redis round
 * trip (ADR 11). At most this many per batch: a batch's statement also writes each event's
 * deliveries (up to PRODUCER_FAN_OUT_MAX each), so it stays a bounded transaction.
 */
export const PRODUCER_BATCH_MAX = 50;
/**
 * Batches of one kind on the wire at once, per process: the calls made meanwhile form the next
 * batch, so batches grow with the load. Two in flight per kind halved the batches for 60 % more
 * Postgres CPU per event (measured).
 */
export const PRODUCER_BATCHES_IN_FLIGHT = 1;

/** The operators' message since the first release (alerts match it), once per event not announced. */
const ENQUEUE_FAILED = 'event enqueue failed; the dispatcher sweep will fan it out';

/** One producer call in a batch: its input (with its identity) and where its failed enqueue is logged. */
export interface ProducerCall<I> {
  input: I;
  logger?: Pick<Logger, 'warn'>;
}

/**
 * A call's answer: its fact and event (written now, or by an earlier try of the call), undefined
 * when nothing was written nor recorded (the site is missing, the scan not running), or the
 * ConflictError of an idempotency key recorded for another call.
 */
export type ProducerAnswer<F> = Produced<F> | ConflictError;

/**
 * After commit, hands a batch's events to the dispatcher in one round trip: the first attempts of
 * those the statement fanned out (nothing at all for an event no subscription wants), and the
 * fan-out job of any it did not (an account with more than PRODUCER_FAN_OUT_MAX matching
 * subscriptions). An event an earlier try recorded is announced the same way, with the first
 * attempts still waiting: that try never got to announce it, and BullMQ ignores a job id it
 * already holds. If Redis is away the rows are already in Postgres: the sweep queues the overdue
 * first attempts, or fans out the event whose fanned_out_at is still empty. Never throws.
 */
async function announce<I, F>(queues: ProducerDeps['queues'], calls: ReadonlyArray<ProducerCall<I>>, answers: ReadonlyArray<ProducerAnswer<F>>): Promise<void> {
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
async function produceOrRecover<I extends CallIdentity, F>(db: Db, kind: ProducerKind<I, F>, inputs: I[]): Promise<Array<ProducerAnswer<F>>> {
  let refused: unknown;
  let answers: Array<ProducerAnswer<F>>;
  try {
    answers = await kind.produce(db, inputs);
  } catch (error) {
    if (inputs.length > 1 || !isUniqueViolation(error)) throw error;
    refused = error;
    answers = [undefined];
  }
  const unwritten = inputs.filter((_, i) => answers[i] === undefined);
  if (unwritten.length === 0) return answers;
  const recorded = await kind.findRecorded(db, unwritten);
  let next = 0;
  answers = answers.map((answer) => (answer === undefined ? recorded[next++] : answer));
  // Nothing recorded under the call's identity: the unique violation was another row's; it stands.
  if (refused !== undefined && answers[0] === undefined) throw refused;
  return answers;
}

export type ProducerBatches<I, F> = MicroBatcher<ProducerCall<I>, ProducerAnswer<F>>;

function createProducerBatches<I extends CallIdentity, F>(db: Db, queues: ProducerDeps['queues'], kind: ProducerKind<I, F>): ProducerBatches<I, F> {
  // Each flush: the statement (all or nothing: a batch that fails is retried item by item by the
  // batcher, so one refused input fails only its own call; every try of a call writes the same
  // ids, so a batch that did commit is not written twice), then the announcement, which never throws.
  return new MicroBatcher(
    async (calls: Array<ProducerCall<I>>) => {
      const answers = await produceOrRecover(db, kind, calls.map((call) => call.input));
      await announce(queues, calls, answers);
      return answers;
    },
    {
      maxBatch: PRODUCER_BATCH_MAX,
      maxInFlight: PRODUCER_BATCHES_IN_FLIGHT,
      key: kind.key ? (call) => kind.key?.(call.input) : undefined,
    },
  );
}

/**
 * The batchers of the calls that share a database and queues (a process's producer dependencies,
 * made once), one per kind; held weakly, so deps made per call simply batch nothing together. The
 * logger is not part of the key but of each call: a producer passing `logger.child(…)` per call
 * still shares the batchers, instead of leaving one behind per logger.
 */
const batchesByDeps = new WeakMap<Db, WeakMap<object, Map<object, unknown>>>();

/** The batcher shared by the producer calls of this kind made with this database and these queues. */
export function producerBatchesFor<I extends CallIdentity, F>(deps: ProducerDeps, kind: ProducerKind<I, F>): ProducerBatches<I, F> {
  let byQueues = batchesByDeps.get(deps.db);
  if (!byQueues) batchesByDeps.set(deps.db, (byQueues = new WeakMap()));
  let byKind = byQueues.get(deps.queues);
  if (!byKind) byQueues.set(deps.queues, (byKind = new Map()));
  // The map holds, for each kind, the batcher made for it just below: of that kind's types.
  let batches = byKind.get(kind) as ProducerBatches<I, F> | undefined;
  if (!batches) byKind.set(kind, (batches = createProducerBatches(deps.db, deps.queues, kind)));
  return batches;
}
