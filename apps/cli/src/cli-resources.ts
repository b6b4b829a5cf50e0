import { createDb, createQueues, createRedis, createSecretBox, dbBoundsOf, hasBeenReady, loadConfig, SecretBox, type Config, type Db, type Logger, type ProducerDeps, type Queues, type RedisClient } from '@svc/core';
import { type RedeliveryDeps } from '@svc/core/operator';
import type { TextSink } from './cli-io.js';

export type Env = Record<string, string | undefined>;

/** A command runs one query or one transaction at a time; a second connection is headroom. */
const CLI_DB_POOL_MAX = 2;
/** The longest close() waits for the queues' start-ups to settle. */
const QUEUE_SETTLE_MS = 5_000;

/**
 * The configuration and connections of one run, each opened on first use so that a command
 * opens only what it needs, and all closed by `close()` so the process can end by itself.
 */
export class CliResources {
  private loadedConfig: Config | undefined;
  private openDb: Db | undefined;
  private openRedis: RedisClient | undefined;
  private openQueues: Queues | undefined;

  constructor(
    private readonly env: Env | undefined,
    private readonly stderr: TextSink,
  ) {}

  /** The configuration, parsed once; throws ConfigError naming the first bad variable. */
  config(): Config {
    this.loadedConfig ??= this.env === undefined ? loadConfig() : loadConfig(this.env);
    return this.loadedConfig;
  }

  /** The configuration if it was loaded in this run, without loading it. */
  configIfLoaded(): Config | undefined {
    return this.loadedConfig;
  }

  db(): Db {
    this.openDb ??= createDb(this.config().databaseUrl, { poolMax: CLI_DB_POOL_MAX, bounds: dbBoundsOf(this.config()) });
    return this.openDb;
  }

  /** What the event producers of core need, as any producer gives them: the database, the queues and a logger. */
  producerDeps(): ProducerDeps {
    return { db: this.db(), queues: this.queues(), logger: this.stderrLogger() };
  }

  /** What a redelivery needs: the same. */
  redeliveryDeps(): RedeliveryDeps {
    return { db: this.db(), queues: this.queues(), logger: this.stderrLogger() };
  }

  /**
   * The SecretBox of SECRETS_ENCRYPTION_KEY's keys. A command that writes a secret asks for it
   * `forWriting`: without keys it then warns on stderr that the secret is stored in plain text.
   */
  secrets(use: 'forWriting' | 'forReading'): SecretBox {
    const keys = this.config().secretsEncryptionKeys;
    return use === 'forWriting' ? createSecretBox(keys, this.stderrLogger()) : new SecretBox(keys);
  }

  /** The Redis connection of this run, opened on first use. */
  redis(): RedisClient {
    if (this.openRedis === undefined) {
      const redis = createRedis(this.config(), 'fast-fail');
      // A one-shot command has nothing to wait for: on the first connection error it stops
      // reconnecting, so a pending command fails at once (a producer then leaves the job to the
      // dispatchers' sweep, the event being already committed) instead of hanging.
      redis.on('error', () => redis.disconnect());
      this.openRedis = redis;
    }
    return this.openRedis;
  }

  /**
   * Both queues, opened (with Redis) when first touched, i.e. when a producer adds a job after its
   * commit: a command refused by the database, or an event no subscription wants, never connects to Redis.
   */
  private queues(): Pick<Queues, 'fanout' | 'deliveries'> {
    const open = () => (this.openQueues ??= createQueues(this.redis(), this.config().queuePrefix, this.config().queueShards));
    return {
      get fanout() {
        return open().fanout;
      },
      get deliveries() {
        return open().deliveries;
      },
    };
  }

  /**
   * Producers log a failed enqueue. stdout carries the command's result (one JSON object with
   * `--json`), so these log lines go to stderr as JSON lines. Producers and redelivery only call `warn`.
   */
  private stderrLogger(): Pick<Logger, 'warn'> {
    const quiet = this.config().logLevel === 'error';
    const write = (level: string) => (message: string, meta: Record<string, unknown> = {}) => {
      if (!quiet) this.stderr.write(`${JSON.stringify({ level, message, service: 'svc', ...meta })}\n`);
    };
    return { warn: write('warn') as Logger['warn'] };
  }

  /** Closes whatever was opened, queues before their Redis connection; safe to call twice. */
  async close(): Promise<void> {
    const queues = this.openQueues;
    const redis = this.openRedis;
    const db = this.openDb;
    this.openQueues = undefined;
    this.openRedis = undefined;
    this.openDb = undefined;
    if (queues) {
      // Every queue is opened together, the ones this command never used still starting up (BullMQ
      // asks the server's version). On a Redis Cluster that question may wait for a node connection;
      // closed under it, the queue drops its listeners and the ending connection's failure of the
      // question is then an unheard 'error' that kills the process. Once the connection was ready,
      // each start-up settles within seconds (fast-fail): let them, for at most QUEUE_SETTLE_MS. (One
      // never ready has no question in flight, and a cluster client that never was may never end.)
      if (redis && hasBeenReady(redis)) {
        let timer: NodeJS.Timeout | undefined;
        const starts = Promise.allSettled([queues.fanout, ...queues.deliveries].map((queue) => queue.waitUntilReady()));
        await Promise.race([starts, new Promise((resolve) => (timer = setTimeout(resolve, QUEUE_SETTLE_MS)))]);
        clearTimeout(timer);
      }
      await queues.close().catch(() => undefined);
    }
    if (redis) {
      // Disconnecting an ended client again would arm ioredis' 2 s stream-destroy timer for nothing.
      if (redis.status === 'ready') await redis.quit().catch(() => redis.disconnect());
      else if (redis.status !== 'end') redis.disconnect();
    }
    if (db) await db.destroy();
  }
}
