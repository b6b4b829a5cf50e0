import type { Db } from '../db/knex.js';

/** One first attempt to queue: its delivery and the subscription it goes to. */
export interface FirstAttempt {
  deliveryId: string;
  subscriptionId: string;
}

/**
 * A producer fans its event out in its own statement when the account has at most this many
 * matching subscriptions (one batch of the dispatcher's claims); a wider event is left to the
 * dispatcher's fan-out job, so a producer's transaction stays small whatever the account.
 */
export const PRODUCER_FAN_OUT_MAX = 100;

/**
 * The one recipe for a first delivery: `INSERT … SELECT` of a pending delivery with attempt 0, due
 * now, for each (event, subscription) pair `from` gives (`eventId`, `subscriptionId` are its SQL).
 * The producer's statement and the dispatcher's fan-out page both make their rows with it.
 */
function insertFirstDeliveriesSql(select: { eventId: string; subscriptionId: string; from: string }, tail: string): string {
  return `INSERT INTO deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at)
       SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), ${select.eventId}, ${select.subscriptionId}, 'pending', 0, clock_timestamp()
         FROM ${select.from}
       ${tail}`;
}

/**
 * The fan-out of a producer's statement (ADR 11): the same rows fanOutEventsInPages makes — one
 * pending delivery per active subscription of the account whose events hold the event's type or
 * `*`, due now — made in the transaction that records the facts and their events, so the first
 * attempts can be queued right after the commit instead of one job and one transaction later.
 * An event fans out there only when its account has at most PRODUCER_FAN_OUT_MAX matching
 * subscriptions; a wider one is left to the dispatcher's fan-out job.
 *
 * `targetsCte` comes before the events' CTE and reads `from`, a CTE already defined with one row
 * per event (`ev_id`, `account_id`); `fannedOutSql(evId)` is that event's fanned_out_at (over
 * `clock.now`); `createdCte` comes after the CTE `event` (`id`, `fanned_out_at`);
 * `firstAttemptsSql(event)` is the JSON array of one event's first attempts (`first_attempts`).
 * `evTypeSql` is each event's type, over `from` (a text column).
 */
export function producerFanOutSql(from: string, evTypeSql: string): {
  targetsCte: string;
  fannedOutSql: (evIdSql: string) => string;
  createdCte: string;
  firstAttemptsSql: (eventAlias: string) => string;
  bindings: { fanOutMax: number };
} {
  return {
    targetsCte: `targets AS (
       SELECT ${from}.ev_id, t.id FROM ${from} CROSS JOIN LATERAL (
         SELECT s.id FROM webhook_subscriptions s
          WHERE s.account_id = ${from}.account_id AND s.status = 'active' AND (s.events @> ARRAY[${evTypeSql}] OR s.events @> ARRAY['*'])
          LIMIT :fanOutMax + 1
       ) t
     )`,
    fannedOutSql: (evIdSql) => `CASE WHEN (SELECT count(*) FROM targets WHERE targets.ev_id = ${evIdSql}) <= :fanOutMax THEN clock.now END`,
    createdCte: `created AS (
       ${insertFirstDeliveriesSql(
         { eventId: 'event.id', subscriptionId: 'targets.id', from: 'event JOIN targets ON targets.ev_id = event.id' },
         'WHERE event.fanned_out_at IS NOT NULL RETURNING id, event_id, subscription_id',
       )}
     )`,
    firstAttemptsSql: (eventAlias) =>
      `(SELECT coalesce(json_agg(json_build_array(created.id, created.subscription_id)), '[]') FROM created WHERE created.event_id = ${eventAlias}.id) AS first_attempts`,
    bindings: { fanOutMax: PRODUCER_FAN_OUT_MAX },
  };
}

/** What a producer's statement fanned out: the first attempts to queue, and whether it fanned out at all. */
export interface ProducerFanOut {
  firstAttempts: FirstAttempt[];
  /** False when the account has too many matching subscriptions: the fan-out job does it. */
  fannedOut: boolean;
}

/** A producer statement's `first_attempts` and `fanned_out` columns. */
export function toProducerFanOut(row: { first_attempts: unknown; fanned_out: boolean }): ProducerFanOut {
  return { firstAttempts: toFirstAttempts(row.first_attempts), fannedOut: row.fanned_out };
}

/** The first attempts of a producer's statement, from its `first_attempts` column. */
export function toFirstAttempts(column: unknown): FirstAttempt[] {
  const pairs = (typeof column === 'string' ? JSON.parse(column) : column) as Array<[string, string]>;
  return pairs.map(([deliveryId, subscriptionId]) => ({ deliveryId, subscriptionId }));
}

