import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { Config, RedisClusterConfig } from './config.js';

export { Cluster, Redis };

/**
 * A connection to Redis, whichever way the deployment reaches it: one Redis (REDIS_URL, through
 * Sentinel or not) or a Redis Cluster (REDIS_CLUSTER_NODES). Everything the service does with
 * Redis works on both: each command or script touches the keys of one hash slot only.
 */
export type RedisClient = Redis | Cluster;

/** Where Redis is: REDIS_URL, the master REDIS_SENTINEL_NAME as REDIS_SENTINELS report it, or the cluster REDIS_CLUSTER_NODES seeds. */
export type RedisTarget = Pick<Config, 'redisUrl' | 'redisSentinels' | 'redisSentinelName' | 'redisSentinelAuth' | 'redisCluster'>;

type RedisRole = 'bullmq' | 'fast-fail' | 'default';

/**
 * A Redis connection; every process opens each of its connections here, so REDIS_SENTINELS and
 * REDIS_CLUSTER_NODES reach all of them. `role: 'bullmq'` gives what BullMQ workers require (no
 * per-command retry limit); `role: 'fast-fail'` gives a connection that errors at once while Redis
 * is away (or failing over), for paths that must fall back instead of waiting.
 */
export function createRedis(target: string, role?: RedisRole): Redis;
export function createRedis(target: RedisTarget | string, role?: RedisRole): RedisClient;
export function createRedis(target: RedisTarget | string, role: RedisRole = 'default'): RedisClient {
  if (typeof target !== 'string' && target.redisCluster) return markReady(createCluster(target.redisCluster, role));
  const options: RedisOptions = { lazyConnect: false, ...(typeof target === 'string' ? {} : sentinelOptions(target)), ...roleOptions(role) };
  if (role === 'fast-fail') {
    options.enableOfflineQueue = false;
    options.retryStrategy = (times) => Math.min(times * 200, 2_000);
  }
  return markReady(typeof target !== 'string' && target.redisSentinels ? new Redis(options) : new Redis(typeof target === 'string' ? target : target.redisUrl, options));
}

/** The per-command options of a role, the same for one Redis and for each node of a cluster. */
function roleOptions(role: RedisRole): RedisOptions {
  if (role === 'bullmq') return { maxRetriesPerRequest: null };
  if (role === 'fast-fail') return { maxRetriesPerRequest: 0, commandTimeout: 500 };
  return {};
}

/**
 * A Redis Cluster client. Each node is reached with the same credentials and TLS; the slot map is
 * read from the seeds, and again after a command meets a closed connection (a master that died),
 * CLUSTERDOWN or MOVED, and every 5 s: a replica promoted by a failover takes its dead master's
 * slots within a retry delay of the cluster agreeing on it. Commands sent meanwhile wait and retry
 * (a 'fast-fail' connection fails them instead). The interval is ioredis's default: each refresh
 * opens a connection and rewrites 16,384 slots for every client (a dispatcher has one per shard),
 * 5 % of the dispatcher's profile in a drain at 1 s, though five paired runs at 1 s and 5 s showed
 * no difference in its CPU per delivery beyond the machine's noise.
 */
function createCluster(cluster: RedisClusterConfig, role: RedisRole): Cluster {
  const options: ClusterOptions = {
    redisOptions: {
      ...roleOptions(role),
      ...(cluster.username !== undefined ? { username: cluster.username } : {}),
      ...(cluster.password !== undefined ? { password: cluster.password } : {}),
      // REDIS_CLUSTER_TLS: TLS to every node, checked against the name the node was reached by.
      ...(cluster.tls ? { tls: {} } : {}),
    },
    slotsRefreshInterval: 5_000,
    slotsRefreshTimeout: 1_000,
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 200,
    retryDelayOnTryAgain: 200,
    clusterRetryStrategy: (times) => Math.min(times * 200, 2_000),
    // No `CLUSTER INFO` ready check on (re)connecting: when it finds cluster_state:fail (a master
    // died and its replica is not yet promoted), ioredis reconnects and never settles the promise
    // its connect() returned. BullMQ awaits that promise when it reconnects a worker's blocking
    // connection after a failover, so about half of the workers on the dead master's queues stopped
    // taking jobs for good, and their close() never returned. Without the check, commands sent while
    // the cluster is down meet CLUSTERDOWN and are retried (retryDelayOnClusterDown).
    enableReadyCheck: false,
    ...(role === 'fast-fail' ? { enableOfflineQueue: false } : {}),
  };
  return new Cluster(
    cluster.nodes.map((node) => ({ host: node.host, port: node.port })),
    options,
  );
}

