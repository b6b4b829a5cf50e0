import { Worker } from 'bullmq';
import { ATTEMPT_LEASE_MARGIN_MS, createQueues, createRedis, createSecretBox, endIfNeverReady, hasBeenReady, FANOUT_QUEUE, type Config, type Db, type DeliveryJob, type FanoutJob, type Logger } from '@svc/core';
import { type PurgeResult } from '@svc/core/dispatcher';
import { checkReadiness, type Readiness } from './health/dispatcher-health.js';
import { DispatcherMetrics } from './metrics/dispatcher-metrics.js';
import { RetentionPurger } from './sweeps/retention-purger.js';
import { WebhookClient } from './http/webhook-client.js';
import { createAttemptBatches } from './processors/attempt-batches.js';
import { createDeliverProcessor } from './processors/deliver.processor.js';
import { createFanoutProcessor } from './processors/fanout.processor.js';
import { FairSlots } from './processors/fair-slots.js';
import { ShardBudget } from './processors/shard-budget.js';
import { SigningSecrets } from './processors/signing-secrets.js';
import { SubscriptionAccounts } from './processors/subscription-accounts.js';
import { RetiredQueues } from './sweeps/retired-queues.js';
import { Sweeper } from './sweeps/sweeper.js';

/** A job whose worker died is handed to another after at most this long. */
const JOB_LOCK_MS = 15_000;
const STALLED_CHECK_MS = 5_000;
/** Fan-out jobs taken at once: the ones taken together are fanned out by one statement. */
const FANOUT_CONCURRENCY = 32;
/** Slots beyond DISPATCHER_CONCURRENCY for accounts with no attempt in flight, as a part of it (docs/architecture.md). */
const IDLE_ACCOUNT_RESERVE = 0.2;
/** Beyond three sweep intervals, how long a queue stays marked worked: a sweep's own run time. */
const WORKED_MARGIN_MS = 2_000;
/** Claims waiting this long with none answered: the claim loop makes no progress, and /readyz says so. */
export const CLAIM_STALL_MS = 15_000;

/**
 * The dispatcher's slots: DISPATCHER_CONCURRENCY attempts in flight for accounts that have some,
 * a fifth more for accounts with none (never more than the sockets allow), and as many attempts as
 * DISPATCHER_CONCURRENCY waiting in this process for a slot. The delivery worker takes all of
 * those jobs and one more, so however many wait, a job of another account is still picked up.
 */
function slotsFor(config: Pick<Config, 'dispatcherConcurrency' | 'perSubscriptionConcurrency' | 'webhookMaxSockets'>) {
  const slots = config.dispatcherConcurrency;
  const reserve = Math.max(0, Math.min(Math.ceil(slots * IDLE_ACCOUNT_RESERVE), config.webhookMaxSockets - slots));
  const options = { slots, reserve, perSubscription: config.perSubscriptionConcurrency, maxWaiting: slots };
  return { options, workerConcurrency: slots + reserve + options.maxWaiting + 1 };
}

export interface DispatcherDeps {
  config: Pick<
    Config,
    | 'databaseUrl'
    | 'redisUrl'
    | 'redisSentinels'
    | 'redisSentinelName'
    | 'redisSentinelAuth'
    | 'redisCluster'
    | 'queuePrefix'
    | 'queueShards'
    | 'webhookTimeoutMs'
    | 'webhookRetryDelaysMs'
    | 'webhookAllowPrivateTargets'
    | 'webhookMaxSockets'
    | 'webhookIdleSocketTimeoutMs'
    | 'webhookDnsTimeoutMs'
    | 'webhookDnsTries'
    | 'webhookDnsServers'
    | 'dispatcherConcurrency'
    | 'perSubscriptionConcurrency'
    | 'sweepIntervalMs'
    | 'deliveryRetentionDays'
    | 'secretsEncryptionKeys'
  >;
  db: Db;
  logger: Logger;
  /** Extra CAs to trust for receivers (tests); operators use NODE_EXTRA_CA_CERTS. */
  ca?: string | Buffer;
  /** The metrics main.ts serves on METRICS_PORT; else a registry of this dispatcher's own. */
  metrics?: DispatcherMetrics;
  /** The pool /readyz pings Postgres through (main.ts: the operator pool); default `db`. */
  operatorDb?: Db;
  /** How long claims may wait with none answered before /readyz says they are stalled (default CLAIM_STALL_MS). */
  claimStallMs?: number;
}

