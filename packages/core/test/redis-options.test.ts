import { describe, expect, it } from '@jest/globals';
import { createRedis, type RedisTarget } from '../src/redis.js';

/** Opens a connection to nowhere (port 1) just to read the options it was given, then drops it. */
function optionsOf(redisUrl: string, redisSentinelAuth: RedisTarget['redisSentinelAuth'] = undefined) {
  const redis = createRedis({ redisUrl, redisSentinels: [{ host: '127.0.0.1', port: 1 }], redisSentinelName: 'mymaster', redisSentinelAuth }, 'fast-fail');
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
