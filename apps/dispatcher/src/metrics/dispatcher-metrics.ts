import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { createProcessRegistry, pingDb, pingRedis, PoolGauges, readWithin, type Db, type Queues, type RedisClient } from '@svc/core';
import { countPendingDeliveries, type RecordResult } from '@svc/core/dispatcher';
import { FAILURE_CLASSES } from '../http/attempt-failure.js';
import type { SentAttempt } from '../http/webhook-client.js';

/** What an attempt came to, as counted: one of these five, never anything a customer chose. */
export type AttemptLabel = 'delivered' | 'retry' | 'failed' | 'blocked' | 'stale';
/**
 * The job an attempt came from: `background` for one queued with a priority (a recovery's first
 * attempts, which wait behind all other work by design), `normal` for any other.
 */
export type JobPriority = 'normal' | 'background';
/** Purged rows, by table. */
export interface PurgedRows {
  deliveries: number;
  attempts: number;
  events: number;
}

/** What the dispatcher's fair slots count right now (FairSlots.counts()). */
export interface SlotCounts {
  counts(): { inFlight: number; waiting: number; accounts: number };
}

/** Where the gauges read from at scrape time (createDispatcher gives them). */
export interface MetricSources {
  queues: Pick<Queues, 'fanout' | 'deliveries'>;
  db: Db;
  slots?: SlotCounts;
  /** The Redis connection /readyz pings (the dependency gauge pings it too). */
  redis?: RedisClient;
  /** How long claims have waited with none answered (0 when none waits), as /readyz reads it. */
  claimsStalledForMs?: () => number;
}

/** A scrape waits at most this long for Redis or Postgres; the gauge keeps its last value otherwise. */
const SCRAPE_READ_MS = 1_000;
/**
 * The job states the queue gauge shows. BullMQ keeps a job added with a priority (a background
 * job) in `prioritized`, not `waiting`, and the jobs of a paused queue in `paused`.
 */
const QUEUE_STATES = ['waiting', 'prioritized', 'paused', 'delayed', 'active'] as const;
const SECONDS_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const LATENESS_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800];

/** The priority label of a job with BullMQ's `opts.priority` (none, or 0, for a normal job). */
export function jobPriority(priority: number | undefined): JobPriority {
  return priority ? 'background' : 'normal';
}

/** The label of an attempt: the SSRF guard's refusal first (it also retries or fails), then the recorded result. */
export function attemptLabel(outcome: Pick<SentAttempt, 'failure'>, result: RecordResult): AttemptLabel {
  if (outcome.failure === 'blocked') return 'blocked';
  return result.kind;
}

/**
 * The dispatcher's metrics on a registry of its own. Labels are outcomes, queue names, states and
 * table names only: nothing names an account, a subscription, a URL or a secret.
 */
export class DispatcherMetrics {
  readonly registry: Registry;
  private readonly attempts: Counter<'outcome'>;
  private readonly failures: Counter<'class'>;
  private readonly oldestDue: Gauge;
  private readonly pools: PoolGauges;
  private readonly duration: Histogram;
  private readonly lateness: Histogram<'priority'>;
  private readonly autoDisabled: Counter;
  private readonly requeued: Counter<'kind'>;
  private readonly purgedRows: Counter<'table'>;
  private readonly claimsBusy: Counter;
  private readonly recordRetries: Counter;
  private sources: MetricSources | undefined;
  /** The operator pool main.ts gives: the pending gauge reads through it, never through the delivery pool. */
  private readonly scrapeDb: Db | undefined;

