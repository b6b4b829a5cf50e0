import type { DbOrTx } from '../db/knex.js';
import { NotFoundError } from '../errors.js';
import { hotRead, isoUtc, runHotRead } from '../db/hot-read.js';
import { newId, randomHex } from '../ids.js';

/** Spec §3.2 and §8: a subscription is disabled for good when failureCount reaches this. */
export const AUTO_DISABLE_THRESHOLD = 100;
/** Spec §2.4, §8: 64 hexadecimal characters. */
const SECRET_BYTES = 32;

export type SubscriptionStatus = 'active' | 'disabled';

export interface CreatedSubscription {
  id: string;
  url: string;
  events: string[];
  secret: string;
  createdAt: Date;
}

export interface SubscriptionListing {
  id: string;
  url: string;
  events: string[];
  status: SubscriptionStatus;
  createdAt: Date;
  lastDeliveryAt: Date | null;
  failureCount: number;
}

/** Creates a subscription with a fresh CSPRNG secret; the only time the secret leaves the database. */
export async function createSubscription(
  db: DbOrTx,
  accountId: string,
  input: { url: string; events: readonly string[] },
): Promise<CreatedSubscription> {
  const [row] = await db('webhook_subscriptions')
    .insert({
      id: newId('wh'),
      account_id: accountId,
      url: input.url,
      events: [...input.events],
      secret: randomHex(SECRET_BYTES),
    })
    .returning(['id', 'url', 'events', 'secret', 'created_at']);
  return { id: row.id, url: row.url, events: row.events, secret: row.secret, createdAt: row.created_at };
}

/**
 * The account's subscriptions, newest first (an ordered walk of webhook_subscriptions_account_idx),
 * written by Postgres as the text of the JSON array the API lists (spec §4.4): each subscription with the
 * API's keys in the API's order and JSON.stringify's bytes, joined into one row (as the site
 * list, ADR 12), so the API neither receives and joins a row per subscription nor parses any.
 * Each subscription is written by concatenation, not row_to_json: row_to_json looks up every
 * column's type in the catalog again on every row and builds a row value for it, which made this
 * list cost Postgres ~17 % more than the same rows as columns (docs/benchmarks.md, issue 13,
 * webhooks list). Only the values that can hold any text go through a JSON writer: the id and
 * the url through to_json, the events through array_to_json (the same escapes as row_to_json);
 * the times are to_char's digits, failure_count an integer, and status one of the three words its
 * CHECK constraint allows, so they are written as they are. The aggregate's ORDER BY is what
 * guarantees the order; it is given rows the index walk already ordered.
 *
 * Both LIMITs are bound to NULL, which is LIMIT ALL: every subscription is listed. They are
 * there for the planner: the generic plan of the prepared statement, which cannot see the NULL,
 * counts 10 % of the account's rows per LIMIT, so with two it costs far less than any custom plan
 * and Postgres keeps it (an ordered walk of webhook_subscriptions_account_idx, planned once per
 * connection) instead of planning every execution again. With one LIMIT the margin depended on
 * the statistics: with the bench's accounts it was a fraction of a cost unit, and the same list as
 * columns was re-planned on every execution there (ADR 12, webhooks-list-plan.test).
 */
export const LIST_SUBSCRIPTIONS_JSON_SQL = `SELECT '[' || COALESCE(string_agg(q.json, ',' ORDER BY q.created_at DESC, q.id DESC), '') || ']' AS json FROM (
       SELECT w.json, w.created_at, w.id FROM (
         SELECT '{"id":' || to_json(s.id)::text || ',"url":' || to_json(s.url)::text
                || ',"events":' || array_to_json(s.events)::text
                || ',"createdAt":"' || ${isoUtc('s.created_at')}
                || '","lastDeliveryAt":' || COALESCE('"' || ${isoUtc('s.last_delivery_at')} || '"', 'null')
                || ',"failureCount":' || s.failure_count::text
                || ',"status":"' || s.status || '"}' AS json,
                s.created_at, s.id
           FROM webhook_subscriptions s
          WHERE s.account_id = ? AND s.status IN ('active', 'disabled')
          ORDER BY s.created_at DESC, s.id DESC
          LIMIT ?
       ) w
      ORDER BY w.created_at DESC, w.id DESC
      LIMIT ?
     ) q`;

