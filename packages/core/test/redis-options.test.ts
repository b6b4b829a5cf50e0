import { describe, expect, it } from '@jest/globals';
import { createRedis } from '../src/redis.js';

/** Opens a connection to nowhere (port 1) just to read the options it was given, then drops it. */
function optionsOf(redisUrl: string) {
  const redis = createRedis({ redisUrl, redisSentinels: [{ host: '127.0.0.1', port: 1 }], redisSentinelName: 'mymaster' }, 'fast-fail');
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
});