  /**
   * `options.db`: the pool scrape-time reads of Postgres use (main.ts: the operator pool), whatever
   * pool watch() is later given; without it they use that one (tests that build a dispatcher alone).
   */
  constructor(registry: Registry = createProcessRegistry(), options: { db?: Db } = {}) {
    this.registry = registry;
    this.scrapeDb = options.db;
    this.attempts = new Counter({
      name: 'svc_dispatcher_attempts_total',
      help: 'Delivery attempts made, by outcome: delivered, retry, failed (permanently), blocked (SSRF guard), stale (recorded elsewhere first)',
      labelNames: ['outcome'],
      registers: [registry],
    });
    for (const outcome of ['delivered', 'retry', 'failed', 'blocked', 'stale']) this.attempts.inc({ outcome }, 0);
    this.failures = new Counter({
      name: 'svc_dispatcher_attempt_failures_total',
      help: `Delivery attempts that failed, by class: ${FAILURE_CLASSES.join(', ')}`,
      labelNames: ['class'],
      registers: [registry],
    });
    for (const failure of FAILURE_CLASSES) this.failures.inc({ class: failure }, 0);
    this.oldestDue = new Gauge({
      name: 'svc_dispatcher_oldest_due_delivery_age_seconds',
      help: 'How long the delivery longest past its due time, with no attempt on the wire, has been due (0 when none); measured by each sweep, shared by every dispatcher',
      registers: [registry],
    });
    this.pools = new PoolGauges(registry, 'svc_dispatcher');
    this.duration = new Histogram({
      name: 'svc_dispatcher_attempt_duration_seconds',
      help: 'Duration of one delivery attempt (connect to end of response, or error)',
      buckets: SECONDS_BUCKETS,
      registers: [registry],
    });
    this.lateness = new Histogram({
      name: 'svc_dispatcher_attempt_lateness_seconds',
      help: 'How long after its due time an attempt was claimed, by the priority of its job: normal, or background (a recovery, behind all other work by design)',
      labelNames: ['priority'],
      buckets: LATENESS_BUCKETS,
      registers: [registry],
    });
    for (const priority of ['normal', 'background']) this.lateness.zero({ priority });
    this.autoDisabled = new Counter({
      name: 'svc_dispatcher_subscriptions_auto_disabled_total',
      help: 'Subscriptions disabled after too many consecutive permanently failed deliveries',
      registers: [registry],
    });
    this.requeued = new Counter({
      name: 'svc_dispatcher_sweep_requeued_total',
      help: 'Jobs the sweep queued again because Redis no longer held them, by kind (fanout, delivery)',
      labelNames: ['kind'],
      registers: [registry],
    });
    this.purgedRows = new Counter({
      name: 'svc_dispatcher_retention_purged_rows_total',
      help: 'Rows deleted by the retention purge (DELIVERY_RETENTION_DAYS), by table',
      labelNames: ['table'],
      registers: [registry],
    });
    this.claimsBusy = new Counter({
      name: 'svc_dispatcher_claims_busy_total',
      help: 'Claims put back because another transaction held the delivery or its subscription (a revocation, an auto-disable)',
      registers: [registry],
    });
    this.recordRetries = new Counter({
      name: 'svc_dispatcher_record_retries_total',
      help: 'Records of a known outcome retried after Postgres failed them (deadlock, lock or statement timeout, lost connection)',
      registers: [registry],
    });
    new Gauge({
      name: 'svc_dispatcher_slots',
      help: 'This dispatcher’s attempt slots: in_flight (HTTP requests on the wire) and waiting (attempts held for a slot)',
      labelNames: ['state'],
      registers: [registry],
      collect() {
        const counts = metrics.sources?.slots?.counts();
        if (!counts) return;
        this.set({ state: 'in_flight' }, counts.inFlight);
        this.set({ state: 'waiting' }, counts.waiting);
      },
    });
    new Gauge({
      name: 'svc_dispatcher_busy_accounts',
      help: 'Accounts with attempts in flight or waiting in this dispatcher (a count, never which)',
      registers: [registry],
      collect() {
        const counts = metrics.sources?.slots?.counts();
        if (counts) this.set(counts.accounts);
      },
    });
    new Gauge({
      name: 'svc_dispatcher_claims_stalled_seconds',
      help: 'How long this dispatcher’s claims have waited for Postgres with none answered (0 while claims are answered); /readyz says claims: stalled from 15 s',
      registers: [registry],
      collect() {
        const stalledMs = metrics.sources?.claimsStalledForMs?.();
        if (stalledMs !== undefined) this.set(stalledMs / 1000);
      },
    });
    new Gauge({
      name: 'svc_dispatcher_dependency_up',
      help: '1 when the dependency (postgres, redis) answered this scrape’s ping within 1 s, as /readyz asks, else 0',
      labelNames: ['dependency'],
      registers: [registry],
      async collect() {
        const sources = metrics.sources;
        if (!sources) return;
        const [postgres, redis] = await Promise.all([
          pingDb(metrics.scrapeDb ?? sources.db, SCRAPE_READ_MS),
          sources.redis ? pingRedis(sources.redis, SCRAPE_READ_MS) : Promise.resolve(undefined),
        ]);
        this.set({ dependency: 'postgres' }, postgres ? 1 : 0);
        if (redis !== undefined) this.set({ dependency: 'redis' }, redis ? 1 : 0);
      },
    });
    for (const kind of ['fanout', 'delivery']) this.requeued.inc({ kind }, 0);
    for (const table of ['deliveries', 'delivery_attempts', 'events']) this.purgedRows.inc({ table }, 0);
    const metrics = this;
    new Gauge({
      name: 'svc_dispatcher_queue_jobs',
      help: 'Jobs in the BullMQ queues, by queue (fanout; deliver, summed over its shards) and state (waiting, prioritized, paused, delayed, active); shared by every dispatcher',
      labelNames: ['queue', 'state'],
      registers: [registry],
      async collect() {
        const queues = metrics.sources?.queues;
        if (!queues) return;
        // Labelled as before the queues were sharded and hash-tagged: `fanout`, and `deliver` summing every shard.
        const read = (queue: (typeof queues.deliveries)[number] | typeof queues.fanout) => readWithin(SCRAPE_READ_MS, () => queue.getJobCounts(...QUEUE_STATES));
        const [fanout, ...shards] = await Promise.all([read(queues.fanout), ...queues.deliveries.map(read)]);
        if (fanout) for (const state of QUEUE_STATES) this.set({ queue: 'fanout', state }, fanout[state] ?? 0);
        // A shard that did not answer in time leaves the sum at its last value rather than under-counting.
        if (shards.every((counts) => counts !== undefined)) {
          for (const state of QUEUE_STATES) this.set({ queue: 'deliver', state }, shards.reduce((sum, counts) => sum + (counts?.[state] ?? 0), 0));
        }
      },
    });
    new Gauge({
      name: 'svc_dispatcher_pending_deliveries',
      help: 'Deliveries pending in PostgreSQL (to be sent or retried), across all dispatchers',
      registers: [registry],
      async collect() {
        const db = metrics.scrapeDb ?? metrics.sources?.db;
        const pending = db ? await readWithin(SCRAPE_READ_MS, () => countPendingDeliveries(db)) : undefined;
        if (pending !== undefined) this.set(pending);
      },
    });
  }

