import { type Db, type Logger } from '@svc/core';
import { purgeExpiredHistory, type PurgeResult } from '@svc/core/dispatcher';
import type { DispatcherMetrics } from '../metrics/dispatcher-metrics.js';

/** How often each dispatcher tries the purge; only one at a time gets the lock. */
export const RETENTION_INTERVAL_MS = 60_000;
/** Small batches: each is one short transaction, so the purge never blocks deliveries for long. */
export const RETENTION_BATCH = 500;
/** At most this many batches per run (50 000 deliveries), the rest at the next interval. */
export const RETENTION_MAX_BATCHES = 100;

export interface RetentionDeps {
  db: Db;
  logger: Logger;
  retentionDays: number;
  metrics: Pick<DispatcherMetrics, 'purged'>;
}

/** Runs the retention purge every interval, never two at once in one process; stop() waits for a run. */
export class RetentionPurger {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;

  constructor(
    private readonly deps: RetentionDeps,
    private readonly intervalMs = RETENTION_INTERVAL_MS,
  ) {}

  async runOnce(): Promise<PurgeResult> {
    const result = await purgeExpiredHistory(this.deps.db, {
      retentionDays: this.deps.retentionDays,
      batchSize: RETENTION_BATCH,
      maxBatches: RETENTION_MAX_BATCHES,
    });
    this.deps.metrics.purged(result);
    if (result.deliveries || result.events) {
      this.deps.logger.info('retention purge deleted expired history', {
        deliveries: result.deliveries,
        attempts: result.attempts,
        events: result.events,
      });
    }
    return result;
  }

  start(): void {
    if (this.deps.retentionDays <= 0) return;
    const tick = () => {
      this.running = this.runOnce()
        .catch((error: Error) => this.deps.logger.warn('retention purge failed; will try again', { error: error.message }))
        .finally(() => {
          this.running = undefined;
          if (this.timer !== undefined) this.timer = setTimeout(tick, this.intervalMs);
        });
    };
    // Not at once: a fleet restarting together would all race for the lock in the same second.
    this.timer = setTimeout(tick, Math.round(this.intervalMs * (0.5 + Math.random() / 2)));
  }

  /** True while a next run is scheduled: never after stop(), nor with retentionDays 0. */
  scheduled(): boolean {
    return this.timer !== undefined;
  }

  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
