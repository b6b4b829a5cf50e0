import type { DbOrTx } from '../db/knex.js';
import { IdempotencyKeyInUseError, IdempotencyKeyReusedError } from '../errors.js';
import { storedAnswerPlace, type SecretBox } from '../secrets/secret-box.js';

/** An answer is replayed for its Idempotency-Key this long after the first request. */
export const IDEMPOTENCY_KEY_TTL_SECONDS = 24 * 60 * 60;

export type IdempotentStart = { kind: 'first' } | { kind: 'replay'; status: number; body: string };

interface KeyRow {
  fingerprint: string;
  state: 'in_progress' | 'done';
  response_status: number | null;
  response_body: string | null;
}

/**
 * Starts a request made with an Idempotency-Key: `first` when this request is to be answered (the
 * key is new to the account, or its last use is over 24 hours old), `replay` with the stored answer
 * when the same request was answered before. A request whose answer was never stored (its process
 * died, or Postgres refused the answer) holds its key until it expires: it may have done what it
 * was asked, so it is never run again under that key. IdempotencyKeyReusedError when the key was used for another
 * request (another method, path or body: another fingerprint); IdempotencyKeyInUseError while
 * the same request is still being answered. Keys are per account. One statement when the key is
 * new, two otherwise.
 */
export async function startIdempotentRequest(db: DbOrTx, accountId: string, key: string, fingerprint: string, secrets: SecretBox): Promise<IdempotentStart> {
  const claimed = await db.raw(
    // Each start also deletes a few keys over 24 hours old (oldest first, never this one), so the
    // table holds about one day of keys without a job of its own.
    `WITH expired AS (
       DELETE FROM idempotency_keys WHERE (account_id, key) IN (
         SELECT account_id, key FROM idempotency_keys
          WHERE created_at < clock_timestamp() - make_interval(secs => :ttl) AND NOT (account_id = :accountId AND key = :key)
          ORDER BY created_at LIMIT 10)
     )
     INSERT INTO idempotency_keys AS k (account_id, key, fingerprint, state)
     VALUES (:accountId, :key, :fingerprint, 'in_progress')
     ON CONFLICT (account_id, key) DO UPDATE
        SET fingerprint = EXCLUDED.fingerprint, state = 'in_progress', locked_until = NULL,
            response_status = NULL, response_body = NULL, subscription_id = NULL, created_at = clock_timestamp()
      WHERE k.created_at < clock_timestamp() - make_interval(secs => :ttl)
     RETURNING 1`,
    { accountId, key, fingerprint, ttl: IDEMPOTENCY_KEY_TTL_SECONDS },
  );
  if ((claimed.rows as unknown[]).length > 0) return { kind: 'first' };
  const row = (await db('idempotency_keys')
    .where({ account_id: accountId, key })
    .first('fingerprint', 'state', 'response_status', 'response_body')) as KeyRow | undefined;
  // Gone between the two statements (its request failed and let go of it): this one may go on.
  if (!row) return startIdempotentRequest(db, accountId, key, fingerprint, secrets);
  if (row.fingerprint !== fingerprint) {
    throw new IdempotencyKeyReusedError('This Idempotency-Key was used in the last 24 hours for another request (method, path or body); nothing was done. Use a new key for a new request.');
  }
  if (row.state === 'in_progress' || row.response_status === null || row.response_body === null) {
    throw new IdempotencyKeyInUseError('A request with this Idempotency-Key is still being answered; try again in a moment.');
  }
  return { kind: 'replay', status: row.response_status, body: secrets.open(row.response_body, storedAnswerPlace(accountId, key)) };
}

/**
 * Stores the answer (the JSON body) of a request started with startIdempotentRequest, to be
 * replayed for 24 hours: sealed as `secrets` seals (an answer to a create or a rotation shows a
 * secret), with the id of the subscription it is about, if any (`data.subscription.id`), so that
 * the subscription's revocation forgets it.
 */
export async function finishIdempotentRequest(db: DbOrTx, accountId: string, key: string, status: number, answer: unknown, secrets: SecretBox): Promise<void> {
  const subscriptionId = (answer as { data?: { subscription?: { id?: unknown } } } | null)?.data?.subscription?.id;
  await db('idempotency_keys')
    .where({ account_id: accountId, key, state: 'in_progress' })
    .update({
      state: 'done',
      locked_until: null,
      response_status: status,
      response_body: secrets.seal(JSON.stringify(answer), storedAnswerPlace(accountId, key)),
      subscription_id: typeof subscriptionId === 'string' ? subscriptionId : null,
    });
}

/** Lets go of a key whose request failed without an answer to replay (a 5xx, a dropped connection): a retry runs afresh. */
export async function abandonIdempotentRequest(db: DbOrTx, accountId: string, key: string): Promise<void> {
  await db('idempotency_keys').where({ account_id: accountId, key, state: 'in_progress' }).del();
}