function markReady<T extends RedisClient>(redis: T): T {
  redis.once('ready', () => everReady.add(redis));
  return redis;
}

/** The connections createRedis made that have been ready at least once. */
const everReady = new WeakSet<RedisClient>();

/** True once the connection (made by createRedis) has been ready at least once. */
export function hasBeenReady(redis: RedisClient): boolean {
  return everReady.has(redis);
}

/** The longest endIfNeverReady waits for a connection's 'end'. */
const END_WAIT_MS = 1_000;

/**
 * Ends a connection (made by createRedis) that never became ready — its sentinels unreachable or
 * refusing the password since the process started — and waits until it has ended. BullMQ waits on
 * such a connection for each queue on it; closing the queue first removes its listeners, and that
 * wait then fails with none left: an unhandled rejection in whatever process goes on after the
 * stop (a test's, an embedding's; a service's main exits first). Ended first, the failure reaches
 * the queue's own listener. A connection that was ever ready is left alone (its queues close
 * first, as usual).
 */
export async function endIfNeverReady(redis: RedisClient): Promise<void> {
  if (everReady.has(redis) || redis.status === 'end') return;
  let timer: NodeJS.Timeout | undefined;
  const ended = new Promise<void>((resolve) => {
    redis.once('end', () => resolve());
    timer = setTimeout(resolve, END_WAIT_MS);
  });
  redis.disconnect();
  await ended;
  clearTimeout(timer);
  // The waits fail on the 'end' event's turn; let their handlers run before anything is closed.
  await new Promise((resolve) => setImmediate(resolve));
}

/**
 * Through Sentinel: the master's address comes from the sentinels on every (re)connection. A
 * master that dies drops its connections, so they reconnect to whichever node the sentinels
 * promote; a master demoted while alive answers writes with READONLY, which reconnects too.
 * (ioredis' failoverDetector is not used: its sentinel subscriptions outlive quit() and would
 * keep a one-shot CLI process from exiting.) Credentials, database number and TLS (`rediss:`) come
 * from REDIS_URL; the sentinels' own password (and user), if they require one, from
 * REDIS_SENTINEL_PASSWORD (and REDIS_SENTINEL_USERNAME).
 */
function sentinelOptions(target: RedisTarget): RedisOptions {
  if (!target.redisSentinels) return {};
  const url = new URL(target.redisUrl);
  const db = Number(url.pathname.slice(1) || '0');
  return {
    sentinels: target.redisSentinels.map((sentinel) => ({ host: sentinel.host, port: sentinel.port })),
    name: target.redisSentinelName,
    role: 'master',
    reconnectOnError: (error) => (error.message.startsWith('READONLY') ? 2 : false),
    sentinelRetryStrategy: (times) => Math.min(times * 200, 2_000),
    ...(target.redisSentinelAuth ? { sentinelPassword: target.redisSentinelAuth.password } : {}),
    ...(target.redisSentinelAuth?.username !== undefined ? { sentinelUsername: target.redisSentinelAuth.username } : {}),
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    ...(Number.isInteger(db) && db > 0 ? { db } : {}),
    // A rediss:// REDIS_URL asks for TLS to Redis: keep it for the master the sentinels name (the
    // password must never cross in clear). The sentinels are asked in plain text (no TLS to them).
    ...(url.protocol === 'rediss:' ? { tls: {}, enableTLSForSentinelMode: true } : {}),
  };
}

