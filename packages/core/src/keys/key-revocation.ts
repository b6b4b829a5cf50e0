import type { Db } from '../db/knex.js';
import { waitForRedisReady, type RedisClient } from '../redis.js';
import { revokeApiKey } from './key.repository.js';

/** API processes trust a key they looked up for at most this long without asking Postgres again. */
export const KEY_CACHE_TTL_MS = 30_000;
/** Revocation markers outlive every cache entry by far. */
const REVOCATION_MARKER_TTL_SECONDS = 24 * 60 * 60;
const REDIS_READY_TIMEOUT_MS = 2_000;

/**
 * The Redis key whose existence says "this API key is revoked"; read by the API's limiter script
 * with the key's rate-limit window (rateLimitWindowKey), so both carry the key id as their hash
 * tag: on a Redis Cluster they share a slot, and the one script reads both.
 */
export function revokedKeyMarker(prefix: string, keyId: string): string {
  return `${prefix}:revoked-key:{${keyId}}`;
}

/** The sorted set of a key's requests in its sliding window; in the slot of its revocation marker. */
export function rateLimitWindowKey(prefix: string, keyId: string): string {
  return `${prefix}:rl:{${keyId}}`;
}

/**
 * Revokes a key in Postgres and announces it in Redis, where every API process checks it on
 * every request (inside the rate-limit script, no extra round trip): when this returns, the key
 * is refused everywhere. If Redis refuses the announcement the key is still revoked in Postgres,
 * and API processes that had it cached stop accepting it within KEY_CACHE_TTL_MS; the error says so.
 */
export async function revokeApiKeyEverywhere(
  deps: { db: Db; redis: RedisClient; prefix: string },
  keyId: string,
  accountId?: string,
): Promise<{ id: string; revokedAt: Date }> {
  const revoked = await revokeApiKey(deps.db, keyId, accountId);
  try {
    // A connection made for this call may still be connecting; fast-fail connections refuse until ready.
    await waitForRedisReady(deps.redis, REDIS_READY_TIMEOUT_MS);
    await deps.redis.set(revokedKeyMarker(deps.prefix, keyId), '1', 'EX', REVOCATION_MARKER_TTL_SECONDS);
  } catch (error) {
    throw new Error(
      `key ${keyId} is revoked in Postgres, but Redis did not take the announcement (${(error as Error).message}); ` +
        `API processes that cached it may accept it for up to ${KEY_CACHE_TTL_MS / 1000} s`,
    );
  }
  return revoked;
}
