import { createQueues, createRedis, type Queues, type Redis, type RedisTarget } from '@svc/core';

/**
 * Everything of core that reaches Redis, in a module of its own that CliResources loads with a
 * dynamic import (see redisCommands()): only a command that enqueues or revokes loads ioredis and
 * BullMQ; a command that only touches the database never pays for compiling them. Commands take
 * these functions from here, never from '@svc/core' directly, or the bundle would load them for all.
 */
export { completeAiMonitorRun, completeScan, deployPowerUp, redeliverAnyDelivery, revokeApiKeyEverywhere } from '@svc/core';

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
