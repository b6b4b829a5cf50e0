import { afterEach } from '@jest/globals';
import type { Express } from 'express';
import {
  createDb,
  createLogger,
  createQueues,
  createRedis,
  RevocationListener,
  type Config,
  type Db,
  type Queues,
  type Redis,
} from '@svc/core';
import { testConfig, waitFor } from '@svc/core/testing';
import { createApp, KeyCache } from '../src/app.js';
import { contractChecked, drainContractViolations } from './openapi-contract.js';

/**
 * Contract tests: every response a test receives from a test API is checked against the OpenAPI
 * document as it is sent (see contractChecked); a drifting one fails the test that got it here.
 */
afterEach(() => {
  const violations = drainContractViolations();
  if (violations.length > 0) {
    throw new Error(`${violations.length} response(s) drift from the OpenAPI document:\n${violations.join('\n')}`);
  }
});

export interface TestApi {
  app: Express;
  config: Config;
  db: Db;
  redis: Redis;
  queues: Queues;
  close(): Promise<void>;
}

/**
 * An API process over the real test database and Redis, as main.ts wires it, without a port.
 * A `db` or `redis` passed in `shared` is used instead of a fresh one and stays the caller's to close.
 */
export function createTestApi(overrides: Record<string, string> = {}, shared?: { db?: Db; redis?: Redis }): TestApi {
  return assemble(overrides, shared);
}

/**
 * As createTestApi, plus what main.ts adds: the key cache trusted only while a Postgres
 * revocation listener is connected. Resolves once it listens.
 */
export async function createListeningTestApi(overrides: Record<string, string> = {}, shared?: { db?: Db }): Promise<TestApi> {
  const keyCache = new KeyCache();
  keyCache.setTrusted(false);
  const config = testConfig(overrides);
  const listener = new RevocationListener(
    config.databaseUrl,
    { onRevoked: (keyId) => keyCache.deleteKey(keyId), onConnectionChange: (listening) => keyCache.setTrusted(listening) },
    createLogger('error', { silent: true }),
  );
  await listener.start();
  const api = assemble(overrides, shared, keyCache, config);
  return {
    ...api,
    async close() {
      await listener.stop();
      await api.close();
    },
  };
}

function assemble(overrides: Record<string, string>, shared?: { db?: Db; redis?: Redis }, keyCache?: KeyCache, fixed?: Config): TestApi {
  const config = fixed ?? testConfig(overrides);
  const db = shared?.db ?? createDb(config.databaseUrl, { poolMax: 5 });
  const redis = shared?.redis ?? createRedis(config.redisUrl, 'fast-fail');
  redis.on('error', () => undefined);
  const queueRedis = createRedis(config.redisUrl, 'bullmq');
  const queues = createQueues(queueRedis, config.queuePrefix);
  const logger = createLogger('error', { silent: true });
  const app = contractChecked(createApp({ config, db, redis, queues, logger, ...(keyCache ? { keyCache } : {}) }));
  return {
    app,
    config,
    db,
    redis,
    queues,
    async close() {
      await queues.close();
      queueRedis.disconnect();
      if (!shared?.redis) redis.disconnect();
      if (!shared?.db) await db.destroy();
    },
  };
}

/** A limiter connection to a port where no Redis listens: every command fails at once, as in an outage. */
export function createUnreachableRedis(): Redis {
  const redis = createRedis('redis://127.0.0.1:1', 'fast-fail');
  redis.on('error', () => undefined);
  return redis;
}

/**
 * Waits until no query is running or waiting on the pool: the API's fire-and-forget writes
 * (the key's last-used time) have then either happened or were never made.
 */
export async function waitForIdlePool(db: Db): Promise<void> {
  const pool = (db.client as { pool: { numUsed(): number; numPendingAcquires(): number; numPendingCreates(): number } }).pool;
  await waitFor(() => pool.numUsed() === 0 && pool.numPendingAcquires() === 0 && pool.numPendingCreates() === 0, 5_000, 'an idle pool');
}

/**
 * Resolves once the connection is up. A fast-fail limiter connection that is still connecting
 * refuses commands, and the limiter then counts in-process: tests of the shared count wait for this.
 */
export async function whenRedisReady(redis: Redis): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`Redis not ready after 5 s (status ${redis.status})`)), 5_000);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

export const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });
