import { isIP } from 'node:net';
import { parseEncryptionKeys, type EncryptionKey } from './secrets/encryption-key.js';

/** Every setting of every process, parsed once from the environment at start. */
export interface Config {
  readonly databaseUrl: string;
  /**
   * DATABASE_LISTEN_URL: where the API's one LISTEN connection goes (default DATABASE_URL). A
   * transaction-pooling PgBouncer in DATABASE_URL cannot keep a LISTEN: this points past it.
   */
  readonly databaseListenUrl: string;
  readonly redisUrl: string;
  readonly port: number;
  readonly logLevel: LogLevel;
  readonly rateLimitPerMinute: number;
  readonly webhookTimeoutMs: number;
  readonly webhookRetryDelaysMs: readonly number[];
  readonly webhookAllowPrivateTargets: boolean;
  /** Sockets to receivers in all, in use or idle, per dispatcher process. */
  readonly webhookMaxSockets: number;
  readonly webhookIdleSocketTimeoutMs: number;
  /** One DNS query's timeout; a lookup takes at most this × webhookDnsTries. */
  readonly webhookDnsTimeoutMs: number;
  readonly webhookDnsTries: number;
  /** Name servers for receivers' names ("ip" or "ip:port", "[v6]:port"); empty: the system's. */
  readonly webhookDnsServers: readonly string[];
  readonly queuePrefix: string;
  readonly dispatcherConcurrency: number;
  readonly perSubscriptionConcurrency: number;
  readonly sweepIntervalMs: number;
  readonly dbPoolMax: number;
  /** Longest a statement of the service may run (DB_STATEMENT_TIMEOUT_MS); Postgres cancels it past that. */
  readonly dbStatementTimeoutMs: number;
  /** Longest a statement waits for a row or table lock (DB_LOCK_TIMEOUT_MS) before it fails and is retried. */
  readonly dbLockTimeoutMs: number;
  /** Port of the process's own /metrics (and the dispatcher's /healthz, /readyz); undefined: the process's default; 0: off. */
  readonly metricsPort: number | undefined;
  /** Address the metrics port binds (METRICS_HOST): loopback unless the operator opens it; it has no authentication. */
  readonly metricsHost: string;
  /** The origin customers' browsers reach the API at (PUBLIC_BASE_URL): Settings links start with it; https makes the session cookie Secure. */
  readonly publicBaseUrl: string;
  /** Finished deliveries, their attempts and delivery-less events older than this are purged; 0 keeps them forever. */
  readonly deliveryRetentionDays: number;
  /** When set, every Redis connection finds the master through these Sentinels instead of REDIS_URL. */
  readonly redisSentinels: ReadonlyArray<{ host: string; port: number }> | undefined;
  readonly redisSentinelName: string;
  /**
   * What the sentinels themselves require (their `requirepass`, or an ACL user's): REDIS_SENTINEL_PASSWORD
   * and REDIS_SENTINEL_USERNAME. Never logged; the master's credentials stay in REDIS_URL.
   */
  readonly redisSentinelAuth: { readonly username: string | undefined; readonly password: string } | undefined;
  /**
   * REDIS_CLUSTER_NODES (seed nodes), REDIS_CLUSTER_TLS, REDIS_USERNAME and REDIS_PASSWORD: when
   * set, every Redis connection is to this Redis Cluster instead of REDIS_URL. The credentials and
   * TLS apply to every node. Never logged.
   */
  readonly redisCluster: RedisClusterConfig | undefined;
  /** DISPATCHER_QUEUE_SHARDS: delivery queues, each under its own hash tag; a subscription's attempts all go to one. */
  readonly queueShards: number;
  /** The API's HTTP server bounds (apps/api/src/http/server.ts); docs/operations.md "Limits". */
  readonly apiHeadersTimeoutMs: number;
  readonly apiRequestTimeoutMs: number;
  readonly apiKeepAliveTimeoutMs: number;
  readonly apiMaxConnections: number;
  readonly apiMaxHeaderBytes: number;
  /** SECRETS_ENCRYPTION_KEY: the keys webhook secrets are sealed with at rest, newest first; empty: stored in plain text. */
  readonly secretsEncryptionKeys: readonly EncryptionKey[];
}

export interface RedisClusterConfig {
  readonly nodes: ReadonlyArray<{ readonly host: string; readonly port: number }>;
  readonly tls: boolean;
  readonly username: string | undefined;
  readonly password: string | undefined;
}

/** The most delivery queue shards a deployment may run (each costs every dispatcher a blocking connection). */
export const MAX_QUEUE_SHARDS = 256;

/** METRICS_PORT's default per process: a second kind on one host must not collide with the first. */
export const DEFAULT_API_METRICS_PORT = 9464;
export const DEFAULT_DISPATCHER_METRICS_PORT = 9465;

export type LogLevel = 'error' | 'warn' | 'info' | 'http' | 'verbose' | 'debug' | 'silly';
const LOG_LEVELS: readonly LogLevel[] = ['error', 'warn', 'info', 'http', 'verbose', 'debug', 'silly'];

/** The longest WEBHOOK_TIMEOUT_MS any process may run with: bounds how long an attempt can hold its lease. */
export const MAX_WEBHOOK_TIMEOUT_MS = 600_000;

/** The number of delays before attempts 2..7 (spec §6.3: 7 attempts in all). */
export const RETRY_DELAY_COUNT = 6;
const MAX_RETRY_DELAY_MS = 30 * 24 * 60 * 60 * 1000;

/** A configuration value that cannot be used; the message names the variable. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    reason: string,
  ) {
    super(`invalid configuration: ${variable} ${reason}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

function read(env: Env, name: string, fallback: string): string {
  const value = env[name];
  return value === undefined || value.trim() === '' ? fallback : value.trim();
}

function parseUrl(env: Env, name: string, fallback: string, protocols: string[]): string {
  const raw = read(env, name, fallback);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(name, 'is not a parsable URL');
  }
  if (!protocols.includes(url.protocol)) {
    throw new ConfigError(name, `must use ${protocols.join(' or ')} (got ${url.protocol})`);
  }
  return raw;
}

function parseInteger(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = read(env, name, String(fallback));
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number (got "${raw}")`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max} (got ${value})`);
  return value;
}

function parseBoolean(env: Env, name: string, fallback: boolean): boolean {
  const raw = read(env, name, String(fallback)).toLowerCase();
  if (['true', '1', 'yes'].includes(raw)) return true;
  if (['false', '0', 'no'].includes(raw)) return false;
  throw new ConfigError(name, `must be true or false (got "${raw}")`);
}

function parseDnsServers(env: Env, name: string): string[] {
  const raw = read(env, name, '');
  if (raw === '') return [];
  return raw.split(',').map((part) => {
    const server = part.trim();
    const match = /^\[([0-9a-fA-F:.]+)\](?::(\d{1,5}))?$/.exec(server) ?? /^([0-9.]+)(?::(\d{1,5}))?$/.exec(server) ?? /^([0-9a-fA-F:]+)()$/.exec(server);
    const port = match?.[2] ? Number(match[2]) : 53;
    if (!match || !isIP(match[1]!) || port < 1 || port > 65535) {
      throw new ConfigError(name, `has a server that is not "ip", "ip:port" or "[ipv6]:port": "${server}"`);
    }
    return server;
  });
}

/** An IP address to listen on (`127.0.0.1`, `0.0.0.0`, `::`, `::1`, an interface's own address); names are refused, since what a name resolves to can change. */
function parseBindAddress(env: Env, name: string, fallback: string): string {
  const raw = read(env, name, fallback);
  const address = raw.startsWith('[') && raw.endsWith(']') ? raw.slice(1, -1) : raw;
  if (isIP(address) === 0) throw new ConfigError(name, `must be an IP address to listen on, such as 127.0.0.1, 0.0.0.0 or :: (got "${raw}")`);
  return address;
}

function parseDelays(env: Env, name: string, fallback: string): number[] {
  const raw = read(env, name, fallback);
  const parts = raw.split(',').map((part) => part.trim());
  if (parts.length !== RETRY_DELAY_COUNT) {
    throw new ConfigError(name, `must list exactly ${RETRY_DELAY_COUNT} comma-separated delays in ms (got ${parts.length})`);
  }
  return parts.map((part) => {
    if (!/^\d+$/.test(part)) throw new ConfigError(name, `has a delay that is not a whole number of ms: "${part}"`);
    const delay = Number(part);
    if (delay > MAX_RETRY_DELAY_MS) throw new ConfigError(name, `has a delay over 30 days: ${part}`);
    return delay;
  });
}