  /** Where the queue, pending, slot, claim, dependency and pool gauges read from at scrape time. */
  watch(sources: MetricSources): void {
    this.sources = sources;
    this.pools.watch({ main: sources.db, ...(this.scrapeDb ? { operator: this.scrapeDb } : {}) });
  }

  /** What the sweep measured: the age of the oldest delivery due and not on the wire. */
  oldestDueMeasured(seconds: number): void {
    this.oldestDue.set(seconds);
  }

  claimBusy(): void {
    this.claimsBusy.inc();
  }

  recordRetried(): void {
    this.recordRetries.inc();
  }

  attemptFinished(outcome: Pick<SentAttempt, 'failure' | 'durationMs'>, result: RecordResult, lateMs: number, priority: JobPriority = 'normal'): void {
    this.attempts.inc({ outcome: attemptLabel(outcome, result) });
    if (outcome.failure !== null) this.failures.inc({ class: outcome.failure });
    this.duration.observe(outcome.durationMs / 1000);
    this.lateness.observe({ priority }, Math.max(0, lateMs) / 1000);
    if (result.kind === 'failed' && result.disabledSubscription) this.autoDisabled.inc();
  }

  swept(requeued: { events: number; deliveries: number }): void {
    this.requeued.inc({ kind: 'fanout' }, requeued.events);
    this.requeued.inc({ kind: 'delivery' }, requeued.deliveries);
  }

  purged(rows: PurgedRows): void {
    this.purgedRows.inc({ table: 'deliveries' }, rows.deliveries);
    this.purgedRows.inc({ table: 'delivery_attempts' }, rows.attempts);
    this.purgedRows.inc({ table: 'events' }, rows.events);
  }
}