/** Resolves true once the connection is ready, false if it is not within the timeout. */
export function waitForRedisReady(redis: RedisClient, timeoutMs: number): Promise<boolean> {
  if (redis.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      resolve(false);
    }, timeoutMs);
    const onReady = () => {
      clearTimeout(timer);
      resolve(true);
    };
    redis.once('ready', onReady);
  });
}

/** What a cluster's readiness check saw: the cluster's own state and its masters that answered. */
export interface RedisClusterHealth {
  /** `cluster_state` as a master reports it: `ok` when every slot is served; `unknown` when no master answered. */
  state: 'ok' | 'fail' | 'unknown';
  /** The masters in this process's slot map, and how many of them answered PING in time. */
  masters: number;
  mastersAnswering: number;
}

export interface RedisHealth {
  /** One Redis answered PING; for a cluster, every master answered and the cluster state is ok. */
  ok: boolean;
  /** Present for a Redis Cluster. */
  cluster?: RedisClusterHealth;
}

/** Readiness of a Redis connection within the timeout (a check must not hang during an outage). */
export async function redisHealth(redis: RedisClient, timeoutMs = 1_000): Promise<RedisHealth> {
  if (!(redis instanceof Cluster)) return { ok: await withTimeout(redis.ping(), timeoutMs).then((answer) => answer === 'PONG', () => false) };
  const masters = slotMapMasters(redis);
  const reachable = masters.filter((node): node is Redis => node !== undefined);
  const [answers, info] = await Promise.all([
    Promise.all(masters.map((node) => (node ? withTimeout(node.ping(), timeoutMs).then((answer) => answer === 'PONG', () => false) : false))),
    Promise.any(reachable.map((node) => withTimeout(node.cluster('INFO') as Promise<string>, timeoutMs))).catch(() => undefined),
  ]);
  const reported = /cluster_state:(\w+)/.exec(info ?? '')?.[1];
  const state = reported === 'ok' ? 'ok' : reported === undefined ? 'unknown' : 'fail';
  const mastersAnswering = answers.filter(Boolean).length;
  return { ok: masters.length > 0 && mastersAnswering === masters.length && state === 'ok', cluster: { state, masters: masters.length, mastersAnswering } };
}

/**
 * The masters of the client's slot map (each slot's first owner, as the cluster last reported it),
 * with the client's connection to each, undefined where it has none. ioredis drops the connection
 * to a master that died, though the cluster still gives it the master's slots until a replica
 * takes over: such a master counts, as one that does not answer.
 */
function slotMapMasters(cluster: Cluster): Array<Redis | undefined> {
  const keys = new Set<string>();
  for (const owners of cluster.slots) if (owners?.[0]) keys.add(owners[0]);
  const connections = new Map(cluster.nodes('all').map((node) => [`${node.options.host}:${node.options.port}`, node]));
  return [...keys].map((key) => connections.get(key));
}

/** Why Redis counts as down, in words (readiness reasons): for a cluster, its state and the masters that did not answer. */
export function redisDownReason(cluster: RedisClusterHealth | undefined): string {
  if (!cluster) return 'Redis does not answer';
  if (cluster.masters === 0) return 'the Redis Cluster does not answer: no master is known';
  const silent = cluster.masters - cluster.mastersAnswering;
  return `the Redis Cluster is not ready: cluster_state ${cluster.state}${silent > 0 ? `, ${silent} of ${cluster.masters} masters do not answer` : ''}`;
}

/** True when Redis answers (redisHealth's verdict). */
export async function pingRedis(redis: RedisClient, timeoutMs = 1_000): Promise<boolean> {
  return (await redisHealth(redis, timeoutMs)).ok;
}

async function withTimeout<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