const LIST_SUBSCRIPTIONS_JSON = hotRead('svc_list_subscriptions_json', LIST_SUBSCRIPTIONS_JSON_SQL);

/**
 * Every subscription of the account, newest first, auto-disabled ones included, never the
 * secret, as the text of the JSON array the API lists (`[]` when there is none).
 */
export async function listSubscriptionsAsJsonArray(db: DbOrTx, accountId: string): Promise<string> {
  const [row] = await runHotRead<{ json: string }>(db, LIST_SUBSCRIPTIONS_JSON, [accountId, null, null]);
  return row!.json;
}

/**
 * Every subscription of the account, newest first, auto-disabled ones included, never the
 * secret, as objects: the same statement as the API's list, parsed (as listSites does).
 */
export async function listSubscriptions(db: DbOrTx, accountId: string): Promise<SubscriptionListing[]> {
  const listed = JSON.parse(await listSubscriptionsAsJsonArray(db, accountId)) as Array<
    Omit<SubscriptionListing, 'createdAt' | 'lastDeliveryAt'> & { createdAt: string; lastDeliveryAt: string | null }
  >;
  return listed.map((sub) => ({
    ...sub,
    createdAt: new Date(sub.createdAt),
    lastDeliveryAt: sub.lastDeliveryAt === null ? null : new Date(sub.lastDeliveryAt),
  }));
}

/**
 * First step of a revocation: hides the subscription and stops every new attempt (a claim needs
 * an active subscription). One already being removed (a DELETE that failed half-way) is taken
 * again, keeping its first deleting_at, so a retried DELETE can finish the job. NotFoundError
 * for another account's id or an unknown id.
 */
export async function markSubscriptionDeleting(db: DbOrTx, accountId: string, subscriptionId: string): Promise<void> {
  const row = await db.transaction(async (tx) => {
    // FOR UPDATE first: it conflicts with a claim's FOR KEY SHARE (a plain UPDATE's lock would not),
    // so a claim either committed its lease before this (the revocation waits for it) or skips
    // the subscription until this has committed, and then sees it `deleting`.
    const found = await tx('webhook_subscriptions')
      .where({ id: subscriptionId, account_id: accountId })
      .whereIn('status', ['active', 'disabled', 'deleting'])
      .forUpdate()
      .first('id');
    if (!found) return undefined;
    await tx('webhook_subscriptions')
      .where({ id: subscriptionId })
      .update({ status: 'deleting', deleting_at: tx.raw('COALESCE(deleting_at, clock_timestamp())') });
    return found;
  });
  if (!row) throw new NotFoundError('No webhook subscription with this id exists in your account.');
}

/** True while an attempt of this subscription is on the wire (its delivery holds a lease). */
export async function hasAttemptInFlight(db: DbOrTx, accountId: string, subscriptionId: string): Promise<boolean> {
  const row = await db('deliveries as d')
    .join('webhook_subscriptions as s', 's.id', 'd.subscription_id')
    .where({ 'd.subscription_id': subscriptionId, 's.account_id': accountId })
    .where('d.locked_until', '>', db.raw('clock_timestamp()'))
    .first(db.raw('1 AS one'));
  return row !== undefined;
}

/**
 * Last step of a revocation: removes the subscription with its deliveries and attempts
 * (spec §3.2), returning the attempts that were still queued so their jobs can be cancelled.
 */
export async function deleteSubscriptionRows(
  db: DbOrTx,
  accountId: string,
  subscriptionId: string,
): Promise<Array<{ deliveryId: string; attempt: number }>> {
  return (db as DbOrTx).transaction(async (tx) => {
    const pending = await tx('deliveries')
      .where({ subscription_id: subscriptionId, status: 'pending' })
      .select('id', 'attempt_count');
    await tx('webhook_subscriptions').where({ id: subscriptionId, account_id: accountId }).del();
    return pending.map((row: { id: string; attempt_count: number }) => ({
      deliveryId: row.id,
      attempt: row.attempt_count + 1,
    }));
  });
}
