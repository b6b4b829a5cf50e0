import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../db/knex.js';
import { InputError } from '../errors.js';
import { SecretBox, SecretUnavailableError, storedAnswerPlace, subscriptionSecretPlace } from './secret-box.js';

export const REENCRYPT_DEFAULT_BATCH_SIZE = 500;
export const REENCRYPT_MAX_BATCH_SIZE = 10_000;
/** Rows another transaction held during their batch are tried again this many times, a moment apart. */
const BUSY_ROUNDS = 5;
const BUSY_PAUSE_MS = 200;
const BUSY_ERROR = 'held by another transaction each time it was tried (a revocation in progress?); run the command again';

export interface ReencryptCounts {
  /** Rows written again, sealed with the newest key. */
  reencrypted: number;
  /** Rows already sealed with the newest key. */
  alreadyCurrent: number;
  /** Rows left as they were: a value that no configured key opens, or a row held throughout. */
  failed: number;
}

export interface Reencryption extends ReencryptCounts {
  /** The newest key of SECRETS_ENCRYPTION_KEY, which everything is now sealed with. */
  keyId: string;
  failures: Array<{ subscriptionId: string; error: string }>;
  /** Stored answers to Idempotency-Keys (a create's or a rotation's shows a secret). */
  storedAnswers: ReencryptCounts & { failures: Array<{ accountId: string; idempotencyKey: string; error: string }> };
}

/**
 * Seals every stored webhook secret (a subscription's secret and the one a rotation replaced) and
 * every stored Idempotency-Key answer with the newest key of SECRETS_ENCRYPTION_KEY, whether it is
 * plain text or sealed with an older key, online: it reads `batchSize` rows at a time in key
 * order, seals the stale ones anew outside any transaction, and writes them back in one statement
 * that changes a row only if it still holds what was read (a rotation meanwhile wins) and skips
 * rows another transaction holds (FOR NO KEY UPDATE SKIP LOCKED, which a claim's FOR KEY SHARE
 * never waits for); rows not written are read and tried again at the end. A replaced secret whose
 * overlap has ended signs nothing any more and is dropped rather than carried over. A row whose
 * value no configured key opens is left as it is and listed; the run goes on. Idempotent and
 * resumable: a second run writes nothing.
 */
export async function reencryptSecrets(db: Db, secrets: SecretBox, options: { batchSize?: number } = {}): Promise<Reencryption> {
  const key = secrets.currentKey;
  if (key === undefined) {
    throw new InputError('SECRETS_ENCRYPTION_KEY is not set: there is no key to seal with (set it here and on every API and dispatcher first)');
  }
  const batchSize = options.batchSize ?? REENCRYPT_DEFAULT_BATCH_SIZE;
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > REENCRYPT_MAX_BATCH_SIZE) {
    throw new InputError(`the batch size must be a whole number from 1 to ${REENCRYPT_MAX_BATCH_SIZE}`, 'batchSize');
  }
  const subscriptions = await reencryptAll(db, subscriptionSecrets(secrets), batchSize);
  const answers = await reencryptAll(db, storedAnswers(secrets), batchSize);
  return {
    keyId: key.id,
    ...subscriptions.counts,
    failures: subscriptions.failures.map(({ row, error }) => ({ subscriptionId: row.id, error })),
    storedAnswers: {
      ...answers.counts,
      failures: answers.failures.map(({ row, error }) => ({ accountId: row.account_id, idempotencyKey: row.key, error })),
    },
  };
}

/** The rows of one table that hold sealed or sealable values, as reencryptAll walks them. */
interface SealedRows<Row, Update> {
  /** A stable name of the row, for sets and maps. */
  name(row: Row): string;
  /** The next `limit` rows after `after`, in key order, as stored. */
  page(db: Db, after: Row | undefined, limit: number): Promise<Row[]>;
  /** These rows as stored now (those gone are left out). */
  reread(db: Db, rows: Row[]): Promise<Row[]>;
  /** True when the row holds what sealing it now would write (sealed with the newest key). */
  isCurrent(row: Row): boolean;
  /** The values to write; SecretUnavailableError when a value cannot be opened. */
  reseal(row: Row): Update;
  /** Writes each update whose row still holds what was read and no one else holds; answers the names of those written. */
  write(db: Db, updates: Array<{ row: Row; update: Update }>): Promise<Set<string>>;
}

