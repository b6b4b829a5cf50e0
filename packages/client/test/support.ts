import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach } from '@jest/globals';
import { createApp } from '@svc/api';
import { contractChecked, drainContractViolations } from '@svc/api/test-support';
import { createDb, createLogger, createQueues, createRedis, type Config, type Db, type Queues, type Redis } from '@svc/core';
import { testConfig } from '@svc/core/testing';
import { SiteVisibilityError } from '../src/index.js';

// Every response the client's tests receive is held against the OpenAPI document too (issue 9 §3).
afterEach(() => {
  const violations = drainContractViolations();
  if (violations.length > 0) throw new Error(`${violations.length} response(s) drift from the OpenAPI document:\n${violations.join('\n')}`);
});

/** The real API (real Postgres and Redis) listening on a loopback port, as customers reach it, its answers contract-checked. */
export interface ListeningApi {
  baseUrl: string;
  config: Config;
  db: Db;
  queues: Queues;
  server: Server;
  close(): Promise<void>;
}

export async function startApi(overrides: Record<string, string> = {}): Promise<ListeningApi> {
  const config = testConfig(overrides);
  const db = createDb(config.databaseUrl, { poolMax: 5 });
  const redis: Redis = createRedis(config.redisUrl, 'fast-fail');
  redis.on('error', () => undefined);
  const queueRedis = createRedis(config.redisUrl, 'bullmq');
  const queues = createQueues(queueRedis, config.queuePrefix, 1);
  const app = contractChecked(createApp({ config, db, redis, queues, logger: createLogger('error', { silent: true }) }));
  const server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    config,
    db,
    queues,
    server,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.allSettled([queues.fanout.waitUntilReady(), queues.deliveries[0]!.waitUntilReady()]);
      await queues.close();
      queueRedis.disconnect();
      redis.disconnect();
      await db.destroy();
    },
  };
}

/** The SiteVisibilityError a call rejected with (fails the test when it resolved or threw anything else). */
export async function errorOf(promise: Promise<unknown>): Promise<SiteVisibilityError> {
  const outcome = await promise.then(
    () => undefined,
    (error: unknown) => error,
  );
  if (!(outcome instanceof SiteVisibilityError)) throw new Error(`expected a SiteVisibilityError, got ${String(outcome)}`);
  return outcome;
}
