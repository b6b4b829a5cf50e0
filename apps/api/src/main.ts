import {
  createDb,
  dbBoundsOf,
  createOperatorDb,
  createLogger,
  createQueues,
  createRedis,
  DEFAULT_API_METRICS_PORT,
  endIfNeverReady,
  hasBeenReady,
  loadConfigOrExit,
  RevocationListener,
  startMetricsServer,
  waitForRedisReady,
  withApplicationName,
} from '@svc/core';
import { ApiMetrics, createApp, KeyCache, KnownKeys, UnknownKeyCache } from './app.js';
import { keyNotificationEvents } from './auth/key-notifications.js';
import { createApiServer } from './http/server.js';

const config = loadConfigOrExit();

const logger = createLogger(config.logLevel, { service: 'api' });
const db = createDb(withApplicationName(config.databaseUrl, 'svc api'), { poolMax: config.dbPoolMax, bounds: dbBoundsOf(config) });
// /readyz pings through a pool of its own: a burst of probes never takes a request's connection.
const probeDb = createOperatorDb(config.databaseUrl, 'svc api operator port');
const redis = createRedis(config, 'fast-fail');
redis.on('error', () => undefined); // reported by /readyz and the limiter's fallback log, not once per retry
const queueRedis = createRedis(config, 'fast-fail');
queueRedis.on('error', () => undefined);
const queues = createQueues(queueRedis, config.queuePrefix, config.queueShards);

// Give Redis a moment so the first requests share the limit instead of starting on the fallback.
if (!(await waitForRedisReady(redis, 5_000))) {
  logger.warn('Redis is not answering; starting with the per-process rate limit');
}

// Cached keys are trusted only while revocation notifications from Postgres are sure to arrive.
// Hashes cached as unknown are forgotten when a key is created, and whenever creations may have been missed.
const keyCache = new KeyCache();
keyCache.setTrusted(false);
const unknownKeyCache = new UnknownKeyCache();
// Every active key's hash prefix, kept by the same notifications: a random well-formed key is refused with no query.
const knownKeys = new KnownKeys(db, logger);
const revocations = new RevocationListener(
  config.databaseListenUrl,
  keyNotificationEvents({ keyCache, unknownKeyCache, knownKeys }),
  logger,
);
await revocations.start();

const metrics = new ApiMetrics();
// Its own port, never the public one, on loopback unless METRICS_HOST opens it; a taken port is
// a warning, not a reason to stop serving.
const metricsServer = await startMetricsServer({
  port: config.metricsPort ?? DEFAULT_API_METRICS_PORT,
  host: config.metricsHost,
  registry: metrics.registry,
  logger,
});

const server = createApiServer(createApp({ config, db, redis, queues, logger, keyCache, unknownKeyCache, knownKeys, metrics, probeDb }), config);
server.listen(config.port, () => {
  const address = server.address();
  logger.info('api listening', { port: typeof address === 'object' && address ? address.port : config.port });
});

let stopping = false;
async function stop(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info('api stopping', { signal });
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
  await revocations.stop();
  knownKeys.stop();
  await metricsServer.close();
  await endIfNeverReady(queueRedis);
  // A queue still starting up (BullMQ asks the server's version; on a Redis Cluster the question may
  // wait for a node connection) drops its listeners when closed, and the failure of that question
  // as the connection ends is then an unheard 'error' that exits 1. Once the connection was ready,
  // each start-up settles within seconds (fast-fail): let them, for at most QUEUE_SETTLE_MS. (One
  // never ready has no question in flight, and a cluster client that never was may never end.)
  if (hasBeenReady(queueRedis)) await settled([queues.fanout, ...queues.deliveries].map((queue) => queue.waitUntilReady()), QUEUE_SETTLE_MS);
  await queues.close().catch(() => undefined);
  redis.disconnect();
  queueRedis.disconnect();
  await db.destroy();
  await probeDb.destroy();
  logger.info('api stopped');
  // Exit once the last log line is flushed; the timer only guards against a transport that never finishes.
  setTimeout(() => process.exit(0), 2_000).unref();
  logger.on('finish', () => process.exit(0));
  logger.end();
}

const QUEUE_SETTLE_MS = 5_000;

/** Resolves once every promise has settled, or after `ms`, whichever comes first. */
async function settled(promises: Array<Promise<unknown>>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.allSettled(promises), new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));