async function reencryptAll<Row, Update>(db: Db, rows: SealedRows<Row, Update>, batchSize: number) {
  const counts: ReencryptCounts = { reencrypted: 0, alreadyCurrent: 0, failed: 0 };
  const failures: Array<{ row: Row; error: string }> = [];
  /** Writes the stale ones of `read`; answers those to try again (changed or held meanwhile). */
  const rewrite = async (read: Row[]): Promise<Row[]> => {
    const updates: Array<{ row: Row; update: Update }> = [];
    for (const row of read) {
      if (rows.isCurrent(row)) {
        counts.alreadyCurrent += 1;
        continue;
      }
      try {
        updates.push({ row, update: rows.reseal(row) });
      } catch (error) {
        if (!(error instanceof SecretUnavailableError)) throw error;
        counts.failed += 1;
        failures.push({ row, error: error.message });
      }
    }
    if (updates.length === 0) return [];
    const written = await rows.write(db, updates);
    counts.reencrypted += written.size;
    return updates.filter(({ row }) => !written.has(rows.name(row))).map(({ row }) => row);
  };
  let again: Row[] = [];
  let after: Row | undefined;
  for (;;) {
    const page = await rows.page(db, after, batchSize);
    if (page.length === 0) break;
    after = page[page.length - 1];
    again.push(...(await rewrite(page)));
  }
  for (let round = 0; again.length > 0 && round < BUSY_ROUNDS; round++) {
    await sleep(BUSY_PAUSE_MS * (round + 1));
    again = await rewrite(await rows.reread(db, again));
  }
  for (const row of again) {
    counts.failed += 1;
    failures.push({ row, error: BUSY_ERROR });
  }
  return { counts, failures };
}

/** A sealed value's key id in SQL, as SecretBox.keyIdOf reads it: null for plain text, 'malformed' for an envelope it cannot read. */
const keyIdSql = (column: string) =>
  `CASE WHEN ${column} IS NULL OR ${column} NOT LIKE 'enc:%' THEN NULL ELSE COALESCE(substring(${column} from '^enc:v1:(k_[0-9a-f]{8}):[A-Za-z0-9_-]+$'), 'malformed') END`;

interface SubscriptionSecrets {
  id: string;
  secret: string;
  previous_secret: string | null;
  /** The replaced secret's overlap has ended: it signs nothing any more. */
  previous_expired: boolean;
}

function subscriptionSecrets(secrets: SecretBox): SealedRows<SubscriptionSecrets, { secret: string; previous: string | null }> {
  const select = (db: Db) =>
    db('webhook_subscriptions').select<SubscriptionSecrets[]>('id', 'secret', 'previous_secret', db.raw('COALESCE(previous_secret_expires_at <= clock_timestamp(), false) AS previous_expired'));
  const reseal = (row: SubscriptionSecrets, column: 'secret' | 'previous_secret', stored: string) => {
    const place = subscriptionSecretPlace(row.id, column);
    return secrets.isCurrent(stored) ? stored : secrets.seal(secrets.open(stored, place), place);
  };
  return {
    name: (row) => row.id,
    page: (db, after, limit) =>
      select(db)
        .modify((q) => (after === undefined ? q : q.where('id', '>', after.id)))
        .orderBy('id')
        .limit(limit),
    reread: (db, rows) => select(db).whereIn('id', rows.map((row) => row.id)).orderBy('id'),
    isCurrent: (row) => secrets.isCurrent(row.secret) && (row.previous_secret === null || (!row.previous_expired && secrets.isCurrent(row.previous_secret))),
    reseal: (row) => ({
      secret: reseal(row, 'secret', row.secret),
      previous: row.previous_secret === null || row.previous_expired ? null : reseal(row, 'previous_secret', row.previous_secret),
    }),
    async write(db, updates) {
      const result = await db.raw(
        `WITH w AS (
           SELECT * FROM unnest(:ids::text[], :readSecrets::text[], :readPrevious::text[], :secrets::text[], :previous::text[])
                    AS w(id, read_secret, read_previous, secret, previous)
         ), free AS (
           SELECT s.id FROM webhook_subscriptions s WHERE s.id = ANY(:ids::text[]) ORDER BY s.id FOR NO KEY UPDATE SKIP LOCKED
         )
         UPDATE webhook_subscriptions s
            SET secret = w.secret, previous_secret = w.previous,
                previous_secret_expires_at = CASE WHEN w.previous IS NULL THEN NULL ELSE s.previous_secret_expires_at END
           FROM w
          WHERE s.id = w.id AND s.id IN (SELECT id FROM free)
            AND s.secret = w.read_secret AND s.previous_secret IS NOT DISTINCT FROM w.read_previous
         RETURNING s.id`,
        {
          ids: updates.map(({ row }) => row.id),
          readSecrets: updates.map(({ row }) => row.secret),
          // pg sends a null element as NULL; knex's types allow only arrays of one type.
          readPrevious: updates.map(({ row }) => row.previous_secret) as string[],
          secrets: updates.map(({ update }) => update.secret),
          previous: updates.map(({ update }) => update.previous) as string[],
        },
      );
      return new Set((result.rows as Array<{ id: string }>).map((row) => row.id));
    },
  };
}