/** Parses and freezes the configuration; throws ConfigError naming the first bad variable. */
export function loadConfig(env: Env = process.env): Config {
  const level = read(env, 'LOG_LEVEL', 'info').toLowerCase();
  if (!LOG_LEVELS.includes(level as LogLevel)) {
    throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')} (got "${level}")`);
  }
  const dispatcherConcurrency = parseInteger(env, 'DISPATCHER_CONCURRENCY', 100, 1, 10_000);
  // First of the Redis settings: a cluster beside REDIS_URL or a Sentinel variable is refused as the
  // mix it is, before either side's own checks (REDIS_SENTINEL_PASSWORD's "set REDIS_SENTINELS too").
  const redisCluster = parseRedisCluster(env);
  const config: Config = {
    databaseUrl: parseUrl(env, 'DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/svc', ['postgres:', 'postgresql:']),
    databaseListenUrl: parseUrl(env, 'DATABASE_LISTEN_URL', parseUrl(env, 'DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/svc', ['postgres:', 'postgresql:']), ['postgres:', 'postgresql:']),
    redisUrl: parseUrl(env, 'REDIS_URL', 'redis://127.0.0.1:6379', ['redis:', 'rediss:']),
    port: parseInteger(env, 'PORT', 3000, 0, 65535),
    logLevel: level as LogLevel,
    rateLimitPerMinute: parseInteger(env, 'RATE_LIMIT_PER_MINUTE', 60, 1, 1_000_000),
    webhookTimeoutMs: parseInteger(env, 'WEBHOOK_TIMEOUT_MS', 10_000, 1, MAX_WEBHOOK_TIMEOUT_MS),
    webhookRetryDelaysMs: Object.freeze(
      parseDelays(env, 'WEBHOOK_RETRY_DELAYS_MS', '60000,300000,1800000,7200000,43200000,86400000'),
    ),
    webhookAllowPrivateTargets: parseBoolean(env, 'WEBHOOK_ALLOW_PRIVATE_TARGETS', false),
    // Each attempt in flight holds a socket, so fewer than DISPATCHER_CONCURRENCY would make attempts wait for one.
    webhookMaxSockets: parseInteger(env, 'WEBHOOK_MAX_SOCKETS', 2 * dispatcherConcurrency, dispatcherConcurrency, 100_000),
    webhookIdleSocketTimeoutMs: parseInteger(env, 'WEBHOOK_IDLE_SOCKET_TIMEOUT_MS', 4_000, 1, 600_000),
    webhookDnsTimeoutMs: parseInteger(env, 'WEBHOOK_DNS_TIMEOUT_MS', 2_000, 1, 60_000),
    webhookDnsTries: parseInteger(env, 'WEBHOOK_DNS_TRIES', 2, 1, 10),
    webhookDnsServers: Object.freeze(parseDnsServers(env, 'WEBHOOK_DNS_SERVERS')),
    queuePrefix: parseQueuePrefix(env),
    dispatcherConcurrency,
    perSubscriptionConcurrency: parseInteger(env, 'DISPATCHER_PER_SUBSCRIPTION_CONCURRENCY', 10, 1, 10_000),
    sweepIntervalMs: parseInteger(env, 'DISPATCHER_SWEEP_INTERVAL_MS', 5_000, 100, 3_600_000),
    dbPoolMax: parseInteger(env, 'DB_POOL_MAX', 20, 1, 1_000),
    dbStatementTimeoutMs: parseInteger(env, 'DB_STATEMENT_TIMEOUT_MS', 30_000, 100, 3_600_000),
    dbLockTimeoutMs: parseInteger(env, 'DB_LOCK_TIMEOUT_MS', 5_000, 10, 3_600_000),
    metricsPort: read(env, 'METRICS_PORT', '') === '' ? undefined : parseInteger(env, 'METRICS_PORT', 0, 0, 65535),
    metricsHost: parseBindAddress(env, 'METRICS_HOST', '127.0.0.1'),
    publicBaseUrl: parsePublicBaseUrl(env, parseInteger(env, 'PORT', 3000, 0, 65535)),
    deliveryRetentionDays: parseInteger(env, 'DELIVERY_RETENTION_DAYS', 30, 0, 36_500),
    redisSentinels: parseSentinels(env),
    redisSentinelName: parseSentinelName(env),
    redisSentinelAuth: parseSentinelAuth(env),
    redisCluster,
    queueShards: parseInteger(env, 'DISPATCHER_QUEUE_SHARDS', 1, 1, MAX_QUEUE_SHARDS),
    ...parseApiServer(env),
    secretsEncryptionKeys: parseSecretsEncryptionKeys(env),
  };
  return Object.freeze(config);
}

type ApiServerConfig = Pick<
  Config,
  'apiHeadersTimeoutMs' | 'apiRequestTimeoutMs' | 'apiKeepAliveTimeoutMs' | 'apiMaxConnections' | 'apiMaxHeaderBytes'
>;

function parseApiServer(env: Env): ApiServerConfig {
  const apiHeadersTimeoutMs = parseInteger(env, 'API_HEADERS_TIMEOUT_MS', 10_000, 100, 600_000);
  const apiRequestTimeoutMs = parseInteger(env, 'API_REQUEST_TIMEOUT_MS', 30_000, 100, 3_600_000);
  // Node refuses a server whose whole-request timeout is shorter than its headers timeout.
  if (apiRequestTimeoutMs < apiHeadersTimeoutMs) {
    throw new ConfigError('API_REQUEST_TIMEOUT_MS', `must be at least API_HEADERS_TIMEOUT_MS (${apiHeadersTimeoutMs})`);
  }
  return {
    apiHeadersTimeoutMs,
    apiRequestTimeoutMs,
    apiKeepAliveTimeoutMs: parseInteger(env, 'API_KEEP_ALIVE_TIMEOUT_MS', 65_000, 100, 600_000),
    apiMaxConnections: parseInteger(env, 'API_MAX_CONNECTIONS', 2_000, 1, 1_000_000),
    apiMaxHeaderBytes: parseInteger(env, 'API_MAX_HEADER_BYTES', 16_384, 1_024, 1_048_576),
  };
}

/** PUBLIC_BASE_URL: an http(s) origin, nothing after the host and port; default http://localhost:$PORT. */
function parsePublicBaseUrl(env: Env, port: number): string {
  const raw = read(env, 'PUBLIC_BASE_URL', `http://localhost:${port}`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('PUBLIC_BASE_URL', `must be an http or https origin such as https://visibility.example.com (got "${raw}")`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.pathname !== '/' || url.search || url.hash || url.username || url.password) {
    throw new ConfigError('PUBLIC_BASE_URL', `must be an http or https origin with no path, query or credentials, such as https://visibility.example.com (got "${raw}")`);
  }
  return url.origin;
}

function parseQueuePrefix(env: Env): string {
  const prefix = read(env, 'QUEUE_PREFIX', 'svc');
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(prefix)) {
    throw new ConfigError('QUEUE_PREFIX', 'must be 1-64 letters, digits, "_", "." or "-"');
  }
  return prefix;
}

/** REDIS_SENTINELS: `host:port[,host:port…]`; unset means REDIS_URL is used directly. */
function parseSentinels(env: Env): Array<{ host: string; port: number }> | undefined {
  return parseHostPorts(env, 'REDIS_SENTINELS');
}

function parseSentinelName(env: Env): string {
  const name = read(env, 'REDIS_SENTINEL_NAME', 'mymaster');
  if (!/^[A-Za-z0-9_.-]{1,128}$/.test(name)) {
    throw new ConfigError('REDIS_SENTINEL_NAME', 'must be 1-128 letters, digits, "_", "." or "-"');
  }
  return name;
}

/**
 * REDIS_SENTINEL_PASSWORD (and REDIS_SENTINEL_USERNAME for an ACL user): taken exactly as given,
 * spaces included, since a password may hold them. Either without REDIS_SENTINELS, or a user
 * without a password, is a mistake the operator hears about at start, not a silent no-op. The
 * messages never quote the values.
 */
function parseSentinelAuth(env: Env): Config['redisSentinelAuth'] {
  const password = env.REDIS_SENTINEL_PASSWORD === '' ? undefined : env.REDIS_SENTINEL_PASSWORD;
  const username = env.REDIS_SENTINEL_USERNAME === '' ? undefined : env.REDIS_SENTINEL_USERNAME;
  if (password === undefined && username === undefined) return undefined;
  if (read(env, 'REDIS_SENTINELS', '') === '') {
    throw new ConfigError(password !== undefined ? 'REDIS_SENTINEL_PASSWORD' : 'REDIS_SENTINEL_USERNAME', 'is set but REDIS_SENTINELS is not: set both, or neither');
  }
  if (password === undefined) throw new ConfigError('REDIS_SENTINEL_USERNAME', 'needs REDIS_SENTINEL_PASSWORD too');
  if (username !== undefined && !/^[\x21-\x7e]{1,256}$/.test(username)) {
    throw new ConfigError('REDIS_SENTINEL_USERNAME', 'must be 1-256 printable characters without spaces');
  }
  if (password.length > 4096) throw new ConfigError('REDIS_SENTINEL_PASSWORD', 'must be at most 4096 characters');
  return Object.freeze({ username, password });
}

