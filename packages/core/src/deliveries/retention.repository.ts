/** Operator-side, unscoped retention purge of the dispatchers: never reached by a customer's request. */
import type { Db, DbOrTx } from '../db/knex.js';

/** The advisory lock every dispatcher's purge takes per batch: one purger at a time, however many run. */
export const RETENTION_LOCK_KEY = 7_311_043_926_150_001;

export interface RetentionOptions {
  /** Finished deliveries whose last attempt (and finish) is older than this many days go. */
  retentionDays: number;
  /** Rows per table per batch: each batch is one short transaction. */
  batchSize: number;
  /** Batches per run at most, so one run never holds a dispatcher's connection for long. */
  maxBatches: number;
}

export interface PurgeResult {
  /** False when another dispatcher held the lock: this run purged nothing. */
  ran: boolean;
  deliveries: number;
  attempts: number;
  events: number;
}

/**
 * Postgres's clock at the start of the batch's transaction. Stable, not volatile (as
 * clock_timestamp() is), so the planner reads it as a value: the scans of deliveries_finished_idx
 * and events_created_idx stop at the cutoff, and its estimate is the number of rows expired.
 */
const CUTOFF = `now() - make_interval(days => :days)`;

/**
 * Finished (delivered or permanently failed) deliveries finished before the cutoff and with no
 * attempt since, locked for this batch. A pending delivery is never chosen; a row another
 * transaction holds (a redelivery being stored, a revocation) is skipped, not waited for. A
 * delivery that a redelivery still points at (redelivery_of, ON DELETE CASCADE) waits for that
 * redelivery to go first: deleting it would cascade to the redelivery, pending or recent.
 */
const LOCK_EXPIRED_DELIVERIES = `
  SELECT d.id FROM deliveries d
   WHERE d.status <> 'pending' AND d.finished_at < ${CUTOFF}
     AND NOT EXISTS (SELECT 1 FROM delivery_attempts a WHERE a.delivery_id = d.id AND a.at >= ${CUTOFF})
     AND NOT EXISTS (SELECT 1 FROM deliveries r WHERE r.redelivery_of = d.id)
   ORDER BY d.finished_at
   LIMIT :batch
   FOR UPDATE SKIP LOCKED`;

/**
 * Deletes the deliveries locked above, with their attempts, that no redelivery points at now.
 * A statement of its own, so that its snapshot is taken once the locks are held: the locking
 * statement's snapshot is as old as its scan, and a redelivery committed while it scanned (the
 * redelivery holds its original FOR KEY SHARE only until its commit) is invisible to it, yet
 * would go by cascade with its original. Any redelivery of a locked delivery either committed
 * before the lock was taken (and is seen here) or waits for this transaction (and finds no
 * original). Status, finish and attempts need no second look: they change only on the row, or
 * under its pending state.
 */
const DELETE_LOCKED_DELIVERIES = `
  WITH doomed AS (
    SELECT d.id FROM deliveries d
     WHERE d.id = ANY(:ids::text[])
       AND NOT EXISTS (SELECT 1 FROM deliveries r WHERE r.redelivery_of = d.id)
  ), attempts AS (
    DELETE FROM delivery_attempts a USING doomed WHERE a.delivery_id = doomed.id RETURNING a.id
  ), gone AS (
    DELETE FROM deliveries d USING doomed WHERE d.id = doomed.id RETURNING d.id
  )
  SELECT (SELECT count(*) FROM gone)::int AS deliveries, (SELECT count(*) FROM attempts)::int AS attempts`;

/**
 * Events older than the cutoff with no delivery left, already fanned out (an event still waiting
 * for its fan-out is work, not history). The row lock keeps a concurrent new delivery of it out.
 * "No delivery left" is one probe of deliveries_event_id_idx per event, taken oldest first until
 * the batch is full: OFFSET 0 keeps the planner from turning it into an anti-join, which with many
 * expired events (a first purge of a long history) it would run as a hash of every delivery, read
 * in full on every batch. Deleting an event looks its deliveries up (ON DELETE CASCADE) through
 * the same index.
 */
const PURGE_EVENTS = `
  WITH doomed AS (
    SELECT e.id FROM events e
     WHERE e.created_at < ${CUTOFF} AND e.fanned_out_at IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id OFFSET 0)
     ORDER BY e.created_at
     LIMIT :batch
     FOR UPDATE SKIP LOCKED
  )
  DELETE FROM events e USING doomed WHERE e.id = doomed.id RETURNING e.id`;

/**
 * One batch in one transaction under the advisory lock; undefined when another purger holds it.
 * `full`: as many deliveries were locked as a batch holds, so more may be waiting.
 */
async function purgeBatch(db: Db, options: RetentionOptions): Promise<(Omit<PurgeResult, 'ran'> & { full: boolean }) | undefined> {
  return db.transaction(async (tx: DbOrTx) => {
    const lock = await tx.raw('SELECT pg_try_advisory_xact_lock(?::bigint) AS locked', [String(RETENTION_LOCK_KEY)]);
    if (!lock.rows[0]?.locked) return undefined;
    const params = { days: options.retentionDays, batch: options.batchSize };
    const locked = ((await tx.raw(LOCK_EXPIRED_DELIVERIES, params)).rows as Array<{ id: string }>).map((row) => row.id);
    const deliveries =
      locked.length === 0
        ? { deliveries: 0, attempts: 0 }
        : ((await tx.raw(DELETE_LOCKED_DELIVERIES, { ids: locked })).rows[0] as { deliveries: number; attempts: number });
    const events = (await tx.raw(PURGE_EVENTS, params)).rows.length;
    return { deliveries: deliveries.deliveries, attempts: deliveries.attempts, events, full: locked.length === options.batchSize };
  });
}

/**
 * Deletes expired history in batches until nothing old is left or maxBatches ran. The facts
 * (sites, scans, AI Monitor runs, deployments) are never touched; nor is a pending delivery or
 * an event that still has a delivery. retentionDays 0 keeps everything.
 */
export async function purgeExpiredHistory(db: Db, options: RetentionOptions): Promise<PurgeResult> {
  const total: PurgeResult = { ran: false, deliveries: 0, attempts: 0, events: 0 };
  if (options.retentionDays <= 0) return total;
  for (let batch = 0; batch < options.maxBatches; batch += 1) {
    const purged = await purgeBatch(db, options);
    if (!purged) return total;
    total.ran = true;
    total.deliveries += purged.deliveries;
    total.attempts += purged.attempts;
    total.events += purged.events;
    if (!purged.full && purged.events < options.batchSize) break;
  }
  return total;
}
