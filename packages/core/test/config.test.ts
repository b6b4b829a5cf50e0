import { describe, expect, it } from '@jest/globals';
import { ConfigError, loadConfig } from '../src/config.js';

/** What loadConfig throws for this environment (undefined if it accepts it). */
function thrownBy(env: Record<string, string>): unknown {
  try {
    loadConfig(env);
    return undefined;
  } catch (error) {
    return error;
  }
}

describe('loadConfig', () => {
  it('gives the operator contract’s defaults when nothing is set, frozen', () => {
    const config = loadConfig({});

    expect(config).toMatchObject({
      databaseUrl: 'postgres://postgres@127.0.0.1:5432/svc',
      redisUrl: 'redis://127.0.0.1:6379',
      port: 3000,
      logLevel: 'info',
      rateLimitPerMinute: 60,
      webhookTimeoutMs: 10_000,
      webhookRetryDelaysMs: [60_000, 300_000, 1_800_000, 7_200_000, 43_200_000, 86_400_000],
      webhookAllowPrivateTargets: false,
      apiHeadersTimeoutMs: 10_000,
      apiRequestTimeoutMs: 30_000,
      apiKeepAliveTimeoutMs: 65_000,
      apiMaxConnections: 2_000,
      apiMaxHeaderBytes: 16_384,
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.webhookRetryDelaysMs)).toBe(true);
  });

  it('sends the LISTEN connection to DATABASE_LISTEN_URL, and to DATABASE_URL when it is not set', () => {
    expect(loadConfig({ DATABASE_URL: 'postgres://u@pgbouncer:6432/svc' }).databaseListenUrl).toBe('postgres://u@pgbouncer:6432/svc');
    expect(
      loadConfig({ DATABASE_URL: 'postgres://u@pgbouncer:6432/svc', DATABASE_LISTEN_URL: 'postgres://u@db:5432/svc' }).databaseListenUrl,
    ).toBe('postgres://u@db:5432/svc');
    expect((thrownBy({ DATABASE_LISTEN_URL: 'mysql://db/svc' }) as ConfigError).message).toMatch(/^invalid configuration: DATABASE_LISTEN_URL must use postgres: or postgresql: /);
  });

  it('reads every variable it is given', () => {
    const config = loadConfig({
      DATABASE_URL: 'postgresql://u@db:5433/x',
      REDIS_URL: 'rediss://cache:6380',
      PORT: '8080',
      LOG_LEVEL: 'DEBUG',
      RATE_LIMIT_PER_MINUTE: '120',
      WEBHOOK_TIMEOUT_MS: '2500',
      WEBHOOK_RETRY_DELAYS_MS: '1, 2,3,4,5,6',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    });

    expect(config).toMatchObject({
      databaseUrl: 'postgresql://u@db:5433/x',
      redisUrl: 'rediss://cache:6380',
      port: 8080,
      logLevel: 'debug',
      rateLimitPerMinute: 120,
      webhookTimeoutMs: 2500,
      webhookRetryDelaysMs: [1, 2, 3, 4, 5, 6],
      webhookAllowPrivateTargets: true,
    });
  });

  it('bounds every statement and lock wait of the service’s pools by default, and reads their variables', () => {
    expect(loadConfig({})).toMatchObject({ dbStatementTimeoutMs: 30_000, dbLockTimeoutMs: 5_000 });
    expect(loadConfig({ DB_STATEMENT_TIMEOUT_MS: '120000', DB_LOCK_TIMEOUT_MS: '250' })).toMatchObject({ dbStatementTimeoutMs: 120_000, dbLockTimeoutMs: 250 });
  });

  it('bounds the dispatcher’s sockets and DNS lookups by default, and reads their variables (issue 8)', () => {
    expect(loadConfig({})).toMatchObject({
      webhookMaxSockets: 200,
      webhookIdleSocketTimeoutMs: 4_000,
      webhookDnsTimeoutMs: 2_000,
      webhookDnsTries: 2,
      webhookDnsServers: [],
    });
    expect(
      loadConfig({
        DISPATCHER_CONCURRENCY: '10',
        WEBHOOK_MAX_SOCKETS: '10',
        WEBHOOK_IDLE_SOCKET_TIMEOUT_MS: '50',
        WEBHOOK_DNS_TIMEOUT_MS: '300',
        WEBHOOK_DNS_TRIES: '1',
        WEBHOOK_DNS_SERVERS: '10.0.0.53, 127.0.0.1:5353,[::1]:53,2001:db8::1',
      }),
    ).toMatchObject({
      webhookMaxSockets: 10,
      webhookIdleSocketTimeoutMs: 50,
      webhookDnsTimeoutMs: 300,
      webhookDnsTries: 1,
      webhookDnsServers: ['10.0.0.53', '127.0.0.1:5353', '[::1]:53', '2001:db8::1'],
    });
  });

  it.each([
    ['DATABASE_URL', 'not a url'],
    ['DATABASE_URL', 'mysql://root@localhost/x'],
    ['REDIS_URL', 'http://localhost:6379'],
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['LOG_LEVEL', 'loud'],
    ['RATE_LIMIT_PER_MINUTE', '0'],
    ['RATE_LIMIT_PER_MINUTE', '1.5'],
    ['WEBHOOK_TIMEOUT_MS', '-1'],
    ['WEBHOOK_RETRY_DELAYS_MS', '1,2,3,4,5'],
    ['WEBHOOK_RETRY_DELAYS_MS', '1,2,3,4,5,6,7'],
    ['WEBHOOK_RETRY_DELAYS_MS', '1,2,3,x,5,6'],
    ['WEBHOOK_RETRY_DELAYS_MS', '1,2,3,4,5,99999999999999999999'],
    ['WEBHOOK_ALLOW_PRIVATE_TARGETS', 'maybe'],
    ['QUEUE_PREFIX', 'has space'],
    ['METRICS_PORT', '65536'],
    ['METRICS_PORT', 'nine'],
    ['DELIVERY_RETENTION_DAYS', '-1'],
    ['DELIVERY_RETENTION_DAYS', '1.5'],
    ['REDIS_SENTINELS', 'sentinel-a'],
    ['REDIS_SENTINELS', 'sentinel-a:26379,:26379'],
    ['REDIS_SENTINELS', 'sentinel-a:0'],
    ['REDIS_SENTINEL_NAME', 'two words'],
    ['API_HEADERS_TIMEOUT_MS', '0'],
    ['API_REQUEST_TIMEOUT_MS', '5000'],
    ['API_MAX_CONNECTIONS', '0'],
    ['API_MAX_HEADER_BYTES', '100'],
    ['WEBHOOK_MAX_SOCKETS', '99'],
    ['WEBHOOK_IDLE_SOCKET_TIMEOUT_MS', '0'],
    ['WEBHOOK_DNS_TIMEOUT_MS', 'soon'],
    ['WEBHOOK_DNS_TRIES', '0'],
    ['WEBHOOK_DNS_SERVERS', 'ns1.example.com'],
    ['WEBHOOK_DNS_SERVERS', '10.0.0.1:99999'],
    ['DB_STATEMENT_TIMEOUT_MS', '0'],
    ['DB_STATEMENT_TIMEOUT_MS', 'forever'],
    ['DB_LOCK_TIMEOUT_MS', '5'],
  ])('refuses %s=%p with a ConfigError naming the variable', (variable, value) => {
    const thrown = thrownBy({ [variable]: value });

    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).variable).toBe(variable);
    expect((thrown as ConfigError).message).toContain(variable);
    expect((thrown as ConfigError).message).not.toContain('\n');
  });

  it('leaves METRICS_PORT to each process when unset, keeps history 30 days and reaches Redis by REDIS_URL', () => {
    const config = loadConfig({});

    expect(config.metricsPort).toBeUndefined();
    expect(config.deliveryRetentionDays).toBe(30);
    expect(config.redisSentinels).toBeUndefined();
    expect(config.redisSentinelName).toBe('mymaster');
    expect(config.redisSentinelAuth).toBeUndefined();
  });

  it('reads METRICS_PORT (0 turns it off), DELIVERY_RETENTION_DAYS and a Sentinel list with IPv6 and names', () => {
    const config = loadConfig({
      METRICS_PORT: '0',
      DELIVERY_RETENTION_DAYS: '7',
      REDIS_SENTINELS: ' sentinel-a:26379, 10.0.0.2:26380,[::1]:26381 ',
      REDIS_SENTINEL_NAME: 'svc-master',
    });

    expect(config.metricsPort).toBe(0);
    expect(config.deliveryRetentionDays).toBe(7);
    expect(config.redisSentinels).toEqual([
      { host: 'sentinel-a', port: 26379 },
      { host: '10.0.0.2', port: 26380 },
      { host: '::1', port: 26381 },
    ]);
    expect(config.redisSentinelName).toBe('svc-master');
    expect(Object.isFrozen(config.redisSentinels)).toBe(true);
  });

  it("takes the sentinels' password exactly as given (spaces kept) and an ACL user beside it", () => {
    const sentinels = { REDIS_SENTINELS: 'sentinel-a:26379' };

    expect(loadConfig({ ...sentinels, REDIS_SENTINEL_PASSWORD: ' pass with spaces ' }).redisSentinelAuth).toEqual({ username: undefined, password: ' pass with spaces ' });
    expect(loadConfig({ ...sentinels, REDIS_SENTINEL_PASSWORD: 's3cret', REDIS_SENTINEL_USERNAME: 'watcher' }).redisSentinelAuth).toEqual({ username: 'watcher', password: 's3cret' });
    expect(loadConfig({ ...sentinels, REDIS_SENTINEL_PASSWORD: '' }).redisSentinelAuth).toBeUndefined();
  });

  it.each([
    [{ REDIS_SENTINEL_PASSWORD: 'hunter2' }, 'REDIS_SENTINEL_PASSWORD', 'REDIS_SENTINELS'],
    [{ REDIS_SENTINEL_USERNAME: 'watcher', REDIS_SENTINEL_PASSWORD: 'hunter2' }, 'REDIS_SENTINEL_PASSWORD', 'REDIS_SENTINELS'],
    [{ REDIS_SENTINELS: 'sentinel-a:26379', REDIS_SENTINEL_USERNAME: 'watcher' }, 'REDIS_SENTINEL_USERNAME', 'REDIS_SENTINEL_PASSWORD'],
    [{ REDIS_SENTINELS: 'sentinel-a:26379', REDIS_SENTINEL_USERNAME: 'two words', REDIS_SENTINEL_PASSWORD: 'hunter2' }, 'REDIS_SENTINEL_USERNAME', 'spaces'],
    [{ REDIS_SENTINELS: 'sentinel-a:26379', REDIS_SENTINEL_PASSWORD: `hunter2${'x'.repeat(4_090)}` }, 'REDIS_SENTINEL_PASSWORD', '4096'],
  ])('refuses sentinel credentials that cannot work (%p), naming the variable and never the password', (env, variable, hint) => {
    const thrown = thrownBy(env);

    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).variable).toBe(variable);
    expect((thrown as ConfigError).message).toContain(hint);
    expect((thrown as ConfigError).message).not.toContain('hunter2');
  });
});

