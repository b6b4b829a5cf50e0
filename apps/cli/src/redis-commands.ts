import { createQueues, createRedis, type Queues, type Redis, type RedisTarget } from '@svc/core';

/**
 * Everything of core that reaches Redis, in one module: the commands take these functions from
 * here, never from '@svc/core' directly, so that what needs ioredis and BullMQ is in one place.
 * The bundle the bin runs reaches ioredis and BullMQ through stand-ins that load them on first
 * use (apps/cli/scripts/bundle.mjs): a command that only touches the database never loads them.
 */
export { redeliverAnyDelivery, revokeApiKeyEverywhere } from '@svc/core';

/** The run's Redis connection (a URL, or Sentinel when configured). */
export function openRedis(target: RedisTarget): Redis {
  const redis = createRedis(target, 'fast-fail');
  // A one-shot command has nothing to wait for: on the first connection error it stops
  // reconnecting, so a pending command fails at once (a producer then falls back on the
  // dispatcher's sweep, the event being already committed) instead of hanging.
  redis.on('error', () => redis.disconnect());
  return redis;
}

export function openQueues(redis: Redis, prefix: string): Queues {
  const queues = createQueues(redis, prefix);
  // The producer reports a failed enqueue through its logger; these would repeat it as stack traces.
  queues.fanout.on('error', () => undefined);
  queues.delivery.on('error', () => undefined);
  return queues;
}