/**
 * The most deliveries one fan-out statement creates, and the most first attempts a fan-out holds
 * in memory at once: an event of an account with 10,000 matching subscriptions is fanned out in
 * 10 statements of 1,000, each committed and its first attempts queued before the next.
 */
export const FAN_OUT_PAGE_MAX = 1_000;

/** One page of a fan-out: what its statement created, and the first attempts to queue. */
export interface FanOutPage {
  eventId: string;
  /** Deliveries this page's statement created (≤ the page size). */
  created: number;
  /** Those created now, and those of this page an earlier run created but may not have queued. */
  firstAttempts: FirstAttempt[];
}

export interface FanOutSummary {
  pages: number;
  created: number;
  queued: number;
}

interface FanningRow {
  found: boolean;
  fanning: boolean | null;
  by_dispatcher: boolean | null;
  subscriptions: number;
  created: number;
  first_attempts: unknown;
  more: boolean;
  last_id: string | null;
}

interface RequeueRow {
  deliveries: number;
  last_subscription_id: string | null;
  first_attempts: unknown;
}

/**
 * One page of an event's fan-out, in one statement (one commit): the next `pageSize` active
 * subscriptions of the account whose events hold its type or `*`, in id order (keyset on the id,
 * so that a page is one range of deliveries_first_delivery_idx too), get one pending delivery
 * each, due now. The event is marked fanned out by its last page only, so an event a run left half
 * done (its process died) is fanned out again, whole, by the sweep's job. A subscription made
 * while a wide event fans out may or may not receive it, as it falls before or after the page
 * being made.
 *
 * "One delivery per (event, subscription)" holds for first deliveries only (a redelivery is a
 * second row): the conflict target is left open so that every unique index is an arbiter — the
 * first-delivery one and the one-pending-per-(event, subscription) one — and a run racing a
 * redelivery or another run does nothing rather than fail. Deliveries of the page an earlier run
 * made are answered too (their first attempt may never have been queued).
 */
const FAN_OUT_PAGE_SQL = `
  WITH ev AS (
    SELECT id, account_id, type, fanned_out_at IS NULL AS fanning,
           -- An event its producer fanned out (its statement dates fanned_out_at with the event's own
           -- created_at) had its first attempts queued by that producer on the round trip that queued
           -- this job: queued again, one whose job just completed would get a second, idle job.
           fanned_out_at IS DISTINCT FROM created_at AS by_dispatcher
      FROM events WHERE id = :eventId
  ), targets AS (
    SELECT s.id FROM ev JOIN webhook_subscriptions s ON s.account_id = ev.account_id
     WHERE ev.fanning AND s.status = 'active' AND (s.events @> ARRAY[ev.type] OR s.events @> ARRAY['*'])
       AND s.id > :afterId
     ORDER BY s.id
     LIMIT :pageSize::int + 1
  ), page AS (
    SELECT id FROM targets ORDER BY id LIMIT :pageSize::int
  ), created AS (
    ${insertFirstDeliveriesSql({ eventId: 'ev.id', subscriptionId: 'page.id', from: 'ev CROSS JOIN page' }, 'ON CONFLICT DO NOTHING RETURNING id, subscription_id')}
  ), earlier AS (
    -- The page's range of the event's first deliveries: one range of deliveries_first_delivery_idx
    -- (the LIMIT keeps the status test out of the scan, so no plan reads a backlog of pending ones).
    SELECT w.id, w.subscription_id FROM (
      SELECT d.id, d.subscription_id, d.status, d.attempt_count FROM deliveries d
       WHERE d.event_id = :eventId AND d.redelivery_of IS NULL
         AND d.subscription_id > :afterId AND d.subscription_id <= (SELECT max(id) FROM page)
       ORDER BY d.subscription_id
       LIMIT :pageSize::int
    ) w
     WHERE w.status = 'pending' AND w.attempt_count = 0
  ), marked AS (
    UPDATE events SET fanned_out_at = clock_timestamp()
     WHERE id = :eventId AND fanned_out_at IS NULL AND (SELECT count(*) FROM targets) <= :pageSize::int
    RETURNING id
  )
  SELECT EXISTS (SELECT 1 FROM ev) AS found,
         (SELECT fanning FROM ev) AS fanning,
         (SELECT by_dispatcher FROM ev) AS by_dispatcher,
         (SELECT count(*) FROM page)::int AS subscriptions,
         (SELECT count(*) FROM created)::int AS created,
         (SELECT coalesce(json_agg(json_build_array(f.id, f.subscription_id)), '[]')
            FROM (SELECT id, subscription_id FROM created UNION ALL SELECT id, subscription_id FROM earlier) f) AS first_attempts,
         (SELECT count(*) FROM targets) > :pageSize::int AS more,
         (SELECT max(id) FROM page) AS last_id`;