describe('loadConfig: Redis Cluster (REDIS_CLUSTER_NODES, REDIS_CLUSTER_TLS, REDIS_USERNAME, REDIS_PASSWORD)', () => {
  /** Every ConfigError is one line naming its variable(s) and quoting none of these values. */
  function expectRefusal(env: Record<string, string>, variable: string, ...named: string[]): ConfigError {
    const thrown = thrownBy(env);
    expect(thrown).toBeInstanceOf(ConfigError);
    const error = thrown as ConfigError;
    expect(error.variable).toBe(variable);
    expect(error.message).not.toContain('\n');
    for (const name of [variable, ...named]) expect(error.message).toContain(name);
    return error;
  }

  it('reaches Redis by REDIS_URL, one delivery shard, when no cluster is configured', () => {
    const config = loadConfig({});

    expect(config.redisCluster).toBeUndefined();
    expect(config.queueShards).toBe(1);
  });

  it('reads the seed nodes (names, IPv4, IPv6 in brackets, spaces around), no TLS and no credentials by default, frozen', () => {
    const config = loadConfig({ REDIS_CLUSTER_NODES: ' redis-a.example:7000, 10.0.1.2:7001 ,[::1]:7002,[2001:db8::7]:6379 ' });

    expect(config.redisCluster).toEqual({
      nodes: [
        { host: 'redis-a.example', port: 7000 },
        { host: '10.0.1.2', port: 7001 },
        { host: '::1', port: 7002 },
        { host: '2001:db8::7', port: 6379 },
      ],
      tls: false,
      username: undefined,
      password: undefined,
    });
    expect(Object.isFrozen(config.redisCluster)).toBe(true);
    expect(Object.isFrozen(config.redisCluster!.nodes)).toBe(true);
  });

  it('reads REDIS_CLUSTER_TLS=true and the ACL user and password, the password exactly as given (spaces kept)', () => {
    const nodes = { REDIS_CLUSTER_NODES: 'redis-a.example:6379' };

    expect(loadConfig({ ...nodes, REDIS_CLUSTER_TLS: 'true', REDIS_USERNAME: 'svc', REDIS_PASSWORD: ' pass with spaces ' }).redisCluster).toMatchObject({
      tls: true,
      username: 'svc',
      password: ' pass with spaces ',
    });
    expect(loadConfig({ ...nodes, REDIS_CLUSTER_TLS: 'TRUE', REDIS_PASSWORD: 's3cret' }).redisCluster).toMatchObject({ tls: true, username: undefined, password: 's3cret' });
    expect(loadConfig({ ...nodes, REDIS_CLUSTER_TLS: 'false', REDIS_PASSWORD: '' }).redisCluster).toMatchObject({ tls: false, password: undefined });
  });

  it.each([
    ['redis-a'],
    ['redis-a:'],
    [':7000'],
    ['redis-a:0'],
    ['redis-a:65536'],
    ['redis-a:70o0'],
    ['[::1]'],
    ['::1:7000'], // an IPv6 address without brackets: is 7000 its last group or the port?
    ['[::1:7000'],
    ['redis-a]:7000'],
    ['[redis-a]:7000'],
    ['[10.0.0.1]:7000'],
    ['redis-a:7000,,redis-b:7001'],
    ['redis-a:7000 redis-b:7001'],
    ['redis-a:7000,'],
  ])('refuses REDIS_CLUSTER_NODES=%p, naming it and the pair', (value) => {
    const error = expectRefusal({ REDIS_CLUSTER_NODES: value }, 'REDIS_CLUSTER_NODES');

    expect(error.message).toMatch(/host:port pairs/);
  });

  it('refuses a URL pasted into REDIS_CLUSTER_NODES without quoting it: it may hold a password', () => {
    const error = expectRefusal({ REDIS_CLUSTER_NODES: 'cache-a.example:7000,redis://default:S3cretPW@10.0.0.1:6379' }, 'REDIS_CLUSTER_NODES');

    expect(error.message).toMatch(/entry 2, which looks like a URL/);
    expect(error.message).not.toMatch(/S3cretPW|default/);
  });

  it.each([
    [{ REDIS_URL: 'redis://:hunter2@cache.example:6379' }, ['REDIS_URL']],
    [{ REDIS_URL: 'http://:hunter2@cache.example:6379' }, ['REDIS_URL']], // a mix, before REDIS_URL's own form
    [{ REDIS_SENTINELS: 'sentinel-a.example:26379' }, ['REDIS_SENTINELS']],
    [{ REDIS_SENTINEL_PASSWORD: 'hunter2' }, ['REDIS_SENTINEL_PASSWORD']], // not "set REDIS_SENTINELS too"
    [{ REDIS_SENTINEL_USERNAME: 'watcher', REDIS_SENTINEL_PASSWORD: 'hunter2' }, ['REDIS_SENTINEL_PASSWORD', 'REDIS_SENTINEL_USERNAME']],
    [{ REDIS_SENTINEL_NAME: 'svc-master' }, ['REDIS_SENTINEL_NAME']],
    [{ REDIS_URL: 'redis://:hunter2@cache.example:6379', REDIS_SENTINELS: 'sentinel-a.example:26379', REDIS_SENTINEL_PASSWORD: 'hunter2' }, ['REDIS_URL', 'REDIS_SENTINELS', 'REDIS_SENTINEL_PASSWORD']],
  ])('refuses REDIS_CLUSTER_NODES beside %p: one line naming both sides, no value', (others, named) => {
    const env = { REDIS_CLUSTER_NODES: 'cluster-a.example:7000', REDIS_PASSWORD: 'clusterpass', ...others };

    const error = expectRefusal(env, 'REDIS_CLUSTER_NODES', ...named);

    for (const value of ['hunter2', 'cluster-a.example', 'clusterpass', 'cache.example', 'sentinel-a.example', 'watcher', 'svc-master']) {
      expect(error.message).not.toContain(value);
    }
  });

  it.each([
    [{ REDIS_PASSWORD: 'hunter2' }, 'REDIS_PASSWORD'],
    [{ REDIS_USERNAME: 'svc-user', REDIS_PASSWORD: 'hunter2' }, 'REDIS_USERNAME, REDIS_PASSWORD'],
    [{ REDIS_CLUSTER_TLS: 'true' }, 'REDIS_CLUSTER_TLS'],
    [{ REDIS_CLUSTER_TLS: 'true', REDIS_URL: 'rediss://:hunter2@cache.example:6380' }, 'REDIS_CLUSTER_TLS'],
  ])('refuses %p without REDIS_CLUSTER_NODES: a single Redis takes its credentials and TLS from REDIS_URL', (env, variable) => {
    const error = expectRefusal(env, variable, 'REDIS_CLUSTER_NODES', 'REDIS_URL');

    expect(error.message).not.toContain('hunter2');
    expect(error.message).not.toContain('svc-user');
  });

  it.each([
    [{ REDIS_USERNAME: 'svc' }, 'REDIS_USERNAME', 'REDIS_PASSWORD'],
    [{ REDIS_USERNAME: 'two words', REDIS_PASSWORD: 'hunter2' }, 'REDIS_USERNAME', 'spaces'],
    [{ REDIS_PASSWORD: `hunter2${'x'.repeat(4_090)}` }, 'REDIS_PASSWORD', '4096'],
    [{ REDIS_CLUSTER_TLS: 'maybe', REDIS_PASSWORD: 'hunter2' }, 'REDIS_CLUSTER_TLS', 'true or false'],
  ])('refuses cluster credentials or TLS that cannot work (%p), never quoting the password', (env, variable, hint) => {
    const error = expectRefusal({ REDIS_CLUSTER_NODES: 'redis-a.example:6379', ...env }, variable, hint);

    expect(error.message).not.toContain('hunter2');
  });

  it('reads DISPATCHER_QUEUE_SHARDS from 1 to 256', () => {
    expect(loadConfig({ DISPATCHER_QUEUE_SHARDS: '1' }).queueShards).toBe(1);
    expect(loadConfig({ DISPATCHER_QUEUE_SHARDS: '3', REDIS_CLUSTER_NODES: 'redis-a.example:6379' }).queueShards).toBe(3);
    expect(loadConfig({ DISPATCHER_QUEUE_SHARDS: '256' }).queueShards).toBe(256);
  });

  it.each([['0'], ['257'], ['-1'], ['1.5'], ['three']])('refuses DISPATCHER_QUEUE_SHARDS=%p, naming it', (value) => {
    const error = expectRefusal({ DISPATCHER_QUEUE_SHARDS: value }, 'DISPATCHER_QUEUE_SHARDS');

    expect(error.message).toMatch(/whole number|between 1 and 256/);
  });
});
