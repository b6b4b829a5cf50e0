import { Redis, type RedisOptions } from 'ioredis';
import type { Config } from './config.js';

export { Redis };

/** Where Redis is: REDIS_URL, or the master REDIS_SENTINEL_NAME as REDIS_SENTINELS report it. */
export type RedisTarget = Pick<Config, 'redisUrl' | 'redisSentinels' | 'redisSentinelName' | 'redisSentinelAuth'>;

/**
 * A Redis connection; every process opens each of its connections here, so REDIS_SENTINELS
 * reaches all of them. `role: 'bullmq'` gives what BullMQ workers require (no per-command retry
 * limit); `role: 'fast-fail'` gives a connection that errors at once while Redis is away (or
 * failing over), for paths that must fall back instead of waiting.
 */
export function createRedis(target: RedisTarget | string, role: 'bullmq' | 'fast-fail' | 'default' = 'default'): Redis {
  const options: RedisOptions = { lazyConnect: false, ...(typeof target === 'string' ? {} : sentinelOptions(target)) };
  if (role === 'bullmq') options.maxRetriesPerRequest = null;
  if (role === 'fast-fail') {
    options.maxRetriesPerRequest = 0;
    options.enableOfflineQueue = false;
    options.commandTimeout = 500;
    options.retryStrategy = (times) => Math.min(times * 200, 2_000);
  }
  const redis = typeof target !== 'string' && target.redisSentinels ? new Redis(options) : new Redis(typeof target === 'string' ? target : target.redisUrl, options);
  redis.once('ready', () => everReady.add(redis));
  return redis;
}

/** The connections createRedis made that have been ready at least once. */
const everReady = new WeakSet<Redis>();

/** True once the connection (made by createRedis) has been ready at least once. */
export function hasBeenReady(redis: Redis): boolean {
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
export async function endIfNeverReady(redis: Redis): Promise<void> {
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
export function waitForRedisReady(redis: Redis, timeoutMs: number): Promise<boolean> {
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

/** True when Redis answers PING within the timeout (readiness checks: an outage must not hang them). */
export async function pingRedis(redis: Redis, timeoutMs = 1_000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const answer = await Promise.race([
      redis.ping(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), timeoutMs);
      }),
    ]);
    return answer === 'PONG';
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}
