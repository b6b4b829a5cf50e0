import type { Db, DbOrTx } from '../db/knex.js';
import { returnedRow } from '../db/tables.js';
import { InputError, NotFoundError, SubscriptionDisabledError } from '../errors.js';
import { hotRead, isoUtc, runHotRead } from '../db/hot-read.js';
import { newId, randomHex } from '../ids.js';
import { SecretBox, subscriptionSecretPlace } from '../secrets/secret-box.js';

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

/** What a caller that does not say otherwise stores: plain text, as a process without SECRETS_ENCRYPTION_KEY does. */
const PLAIN_TEXT = new SecretBox([]);

/**
 * Creates a subscription with a fresh CSPRNG secret, stored as `secrets` seals it (the process's
 * SecretBox; plain text without one); the only time the secret leaves the database.
 */
export async function createSubscription(
  db: DbOrTx,
  accountId: string,
  input: { url: string; events: readonly string[] },
  secrets: SecretBox = PLAIN_TEXT,
): Promise<CreatedSubscription> {
  const id = newId('wh');
  const secret = randomHex(SECRET_BYTES);
  const row = returnedRow(
    await db('webhook_subscriptions')
      .insert({ id, account_id: accountId, url: input.url, events: [...input.events], secret: secrets.seal(secret, subscriptionSecretPlace(id)) })
      .returning(['id', 'url', 'events', 'created_at']),
  );
  return { id: row.id, url: row.url, events: row.events, secret, createdAt: row.created_at };
}

/**
 * The account's subscriptions, newest first (an ordered walk of webhook_subscriptions_account_idx),
 * as the text of the JSON array the API lists (spec §4.4), written by Postgres (ADR 12). Unlike the
 * site list and detail, each subscription is written by concatenation around to_json and
 * array_to_json rather than row_to_json, and both LIMITs are bound to NULL (LIMIT ALL) so that the
 * prepared statement's generic plan, which counts 10 % of the rows per LIMIT, stays cheaper than
 * any custom plan and is kept instead of re-planned on every execution: with row_to_json and no
 * LIMIT the list was slower in each of 5 alternating pairs, 0.68–0.78× its baseline against
 * 0.81–0.88× (ADR 12, webhooks-list-plan.test). The aggregate's ORDER BY is what guarantees the order.
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
    // Stored answers to requests about it (its create and rotations hold its secret) go with it:
    // a replay after the revocation answers as a new request would (404 for a rotation).
    await tx('idempotency_keys').where({ account_id: accountId, subscription_id: subscriptionId }).del();
    return pending.map((row: { id: string; attempt_count: number }) => ({
      deliveryId: row.id,
      attempt: row.attempt_count + 1,
    }));
  });
}

/** The longest overlap a rotation may give the old secret: 7 days. */
export const MAX_ROTATION_OVERLAP_SECONDS = 7 * 24 * 60 * 60;
export const DEFAULT_ROTATION_OVERLAP_SECONDS = 24 * 60 * 60;

export interface RotatedSecret {
  id: string;
  secret: string;
  /** When the replaced secret stops signing; null when the rotation gave it no overlap. */
  previousSecretExpiresAt: Date | null;
}

/**
 * Gives a subscription a new CSPRNG secret, the only time it leaves the database. The secret it
 * replaces keeps signing beside it (webhook-signature) for `overlapSeconds`; a rotation during an
 * overlap ends the older one, so at most two secrets ever sign. The attempts already claimed keep
 * the secrets they were claimed with; every later attempt is signed with the new one. An
 * auto-disabled subscription can be rotated too (it sends nothing either way). Both secrets are
 * stored as `secrets` seals them; the replaced one is opened and sealed again for its own column
 * (a sealed value is bound to its column), so with an overlap a replaced secret that cannot be
 * opened fails the rotation (SecretUnavailableError) and changes nothing. NotFoundError for
 * another account's id, an unknown id or one being revoked.
 */