/** host:port pairs separated by commas ("[v6]:port" for an IPv6 address: "::1:7000" could be either). */
function parseHostPorts(env: Env, name: string): Array<{ host: string; port: number }> | undefined {
  const raw = read(env, name, '');
  if (raw === '') return undefined;
  const nodes = raw.split(',').map((part, index) => {
    const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s\[\]:]+)):(\d{1,5})$/.exec(part.trim());
    const host = match?.[1] ?? match?.[2];
    const port = Number(match?.[3]);
    if (!host || (match?.[1] !== undefined && isIP(host) !== 6) || port < 1 || port > 65535) {
      // The entry is quoted only when it cannot hold a credential (a pasted redis://user:password@… URL).
      const entry = /[@/]/.test(part) ? `entry ${index + 1}, which looks like a URL (not quoted: it may hold a password)` : `"${part.trim()}"`;
      throw new ConfigError(name, `must list host:port pairs separated by commas, an IPv6 address in brackets ([::1]:7000) (got ${entry})`);
    }
    return Object.freeze({ host, port });
  });
  return Object.freeze(nodes) as Array<{ host: string; port: number }>;
}

/**
 * REDIS_CLUSTER_NODES with REDIS_CLUSTER_TLS, REDIS_USERNAME and REDIS_PASSWORD. A cluster and
 * another way to Redis (REDIS_URL, the Sentinel variables) is a mix the process refuses, as it
 * refuses cluster settings without REDIS_CLUSTER_NODES: one line names the variables, never a value.
 */
function parseRedisCluster(env: Env): RedisClusterConfig | undefined {
  const nodes = parseHostPorts(env, 'REDIS_CLUSTER_NODES');
  const set = (name: string) => env[name] !== undefined && env[name] !== '';
  const clusterOnly = ['REDIS_CLUSTER_TLS', 'REDIS_USERNAME', 'REDIS_PASSWORD'].filter(set);
  if (nodes === undefined) {
    if (clusterOnly.length > 0) {
      throw new ConfigError(clusterOnly.join(', '), `${clusterOnly.length > 1 ? 'are' : 'is'} set but REDIS_CLUSTER_NODES is not: ${clusterOnly.length > 1 ? 'they apply' : 'it applies'} to a Redis Cluster only (a single Redis takes its credentials and TLS from REDIS_URL)`);
    }
    return undefined;
  }
  const mixed = ['REDIS_URL', 'REDIS_SENTINELS', 'REDIS_SENTINEL_NAME', 'REDIS_SENTINEL_PASSWORD', 'REDIS_SENTINEL_USERNAME'].filter(set);
  if (mixed.length > 0) {
    throw new ConfigError('REDIS_CLUSTER_NODES', `and ${mixed.join(', ')} are both set: use a Redis Cluster (REDIS_CLUSTER_NODES) or a single Redis (REDIS_URL, with REDIS_SENTINELS for Sentinel), not both`);
  }
  const password = env.REDIS_PASSWORD === '' ? undefined : env.REDIS_PASSWORD;
  const username = env.REDIS_USERNAME === '' ? undefined : env.REDIS_USERNAME;
  if (username !== undefined && password === undefined) throw new ConfigError('REDIS_USERNAME', 'needs REDIS_PASSWORD too');
  if (username !== undefined && !/^[\x21-\x7e]{1,256}$/.test(username)) {
    throw new ConfigError('REDIS_USERNAME', 'must be 1-256 printable characters without spaces');
  }
  if (password !== undefined && password.length > 4096) throw new ConfigError('REDIS_PASSWORD', 'must be at most 4096 characters');
  return Object.freeze({ nodes, tls: parseBoolean(env, 'REDIS_CLUSTER_TLS', false), username, password });
}

/** SECRETS_ENCRYPTION_KEY: comma-separated base64 keys of 32 bytes, newest first; the message never quotes them. */
function parseSecretsEncryptionKeys(env: Env): readonly EncryptionKey[] {
  const raw = env.SECRETS_ENCRYPTION_KEY;
  if (raw === undefined || raw.trim() === '') return Object.freeze([]);
  const parsed = parseEncryptionKeys(raw);
  if ('problem' in parsed) throw new ConfigError('SECRETS_ENCRYPTION_KEY', parsed.problem);
  return Object.freeze(parsed.keys);
}

/** For a process's main: the configuration, or one line on stderr naming the bad variable and exit 1. */
export function loadConfigOrExit(env: Env = process.env): Config {
  try {
    return loadConfig(env);
  } catch (error) {
    console.error(error instanceof ConfigError ? error.message : `invalid configuration: ${String(error)}`);
    process.exit(1);
  }
}
