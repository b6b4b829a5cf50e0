import type { DbOrTx } from '../db/knex.js';

/**
 * Hex characters of a key's SHA-256 that the API keeps in memory per active key (64 bits): enough
 * that a random well-formed key matches no active key's prefix (odds ~ keys / 2^64), too few to
 * be the stored hash.
 */
export const KEY_HASH_PREFIX_LENGTH = 16;

export interface KeyHashPrefix {
  id: string;
  prefix: string;
}

/** Every active key's id and hash prefix, at most `limit` of them (one read when an API process starts listening). */
export async function listActiveKeyHashPrefixes(db: DbOrTx, limit: number): Promise<KeyHashPrefix[]> {
  const result = (await db.raw('SELECT id, left(key_hash, ?) AS prefix FROM api_keys WHERE revoked_at IS NULL LIMIT ?', [
    KEY_HASH_PREFIX_LENGTH,
    limit,
  ])) as { rows: KeyHashPrefix[] };
  return result.rows;
}

/** The hash prefix of one active key (just announced as created), or undefined if it is gone or revoked. */
export async function findActiveKeyHashPrefix(db: DbOrTx, keyId: string): Promise<string | undefined> {
  const result = (await db.raw('SELECT left(key_hash, ?) AS prefix FROM api_keys WHERE id = ? AND revoked_at IS NULL', [
    KEY_HASH_PREFIX_LENGTH,
    keyId,
  ])) as { rows: Array<{ prefix: string }> };
  return result.rows[0]?.prefix;
}