/**
 * A page of the first deliveries of an event a dispatcher's run already fanned out, keyset on
 * subscription id through deliveries_first_delivery_idx: those still waiting for their first
 * attempt are answered, so a job lost between that run's commit and its enqueue is queued again.
 */
const REQUEUE_PAGE_SQL = `
  WITH page AS (
    SELECT d.id, d.subscription_id, d.status, d.attempt_count FROM deliveries d
     WHERE d.event_id = :eventId AND d.redelivery_of IS NULL AND d.subscription_id > :afterId
     ORDER BY d.subscription_id
     LIMIT :pageSize::int
  )
  SELECT count(*)::int AS deliveries, max(subscription_id) AS last_subscription_id,
         coalesce(json_agg(json_build_array(id, subscription_id)) FILTER (WHERE status = 'pending' AND attempt_count = 0), '[]') AS first_attempts
    FROM page`;

/** Counts a page in the run's summary and hands it to `queuePage`. */
async function handPage(queuePage: (page: FanOutPage) => Promise<void>, summary: FanOutSummary, page: FanOutPage): Promise<void> {
  summary.pages += 1;
  summary.created += page.created;
  summary.queued += page.firstAttempts.length;
  await queuePage(page);
}

/** Requeues, page by page, the first attempts still waiting of an event a dispatcher's run fanned out. */
async function requeueFannedOutEvent(
  db: Db,
  eventId: string,
  queuePage: (page: FanOutPage) => Promise<void>,
  pageSize: number,
  summary: FanOutSummary,
): Promise<void> {
  let afterId = '';
  for (;;) {
    const row = (await db.raw(REQUEUE_PAGE_SQL, { eventId, afterId, pageSize }).options({ name: 'svc_fan_out_requeue_page_v1' })).rows[0] as RequeueRow;
    if (row.deliveries === 0 || row.last_subscription_id === null) return;
    await handPage(queuePage, summary, { eventId, created: 0, firstAttempts: toFirstAttempts(row.first_attempts) });
    if (row.deliveries < pageSize) return;
    afterId = row.last_subscription_id;
  }
}

/** Fans one event out page by page (FAN_OUT_PAGE_SQL), handing each page to `queuePage` before the next. */
async function fanOutEventInPages(
  db: Db,
  eventId: string,
  queuePage: (page: FanOutPage) => Promise<void>,
  pageSize: number,
  summary: FanOutSummary,
): Promise<void> {
  let afterId = '';
  for (;;) {
    const row = (await db.raw(FAN_OUT_PAGE_SQL, { eventId, afterId, pageSize }).options({ name: 'svc_fan_out_page_v1' })).rows[0] as FanningRow;
    if (!row.found) return;
    if (!row.fanning) {
      // Fanned out already: by its producer (nothing to do), or by a dispatcher's run, perhaps one
      // that finished this event while this run was paging through it.
      if (row.by_dispatcher) await requeueFannedOutEvent(db, eventId, queuePage, pageSize, summary);
      return;
    }
    if (row.subscriptions > 0) await handPage(queuePage, summary, { eventId, created: row.created, firstAttempts: toFirstAttempts(row.first_attempts) });
    if (!row.more || row.last_id === null) return;
    afterId = row.last_id;
  }
}

/**
 * Fan-out (idempotent): one delivery per active subscription of each event's account whose events
 * hold its type or `*`, made in pages of at most `pageSize` deliveries, one statement and one
 * commit each; `queuePage` queues a page's first attempts before the next page is made, so no
 * more than one page of them is ever held. An event already fanned out (by its producer's
 * statement, or by an earlier run) is not fanned out again and its row is not rewritten; the first
 * attempts still pending of an event an earlier run fanned out are answered again, so a job lost
 * between that run's commit and its enqueue is queued again; those of an event its producer fanned
 * out are not (the producer queued them; if Redis lost them, the sweep queues them once overdue).
 * A run that stops half-way (its process dies) leaves the event unmarked: running it again skips
 * the deliveries made (unique per event and subscription), answers them, and makes the rest.
 */
export async function fanOutEventsInPages(
  db: Db,
  eventIds: readonly string[],
  queuePage: (page: FanOutPage) => Promise<void>,
  pageSize: number = FAN_OUT_PAGE_MAX,
): Promise<FanOutSummary> {
  const summary: FanOutSummary = { pages: 0, created: 0, queued: 0 };
  for (const eventId of eventIds) await fanOutEventInPages(db, eventId, queuePage, pageSize, summary);
  return summary;
}