export interface Dispatcher {
  start(): void;
  /** Sockets to receivers this dispatcher holds: in use and idle. */
  socketCounts(): { active: number; idle: number };
  /** Stops taking jobs, lets attempts in flight finish, closes its Redis connections. The db is the caller's. */
  stop(): Promise<void>;
  readonly metrics: DispatcherMetrics;
  /** What /readyz answers: Postgres and Redis answer, every worker runs. */
  readiness(): Promise<Readiness>;
  /** One retention purge now (the purger also runs one every minute on its own). */
  purgeHistory(): Promise<PurgeResult>;
}

/**
 * Builds a dispatcher: fan-out and delivery workers plus the sweep. It does nothing until start().
 * Without SECRETS_ENCRYPTION_KEY it warns, once, that secrets are stored in plain text.
 */
export function createDispatcher(deps: DispatcherDeps): Dispatcher {
  const { config, db, logger } = deps;
  const signing = new SigningSecrets(createSecretBox(config.secretsEncryptionKeys, logger), logger);
  const producerRedis = createRedis(config, 'bullmq');
  const workerRedis = createRedis(config, 'bullmq');
  for (const connection of [producerRedis, workerRedis]) {
    connection.on('error', (error: Error) => logger.warn('redis connection error', { error: error.message }));
  }
  const queues = createQueues(producerRedis, config.queuePrefix, config.queueShards);
  const metrics = deps.metrics ?? new DispatcherMetrics();
  const fair = slotsFor(config);
  const client = new WebhookClient({
    timeoutMs: config.webhookTimeoutMs,
    allowPrivateTargets: config.webhookAllowPrivateTargets,
    // Every slot may go to one host: the shared ones and the reserve.
    maxSocketsPerHost: fair.options.slots + fair.options.reserve,
    maxTotalSockets: config.webhookMaxSockets,
    // Idle sockets kept per host: as many as may be in use, so a burst to one host does not
    // close sockets it is about to need again (a new TLS handshake costs more CPU than the POST).
    // Idle sockets stay bounded in all (WEBHOOK_MAX_SOCKETS) and in time (the idle timeout).
    maxFreeSocketsPerHost: config.dispatcherConcurrency,
    idleSocketTimeoutMs: config.webhookIdleSocketTimeoutMs,
    dns: { timeoutMs: config.webhookDnsTimeoutMs, tries: config.webhookDnsTries, servers: config.webhookDnsServers },
    ...(deps.ca ? { ca: deps.ca } : {}),
  });
  const slots = new FairSlots(fair.options);
  const leaseMs = config.webhookTimeoutMs + ATTEMPT_LEASE_MARGIN_MS;
  const batches = createAttemptBatches({ db, leaseMs, retryDelaysMs: config.webhookRetryDelaysMs });
  const accounts = new SubscriptionAccounts(db);
  const claimsStalledForMs = () => Math.max(batches.claimsStalledForMs(), accounts.stalledForMs());
  metrics.watch({ queues, db, slots, redis: producerRedis, claimsStalledForMs });
  const workerOptions = {
    connection: workerRedis,
    prefix: config.queuePrefix,
    autorun: false,
    removeOnComplete: { count: 0 },
    removeOnFail: { count: 0 },
    lockDuration: Math.max(JOB_LOCK_MS, config.webhookTimeoutMs + 5_000),
    stalledInterval: STALLED_CHECK_MS,
  };
  // The workers are made once their connection is first ready (at once, normally): a worker made on
  // a connection that never becomes ready (sentinels unreachable or refusing the password) cannot be
  // closed cleanly — BullMQ drops its listeners on close while its wait for that connection can still
  // fail, an unhandled rejection in the process that stopped the dispatcher.
  //
  // One delivery worker per shard, all feeding the one processor and its FairSlots: the slots, the
  // waiting line and the per-account and per-subscription parts are this process's, whichever shard
  // a job came from. The workers share one budget of jobs (ShardBudget): a busy shard may take all of
  // it, so it never leaves a slot idle, and together they never hold more than the slots can use.
  const makeWorkers = (): Array<Worker<FanoutJob> | Worker<DeliveryJob>> => {
    const fanoutWorker = new Worker<FanoutJob>(FANOUT_QUEUE, createFanoutProcessor({ db, queues, logger }), {
      ...workerOptions,
      concurrency: FANOUT_CONCURRENCY,
    });
    const deliver = createDeliverProcessor({ db, queues, client, signing, slots, accounts, leaseMs, batches, logger, metrics });
    const budget = new ShardBudget(fair.workerConcurrency, queues.deliveries.length);
    const deliveryWorkers = queues.deliveries.map(
      (queue, shard) => new Worker<DeliveryJob>(queue.name, budget.track(shard, deliver), { ...workerOptions, concurrency: budget.concurrencyOf(shard) }),
    );
    budget.attach(deliveryWorkers);
    for (const worker of [fanoutWorker, ...deliveryWorkers]) {
      worker.on('failed', (job, error) => {
        logger.warn('job failed; the sweep will re-queue it when due', { queue: worker.name, jobId: job?.id, error: error.message });
      });
      worker.on('error', (error) => logger.warn('worker error', { queue: worker.name, error: error.message }));
    }
    return [fanoutWorker, ...deliveryWorkers];
  };
  let workers: ReturnType<typeof makeWorkers> = [];
  const startWorkers = () => {
    workers = makeWorkers();
    for (const worker of workers) void worker.run();
  };
  // A queue counts as worked by this dispatcher for three sweeps after each: a dispatcher on another
  // DISPATCHER_QUEUE_SHARDS (a rolling change) leaves it alone meanwhile.
  const retired = new RetiredQueues({ redis: producerRedis, queues, prefix: config.queuePrefix, logger, workedForMs: 3 * config.sweepIntervalMs + WORKED_MARGIN_MS });
  const sweeper = new Sweeper({ db, queues, logger, webhookTimeoutMs: config.webhookTimeoutMs, metrics, retired }, config.sweepIntervalMs);
  const retention = new RetentionPurger({ db, logger, retentionDays: config.deliveryRetentionDays, metrics });

  let stopped: Promise<void> | undefined;
  return {
    metrics,
    readiness: () =>
      checkReadiness({
        db: deps.operatorDb ?? db,
        redis: producerRedis,
        workersRunning: () => workers.length > 0 && workers.every((worker) => worker.isRunning()),
        claimsStalledForMs: () => {
          const stalled = claimsStalledForMs();
          return stalled >= (deps.claimStallMs ?? CLAIM_STALL_MS) ? stalled : 0;
        },
      }),
    purgeHistory: () => retention.runOnce(),
    socketCounts: () => client.socketCounts(),
    start() {
      if (hasBeenReady(workerRedis)) startWorkers();
      else workerRedis.once('ready', startWorkers);
      sweeper.start();
      retention.start();
      logger.info('dispatcher started', { concurrency: config.dispatcherConcurrency, prefix: config.queuePrefix, shards: config.queueShards });
    },
    stop() {
      stopped ??= (async () => {
        await Promise.all([sweeper.stop(), retention.stop()]);
        workerRedis.off('ready', startWorkers);
        // Attempts waiting for a slot go back to the queue; those in flight finish.
        const closing = workers.map((worker) => worker.close());
        slots.stop();
        await Promise.all(closing);
        await endIfNeverReady(producerRedis);
        await queues.close();
        client.close();
        producerRedis.disconnect();
        workerRedis.disconnect();
        logger.info('dispatcher stopped');
      })();
      return stopped;
    },
  };
}
