import {
  createDb,
  dbBoundsOf,
  loadConfig,
  type Config,
  type Db,
  type Logger,
  type ProducerDeps,
  type RedeliveryDeps,
  type Queues,
  type Redis,
} from '@svc/core';
import { announcingQueues } from './announcements/announcing-queues.js';
import type { TextSink } from './cli-io.js';
import * as redisCommands from './redis-commands.js';

type RedisCommands = typeof redisCommands;

export type Env = Record<string, string | undefined>;

/** A command runs one query or one transaction at a time; a second connection is headroom. */
const CLI_DB_POOL_MAX = 2;

/**
 * The configuration and connections of one run, each opened on first use so that a command
 * opens only what it needs, and all closed by `close()` so the process can end by itself.
 */
export class CliResources {
  private loadedConfig: Config | undefined;
  private openDb: Db | undefined;
  private openRedis: Redis | undefined;
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

  /**
   * What the event producers of core need: the database, the queues and a logger. The queues
   * here announce the committed event's jobs with a Postgres NOTIFY that the dispatchers turn
   * into jobs (announcing-queues.ts, docs/adr/0015): a producer command never loads BullMQ or
   * ioredis, nor touches Redis.
   */
  producerDeps(): ProducerDeps {
    return { db: this.db(), queues: announcingQueues(this.db(), this.config().queuePrefix), logger: this.stderrLogger() };
  }

  /** What a redelivery needs: the same, with the delivery queue (Redis opened only to enqueue). */
  async redeliveryDeps(): Promise<RedeliveryDeps> {
    return { db: this.db(), queues: await this.lazyQueues(), logger: this.stderrLogger() };
  }

  /** The Redis connection of this run, opened on first use. */
  async redis(): Promise<Redis> {
    const connections = await this.redisCommands();
    this.openRedis ??= connections.openRedis(this.config());
    return this.openRedis;
  }

  /**
   * Both queues, each opened (with Redis) only when first touched, i.e. when a job is added after
   * the commit: a command refused by the database never loads BullMQ or ioredis in the bundle.
   */
  private async lazyQueues(): Promise<Pick<Queues, 'fanout' | 'delivery'>> {
    const connections = await this.redisCommands();
    const openQueues = () => {
      this.openRedis ??= connections.openRedis(this.config());
      this.openQueues ??= connections.openQueues(this.openRedis, this.config().queuePrefix);
      return this.openQueues;
    };
    return {
      get fanout() {
        return openQueues().fanout;
      },
      get delivery() {
        return openQueues().delivery;
      },
    };
  }

  /**
   * The functions of core that reach Redis (see redis-commands.ts). In the bundle the bin runs,
   * ioredis and BullMQ behind them load only when first used (apps/cli/scripts/bundle.mjs).
   */
  async redisCommands(): Promise<RedisCommands> {
    return redisCommands;
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
    if (queues) await queues.close().catch(() => undefined);
    if (redis) {
      // Disconnecting an ended client again would arm ioredis' 2 s stream-destroy timer for nothing.
      if (redis.status === 'ready') await redis.quit().catch(() => redis.disconnect());
      else if (redis.status !== 'end') redis.disconnect();
    }
    if (db) await db.destroy();
  }
}
