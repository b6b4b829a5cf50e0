import { fanoutJobId, requeueDeliveriesUnlessLive, requeueUnlessLive, type Db, type Logger, type Queues } from '@svc/core';
import { findEventsAwaitingFanout, findOverdueDeliveries, oldestDueDeliveryAgeSeconds, purgeAbandonedRevocations } from '@svc/core/dispatcher';
import type { DispatcherMetrics } from '../metrics/dispatcher-metrics.js';
import type { RetiredQueues } from './retired-queues.js';

/** A due delivery without an attempt for this long may have lost its job. */
const OVERDUE_AFTER_MS = 2_000;
/** An event not fanned out this long after it was recorded may have lost its job. */
const UNFANNED_AFTER_MS = 2_000;
const BATCH = 1_000;

export interface SweepDeps {
  db: Db;
  queues: Queues;
  logger: Logger;
  webhookTimeoutMs: number;
  metrics: Pick<DispatcherMetrics, 'swept' | 'oldestDueMeasured'>;
  /** Moves jobs off queues no longer in use (an earlier shard count); absent, none are looked for. */
  retired?: Pick<RetiredQueues, 'moveOnce'>;
}

/**
 * Measures how late the oldest due delivery is, then re-queues from Postgres whatever Redis no
 * longer holds: events not fanned out and due deliveries with no attempt on the wire, unless their
 * job (deterministic id) is still live. Returns how many jobs it queued again.
 */
export async function sweepOnce(deps: SweepDeps): Promise<{ events: number; deliveries: number; purged: number; moved: number }> {
  // The retired-queue pass (Redis alone) starts first: it also marks this dispatcher's queues worked,
  // which must not lapse while Postgres is away. Its failure is the pass's own, logged, not the sweep's.
  const moving = (deps.retired?.moveOnce() ?? Promise.resolve(0)).catch((error: Error) => {
    deps.logger.warn('moving jobs off queues no longer in use failed; will try again', { error: error.message });
    return 0;
  });
  // From Postgres alone: while Redis is away the sweep fails below, and this is the figure that shows it.
  deps.metrics.oldestDueMeasured(await oldestDueDeliveryAgeSeconds(deps.db).finally(() => moving));
  // Before the overdue check: a job moved here is live on its shard, not queued a second time.
  const moved = await moving;
  const unfanned = await findEventsAwaitingFanout(deps.db, UNFANNED_AFTER_MS, BATCH);
  const events = await requeueUnlessLive(
    deps.queues.fanout,
    unfanned.map((eventId) => ({ name: 'f', data: { eventId }, jobId: fanoutJobId(eventId) })),
  );
  const overdue = await findOverdueDeliveries(deps.db, OVERDUE_AFTER_MS, BATCH);
  const deliveries = await requeueDeliveriesUnlessLive(deps.queues, overdue);
  deps.metrics.swept({ events, deliveries });
  const purged = await purgeAbandonedRevocations(deps.db, deps.webhookTimeoutMs + 60_000);
  if (events || deliveries || purged) {
    deps.logger.info('sweep re-queued work Redis no longer held', { events, deliveries, purged });
  }
  return { events, deliveries, purged, moved };
}

/** Runs sweepOnce every interval, never two at once; stop() waits for a sweep in progress. */
export class Sweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;

  constructor(
    private readonly deps: SweepDeps,
    private readonly intervalMs: number,
  ) {}

  start(): void {
    const tick = () => {
      this.running = sweepOnce(this.deps)
        .catch((error: Error) => this.deps.logger.warn('sweep failed; will try again', { error: error.message }))
        .finally(() => {
          this.running = undefined;
          if (this.timer !== undefined) this.timer = setTimeout(tick, this.intervalMs);
        });
    };
    this.timer = setTimeout(tick, 0);
  }

  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
