import { Redis, type RedisOptions } from 'ioredis';

export { Redis };

/**
 * A Redis connection. `role: 'bullmq'` gives what BullMQ workers require (no per-command retry
 * limit); `role: 'fast-fail'` gives a connection that errors at once while Redis is away, for
 * paths that must fall back instead of waiting.
 */
export function createRedis(redisUrl: string, role: 'bullmq' | 'fast-fail' | 'default' = 'default'): Redis {
  const options: RedisOptions = { lazyConnect: false };
  if (role === 'bullmq') options.maxRetriesPerRequest = null;
  if (role === 'fast-fail') {
    options.maxRetriesPerRequest = 0;
    options.enableOfflineQueue = false;
    options.commandTimeout = 500;
    options.retryStrategy = (times) => Math.min(times * 200, 2_000);
  }
  return new Redis(redisUrl, options);
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