export async function rotateSubscriptionSecret(
  db: DbOrTx,
  accountId: string,
  subscriptionId: string,
  overlapSeconds: number,
  secrets: SecretBox = PLAIN_TEXT,
): Promise<RotatedSecret> {
  if (!Number.isInteger(overlapSeconds) || overlapSeconds < 0 || overlapSeconds > MAX_ROTATION_OVERLAP_SECONDS) {
    throw new InputError(`overlapSeconds must be a whole number of seconds from 0 to ${MAX_ROTATION_OVERLAP_SECONDS}`);
  }
  const secret = randomHex(SECRET_BYTES);
  const row = await db.transaction(async (tx): Promise<{ id: string; previous_secret_expires_at: Date | null } | undefined> => {
    // FOR NO KEY UPDATE, the lock the UPDATE takes anyway: a claim's FOR KEY SHARE never waits for it.
    const found = await tx('webhook_subscriptions')
      .where({ id: subscriptionId, account_id: accountId })
      .whereIn('status', ['active', 'disabled'])
      .forNoKeyUpdate()
      .first('secret');
    if (!found) return undefined;
    const replaced =
      overlapSeconds > 0
        ? secrets.seal(secrets.open(found.secret, subscriptionSecretPlace(subscriptionId)), subscriptionSecretPlace(subscriptionId, 'previous_secret'))
        : null;
    return returnedRow(
      await tx('webhook_subscriptions')
        .where({ id: subscriptionId })
        .update({
          previous_secret: replaced,
          previous_secret_expires_at: overlapSeconds > 0 ? tx.raw('clock_timestamp() + make_interval(secs => ?)', [overlapSeconds]) : null,
          secret: secrets.seal(secret, subscriptionSecretPlace(subscriptionId)),
        })
        .returning(['id', 'previous_secret_expires_at']),
    );
  });
  if (!row) throw new NotFoundError('No webhook subscription with this id exists in your account.');
  return { id: row.id, secret, previousSecretExpiresAt: row.previous_secret_expires_at };
}

/** A subscription as the API lists it (spec §4.4), never the secret. */
export interface SubscriptionListing {
  id: string;
  url: string;
  events: string[];
  createdAt: Date;
  lastDeliveryAt: Date | null;
  failureCount: number;
  status: 'active' | 'disabled';
}

/**
 * Changes a subscription's url and/or events; its history, failure count and secret stay. The
 * attempts already queued go to the new url (each reads the subscription when it is claimed).
 * SubscriptionDisabledError for an auto-disabled subscription, which stays disabled and unchanged;
 * NotFoundError for another account's id, an unknown id or one being revoked.
 */
export async function updateSubscription(
  db: Db,
  accountId: string,
  subscriptionId: string,
  input: { url?: string; events?: readonly string[] },
): Promise<SubscriptionListing> {
  return db.transaction(async (tx) => {
    // FOR UPDATE, as a revocation takes it: a PATCH and a DELETE of one subscription run one after the other.
    const found = await tx('webhook_subscriptions')
      .where({ id: subscriptionId, account_id: accountId })
      .whereIn('status', ['active', 'disabled'])
      .forUpdate()
      .first('status');
    if (!found) throw new NotFoundError('No webhook subscription with this id exists in your account.');
    if (found.status === 'disabled') {
      throw new SubscriptionDisabledError('This webhook subscription was disabled after repeated failures and never resumes; create a new one instead.');
    }
    const row = returnedRow(
      await tx('webhook_subscriptions')
        .where({ id: subscriptionId })
        .update({ ...(input.url === undefined ? {} : { url: input.url }), ...(input.events === undefined ? {} : { events: [...input.events] }) })
        .returning(['id', 'url', 'events', 'created_at', 'last_delivery_at', 'failure_count', 'status']),
    );
    return {
      id: row.id,
      url: row.url,
      events: row.events,
      createdAt: row.created_at,
      lastDeliveryAt: row.last_delivery_at,
      failureCount: row.failure_count,
      status: row.status as 'active' | 'disabled',
    };
  });
}