interface StoredAnswer {
  account_id: string;
  key: string;
  response_body: string;
}

function storedAnswers(secrets: SecretBox): SealedRows<StoredAnswer, string> {
  const name = (accountId: string, key: string) => JSON.stringify([accountId, key]);
  const select = (db: Db) => db('idempotency_keys').whereNotNull('response_body').select('account_id', 'key', 'response_body');
  return {
    name: (row) => name(row.account_id, row.key),
    page: async (db, after, limit) =>
      (await select(db)
        .modify((q) => (after === undefined ? q : q.whereRaw('(account_id, key) > (?, ?)', [after.account_id, after.key])))
        .orderBy([{ column: 'account_id' }, { column: 'key' }])
        .limit(limit)) as StoredAnswer[],
    reread: async (db, rows) => (await select(db).whereIn(['account_id', 'key'], rows.map((row) => [row.account_id, row.key]))) as StoredAnswer[],
    isCurrent: (row) => secrets.isCurrent(row.response_body),
    reseal: (row) => {
      const place = storedAnswerPlace(row.account_id, row.key);
      return secrets.seal(secrets.open(row.response_body, place), place);
    },
    async write(db, updates) {
      const result = await db.raw(
        `WITH w AS (
           SELECT * FROM unnest(:accounts::text[], :keys::text[], :readBodies::text[], :bodies::text[]) AS w(account_id, key, read_body, body)
         ), free AS (
           SELECT k.account_id, k.key FROM idempotency_keys k JOIN w USING (account_id, key)
            ORDER BY k.account_id, k.key FOR NO KEY UPDATE OF k SKIP LOCKED
         )
         UPDATE idempotency_keys k SET response_body = w.body
           FROM w
          WHERE k.account_id = w.account_id AND k.key = w.key AND (k.account_id, k.key) IN (SELECT account_id, key FROM free)
            AND k.response_body = w.read_body
         RETURNING k.account_id, k.key`,
        {
          accounts: updates.map(({ row }) => row.account_id),
          keys: updates.map(({ row }) => row.key),
          readBodies: updates.map(({ row }) => row.response_body),
          bodies: updates.map(({ update }) => update),
        },
      );
      return new Set((result.rows as Array<{ account_id: string; key: string }>).map((row) => name(row.account_id, row.key)));
    },
  };
}

/** What is stored under one key id. */
export interface KeyUsage {
  keyId: string;
  /** The newest key of SECRETS_ENCRYPTION_KEY: what every write seals with. */
  current: boolean;
  /** Listed in SECRETS_ENCRYPTION_KEY: what is sealed with it can be opened. */
  configured: boolean;
  /** Stored webhook secrets: subscriptions' secrets and the secrets rotations replaced. */
  secrets: number;
  /** Stored answers to Idempotency-Keys. */
  storedAnswers: number;
}

export interface SecretsAtRest {
  currentKeyId: string | null;
  /** Each configured key (newest first), then each key id found in the data but not configured. */
  keys: KeyUsage[];
  plaintext: { secrets: number; storedAnswers: number };
}

/**
 * How the stored secrets are sealed: how many under each key id (configured or not) and in plain
 * text. A key no longer needed by anything can be removed from SECRETS_ENCRYPTION_KEY.
 */
export async function secretsAtRest(db: Db, secrets: SecretBox): Promise<SecretsAtRest> {
  const counted = (await db.raw(
    `SELECT 'secrets' AS kind, ${keyIdSql('v')} AS key_id, count(*)::int AS n
       FROM (SELECT secret AS v FROM webhook_subscriptions
             UNION ALL SELECT previous_secret FROM webhook_subscriptions WHERE previous_secret IS NOT NULL) s
      GROUP BY 2
     UNION ALL
     SELECT 'storedAnswers', ${keyIdSql('response_body')}, count(*)::int
       FROM idempotency_keys WHERE response_body IS NOT NULL
      GROUP BY 2`,
  )).rows as Array<{ kind: 'secrets' | 'storedAnswers'; key_id: string | null; n: number }>;
  const usage = new Map<string, KeyUsage>();
  const current = secrets.currentKey?.id ?? null;
  for (const keyId of secrets.keyIds()) usage.set(keyId, { keyId, current: keyId === current, configured: true, secrets: 0, storedAnswers: 0 });
  const plaintext = { secrets: 0, storedAnswers: 0 };
  for (const row of counted) {
    if (row.key_id === null) {
      plaintext[row.kind] += row.n;
      continue;
    }
    const entry = usage.get(row.key_id) ?? { keyId: row.key_id, current: false, configured: false, secrets: 0, storedAnswers: 0 };
    entry[row.kind] += row.n;
    usage.set(row.key_id, entry);
  }
  return { currentKeyId: current, keys: [...usage.values()], plaintext };
}
