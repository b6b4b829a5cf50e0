import { describe, expect, it } from '@jest/globals';
import type { ClusterOptions } from 'ioredis';
import { Cluster, createRedis, Redis, type RedisTarget } from '../src/redis.js';

/** Opens a connection to nowhere (port 1) just to read the options it was given, then drops it. */
function optionsOf(redisUrl: string, redisSentinelAuth: RedisTarget['redisSentinelAuth'] = undefined) {
  const redis = createRedis({ redisUrl, redisSentinels: [{ host: '127.0.0.1', port: 1 }], redisSentinelName: 'mymaster', redisSentinelAuth, redisCluster: undefined }, 'fast-fail');
  if (!(redis instanceof Redis)) throw new Error('expected one Redis, not a cluster');
  redis.on('error', () => undefined);
  const { options } = redis;
  redis.disconnect();
  return options;
}

describe('Redis through Sentinel', () => {
  it('keeps TLS to the master when REDIS_URL is rediss://, with its credentials and db', () => {
    const options = optionsOf('rediss://app:s%40cret@ignored:6380/3');
    expect(options).toMatchObject({ name: 'mymaster', role: 'master', username: 'app', password: 's@cret', db: 3, tls: {}, enableTLSForSentinelMode: true });
  });

  it('sends no TLS options for a plain redis:// REDIS_URL', () => {
    const options = optionsOf('redis://127.0.0.1:6379');
    expect(options.tls).toBeUndefined();
    expect(options.enableTLSForSentinelMode).toBeFalsy();
  });

  it("gives the sentinels their own password and user, apart from the master's credentials", () => {
    const options = optionsOf('redis://app:master-pass@ignored:6379', { username: 'watcher', password: ' sentinel pass ' });
    expect(options).toMatchObject({ username: 'app', password: 'master-pass', sentinelUsername: 'watcher', sentinelPassword: ' sentinel pass ' });
  });

  it('sends the sentinels no credentials when none are configured', () => {
    const options = optionsOf('redis://app:master-pass@ignored:6379');
    expect(options.sentinelPassword).toBeUndefined();
    expect(options.sentinelUsername).toBeUndefined();
  });
});

describe('Redis Cluster', () => {
  /** A cluster client to nowhere (port 1), to read the options every node connection gets. */
  function clusterOf(cluster: NonNullable<RedisTarget['redisCluster']>, role: 'bullmq' | 'fast-fail') {
    const redis = createRedis({ redisUrl: 'redis://ignored:6379', redisSentinels: undefined, redisSentinelName: 'mymaster', redisSentinelAuth: undefined, redisCluster: cluster }, role);
    redis.on('error', () => undefined);
    if (!(redis instanceof Cluster)) throw new Error('expected a cluster client');
    const { options, startupNodes } = redis as unknown as { options: ClusterOptions; startupNodes: unknown };
    redis.disconnect();
    return { options, startupNodes };
  }

  it('gives every node the credentials and TLS of REDIS_USERNAME, REDIS_PASSWORD and REDIS_CLUSTER_TLS, from the seed nodes', () => {
    const { options, startupNodes } = clusterOf({ nodes: [{ host: 'a.example', port: 7000 }, { host: '::1', port: 7001 }], tls: true, username: 'app', password: 's3cret' }, 'bullmq');
    expect(startupNodes).toEqual([{ host: 'a.example', port: 7000 }, { host: '::1', port: 7001 }]);
    expect(options.redisOptions).toMatchObject({ username: 'app', password: 's3cret', tls: {}, maxRetriesPerRequest: null });
  });

  it('sends no credentials or TLS when none are configured, and a fast-fail client queues nothing while the cluster is away', () => {
    const { options } = clusterOf({ nodes: [{ host: '127.0.0.1', port: 1 }], tls: false, username: undefined, password: undefined }, 'fast-fail');
    expect(options.redisOptions?.password).toBeUndefined();
    expect(options.redisOptions?.username).toBeUndefined();
    expect(options.redisOptions?.tls).toBeUndefined();
    expect(options.enableOfflineQueue).toBe(false);
    expect(options.redisOptions).toMatchObject({ maxRetriesPerRequest: 0, commandTimeout: 500 });
  });
});
