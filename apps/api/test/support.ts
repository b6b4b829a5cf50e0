import type { Express } from 'express';
import { createDb, createLogger, createQueues, createRedis, type Config, type Db, type Queues, type Redis } from '@svc/core';
import { testConfig } from '@svc/core/testing';
import { createApp } from '../src/app.js';

export interface TestApi {
  app: Express;
  config: Config;
  db: Db;
  redis: Redis;
  queues: Queues;
  close(): Promise<void>;
}

/** An API process over the real test database and Redis, as main.ts wires it, without a port. */
export function createTestApi(overrides: Record<string, string> = {}, shared?: { db?: Db }): TestApi {
  const config = testConfig(overrides);
  const db = shared?.db ?? createDb(config.databaseUrl, { poolMax: 5 });
  const redis = createRedis(config.redisUrl, 'fast-fail');
  redis.on('error', () => undefined);
  const queueRedis = createRedis(config.redisUrl, 'bullmq');
  const queues = createQueues(queueRedis, config.queuePrefix);
  const logger = createLogger('error', { silent: true });
  const app = createApp({ config, db, redis, queues, logger });
  return {
    app,
    config,
    db,
    redis,
    queues,
    async close() {
      await queues.close();
      queueRedis.disconnect();
      redis.disconnect();
      if (!shared?.db) await db.destroy();
    },
  };
}

export const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });
