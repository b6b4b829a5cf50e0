import { Cluster, createDb, createLogger, createQueues, createRedis, SecretBox, type Config, type Db, type Logger, type Queues, type RedisClient } from '@svc/core';
import { createSite, createSubscription, startScan } from '@svc/core/operator';
import { createIsolatedDatabase, seedAccount, testConfig, uniqueTag } from '@svc/core/testing';
import { createDispatcher, type Dispatcher } from '../../src/dispatcher.js';
import type { DispatcherMetrics } from '../../src/metrics/dispatcher-metrics.js';
import { makeCertificate, Receiver, type TestCertificate } from './receiver.js';

/** Short retry delays and timeout so a whole 7-attempt schedule takes well under a second or two. */
export const FAST_DELAYS = '40,40,40,40,40,40';

export interface Harness {
  config: Config;
  db: Db;
  redis: RedisClient;
  queues: Queues;
  receiver: Receiver;
  certificate: TestCertificate;
  dispatchers: Dispatcher[];
  /** What the harness's SECRETS_ENCRYPTION_KEY seals with (plain text without it): its tenants' subscriptions are stored so. */
  secrets: SecretBox;
  /**
   * `db`: a pool of the dispatcher's own, as a separate process would have (default: the harness's);
   * `operator`: the metrics and operator pool main.ts gives it (createOperatorSide).
   */
  startDispatcher(
    overrides?: Record<string, string>,
    options?: { trustReceiver?: boolean; logger?: Logger; db?: Db; claimStallMs?: number; operator?: { metrics: DispatcherMetrics; operatorDb: Db } },
  ): Dispatcher;
  /** Every Redis key under this harness's queue prefix. */
  queueKeys(): Promise<string[]>;
  close(): Promise<void>;
}

/**
 * Real Postgres (a database of its own: the sweep acts on every due row it can see, so files
 * running side by side must not see each other's), Redis (a queue prefix of its own), an HTTPS
 * receiver and dispatchers started on demand.
 */
export async function createHarness(overrides: Record<string, string> = {}): Promise<Harness> {
  const database = await createIsolatedDatabase();
  const config = testConfig({
    DATABASE_URL: database.url,
    WEBHOOK_RETRY_DELAYS_MS: FAST_DELAYS,
    WEBHOOK_TIMEOUT_MS: '2000',
    DISPATCHER_SWEEP_INTERVAL_MS: '250',
    ...overrides,
  });
  const db = createDb(config.databaseUrl, { poolMax: 20 });
  const redis = createRedis(config, 'bullmq');
  const queues = createQueues(redis, config.queuePrefix, config.queueShards);
  const certificate = makeCertificate();
  const receiver = await new Receiver(certificate).start();
  const logger = createLogger('error', { silent: true });
  const dispatchers: Dispatcher[] = [];
  return {
    config,
    db,
    redis,
    queues,
    receiver,
    certificate,
    dispatchers,
    secrets: new SecretBox(config.secretsEncryptionKeys),
    startDispatcher(more = {}, options = {}) {
      const dispatcherConfig = testConfig({ ...overridesOf(config), ...more, QUEUE_PREFIX: config.queuePrefix });
      const dispatcher = createDispatcher({
        config: dispatcherConfig,
        db: options.db ?? db,
        logger: options.logger ?? logger,
        ...(options.claimStallMs === undefined ? {} : { claimStallMs: options.claimStallMs }),
        ...(options.operator ? { metrics: options.operator.metrics, operatorDb: options.operator.operatorDb } : {}),
        ...(options.trustReceiver === false ? {} : { ca: certificate.cert }),
      });
      dispatcher.start();
      dispatchers.push(dispatcher);
      return dispatcher;
    },
    queueKeys: () => scanKeys(redis, `${config.queuePrefix}:*`),
    async close() {
      await Promise.all(dispatchers.map((dispatcher) => dispatcher.stop()));
      await receiver.close();
      await queues.close();
      redis.disconnect();
      await db.destroy();
      await database.drop();
      certificate.cleanup();
    },
  };
}

/** The harness's own settings as environment, so a dispatcher it starts reaches the same Postgres and Redis. */
function overridesOf(config: Config): Record<string, string> {
  return {
    ...redisOverrides(config),
    DISPATCHER_QUEUE_SHARDS: String(config.queueShards),
    WEBHOOK_RETRY_DELAYS_MS: config.webhookRetryDelaysMs.join(','),
    WEBHOOK_TIMEOUT_MS: String(config.webhookTimeoutMs),
    DISPATCHER_SWEEP_INTERVAL_MS: String(config.sweepIntervalMs),
    WEBHOOK_ALLOW_PRIVATE_TARGETS: String(config.webhookAllowPrivateTargets),
    DATABASE_URL: config.databaseUrl,
    DISPATCHER_CONCURRENCY: String(config.dispatcherConcurrency),
    WEBHOOK_MAX_SOCKETS: String(config.webhookMaxSockets),
    WEBHOOK_IDLE_SOCKET_TIMEOUT_MS: String(config.webhookIdleSocketTimeoutMs),
    WEBHOOK_DNS_TIMEOUT_MS: String(config.webhookDnsTimeoutMs),
    WEBHOOK_DNS_TRIES: String(config.webhookDnsTries),
    WEBHOOK_DNS_SERVERS: config.webhookDnsServers.join(','),
    ...secretsKeyOverrides(config),
  };
}

/** SECRETS_ENCRYPTION_KEY as the configuration holds it, newest first; nothing when it is unset. */
export function secretsKeyOverrides(config: Pick<Config, 'secretsEncryptionKeys'>): Record<string, string> {
  const keys = config.secretsEncryptionKeys;
  return keys.length === 0 ? {} : { SECRETS_ENCRYPTION_KEY: keys.map((key) => key.bytes().toString('base64')).join(',') };
}

/** Every key matching the pattern: on a cluster, every master's. */
export async function scanKeys(redis: RedisClient, pattern: string): Promise<string[]> {
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
  const keys: string[] = [];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
  }
  return keys;
}

/** How the harness reaches Redis, as environment: a cluster's variables, or REDIS_URL with REDIS_SENTINELS and its companions. */
function redisOverrides(config: Config): Record<string, string> {
  const cluster = config.redisCluster;
  if (cluster) {
    return {
      REDIS_CLUSTER_NODES: cluster.nodes.map(({ host, port }) => `${host}:${port}`).join(','),
      REDIS_CLUSTER_TLS: String(cluster.tls),
      ...(cluster.username !== undefined ? { REDIS_USERNAME: cluster.username } : {}),
      ...(cluster.password !== undefined ? { REDIS_PASSWORD: cluster.password } : {}),
    };
  }
  if (!config.redisSentinels) return { REDIS_URL: config.redisUrl };
  const auth = config.redisSentinelAuth;
  return {
    REDIS_URL: config.redisUrl,
    REDIS_SENTINELS: config.redisSentinels.map(({ host, port }) => `${host.includes(':') ? `[${host}]` : host}:${port}`).join(','),
    REDIS_SENTINEL_NAME: config.redisSentinelName,
    ...(auth ? { REDIS_SENTINEL_PASSWORD: auth.password } : {}),
    ...(auth?.username !== undefined ? { REDIS_SENTINEL_USERNAME: auth.username } : {}),
  };
}

/** An account with one site and a running scan factory, plus a subscription helper. */
export async function seedTenant(h: Harness) {
  const { accountId } = await seedAccount(h.db, ['read:sites']);
  const site = await createSite(h.db, accountId, { domain: `www.Tenant-${uniqueTag()}.example/` });
  return {
    accountId,
    site,
    subscribe: (path: string, events: string[] = ['*']) =>
      createSubscription(h.db, accountId, { url: h.receiver.url(path), events }, h.secrets),
    newScan: () => startScan(h.db, site.id),
  };
}
