import type { Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterEach } from '@jest/globals';
import type { Express } from 'express';
import {
  createDb,
  createLogger,
  createQueues,
  createRedis,
  newId,
  RevocationListener,
  type Config,
  type Db,
  type Queues,
  type Redis,
  type RedisClient,
} from '@svc/core';
import { testConfig, waitFor } from '@svc/core/testing';
import { ApiMetrics, createApp, KeyCache, KnownKeys, UnknownKeyCache } from '../src/app.js';
import type { KeyLookupGate } from '../src/auth/key-lookup-gate.js';
import { createApiServer } from '../src/http/server.js';
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

/** What a test may give the app instead of its own: caches, the key filter, the key lookup lanes. */
export interface TestCaches {
  keyCache?: KeyCache;
  unknownKeyCache?: UnknownKeyCache;
  knownKeys?: KnownKeys;
  keyLookupGates?: { unseen: KeyLookupGate; seen: KeyLookupGate };
}

export interface TestApi {
  app: Express;
  config: Config;
  db: Db;
  redis: RedisClient;
  queues: Queues;
  close(): Promise<void>;
}

/**
 * An API process over the real test database and Redis, as main.ts wires it, without a port.
 * A `db` or `redis` passed in `shared` is used instead of a fresh one and stays the caller's to close.
 */
export function createTestApi(
  overrides: Record<string, string> = {},
  shared?: { db?: Db; redis?: RedisClient; metrics?: ApiMetrics; probeDb?: Db },
  caches?: TestCaches,
): TestApi {
  return assemble(overrides, shared, caches);
}

/**
 * As createTestApi, plus what main.ts adds: the key cache trusted only while a Postgres
 * revocation listener is connected. Resolves once it listens.
 */
export async function createListeningTestApi(
  overrides: Record<string, string> = {},
  shared?: { db?: Db },
  options: { unknownKeyCache?: UnknownKeyCache } = {},
): Promise<TestApi> {
  const keyCache = new KeyCache();
  keyCache.setTrusted(false);
  const unknownKeyCache = options.unknownKeyCache ?? new UnknownKeyCache();
  const config = testConfig({ DB_POOL_MAX: '5', ...overrides });
  const listener = new RevocationListener(
    config.databaseUrl,
    {
      onRevoked: (keyId) => keyCache.deleteKey(keyId),
      onCreated: () => unknownKeyCache.clear(),
      onConnectionChange: (listening) => {
        keyCache.setTrusted(listening);
        unknownKeyCache.clear();
      },
    },
    createLogger('error', { silent: true }),
  );
  await listener.start();
  const api = assemble(overrides, shared, { keyCache, unknownKeyCache }, config);
  return {
    ...api,
    async close() {
      await listener.stop();
      await api.close();
    },
  };
}

function assemble(
  overrides: Record<string, string>,
  shared?: { db?: Db; redis?: RedisClient; metrics?: ApiMetrics; probeDb?: Db },
  caches: TestCaches = {},
  fixed?: Config,
): TestApi {
  const config = fixed ?? testConfig({ DB_POOL_MAX: '5', ...overrides });
  const db = shared?.db ?? createDb(config.databaseUrl, { poolMax: config.dbPoolMax });
  const redis = shared?.redis ?? createRedis(config, 'fast-fail');
  redis.on('error', () => undefined);
  const queueRedis = createRedis(config, 'bullmq');
  const queues = createQueues(queueRedis, config.queuePrefix, 1);
  // Closing a test API whose queue connection is still connecting makes BullMQ emit
  // "Connection is closed"; with no listener that is an unhandled error failing an unrelated test.
  queues.fanout.on('error', () => undefined);
  queues.deliveries[0]!.on('error', () => undefined);
  const logger = createLogger('error', { silent: true });
  const app = contractChecked(createApp({ config, db, redis, queues, logger, ...caches, ...(shared?.metrics ? { metrics: shared.metrics } : {}), ...(shared?.probeDb ? { probeDb: shared.probeDb } : {}) }));
  return {
    app,
    config,
    db,
    redis,
    queues,
    async close() {
      // A queue closed while its connection is still initialising makes BullMQ emit the failed
      // initialisation with no listener left: let both finish connecting first (Redis is up in tests).
      await Promise.allSettled([queues.fanout.waitUntilReady(), queues.deliveries[0]!.waitUntilReady()]);
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
export async function whenRedisReady(redis: RedisClient): Promise<void> {
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

export interface ListeningApi {
  server: Server;
  port: number;
  base: string;
  close(): Promise<void>;
}

/** The app behind the same server main.ts runs (createApiServer), listening on a free loopback port. */
export async function listen(api: TestApi): Promise<ListeningApi> {
  const server = createApiServer(api.app, api.config);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    port,
    base: `http://127.0.0.1:${port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface RawExchange {
  /** Everything the server sent, as latin1 text. */
  received: string;
  /** ms from connecting until the server closed the connection. */
  closedAfterMs: number;
}

/**
 * Opens a raw TCP connection, lets `drive` write to it as it likes (slowly, partially, not at
 * all), and resolves when the server closes it, or rejects after `giveUpMs`.
 */
export function rawExchange(port: number, drive: (socket: Socket) => void, giveUpMs = 10_000): Promise<RawExchange> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const chunks: Buffer[] = [];
    const socket = connect(port, '127.0.0.1', () => drive(socket));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept the connection open for ${giveUpMs} ms`));
    }, giveUpMs);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ received: Buffer.concat(chunks).toString('latin1'), closedAfterMs: Date.now() - started });
    });
  });
}

/** The status code of the first response in raw bytes, or undefined if none came. */
export function statusOf(raw: string): number | undefined {
  const match = /^HTTP\/1\.1 (\d{3}) /.exec(raw);
  return match ? Number(match[1]) : undefined;
}

/**
 * A delivery of a new event to the subscription whose attempt is on the wire: the lease a
 * dispatcher records when it claims an attempt, ending `leaseMs` from now on Postgres's clock.
 */
export async function seedLeasedDelivery(db: Db, accountId: string, subscriptionId: string, leaseMs: number): Promise<string> {
  const eventId = newId('evt');
  await db('events').insert({ id: eventId, account_id: accountId, type: 'scan.completed', body: '{}' });
  const deliveryId = newId('dlv');
  await db('deliveries').insert({
    id: deliveryId,
    event_id: eventId,
    subscription_id: subscriptionId,
    status: 'pending',
    attempt_count: 0,
    next_attempt_at: db.raw('clock_timestamp()'),
    locked_until: db.raw('clock_timestamp() + make_interval(secs => ?)', [leaseMs / 1000]),
  });
  return deliveryId;
}
