import {
  enqueueDeliveries,
  enqueueFanout,
  findEventsAwaitingFanout,
  findOverdueDeliveries,
  purgeAbandonedRevocations,
  type Db,
  type Logger,
  type Queues,
} from '@svc/core';

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
}

/**
 * Re-queues from Postgres whatever Redis no longer holds: events not fanned out and due
 * deliveries with no attempt on the wire. Jobs have deterministic ids, so a job that still
 * exists is not duplicated.
 */
export async function sweepOnce(deps: SweepDeps): Promise<{ events: number; deliveries: number; purged: number }> {
  const events = await findEventsAwaitingFanout(deps.db, UNFANNED_AFTER_MS, BATCH);
  for (const eventId of events) await enqueueFanout(deps.queues, eventId);
  const overdue = await findOverdueDeliveries(deps.db, OVERDUE_AFTER_MS, BATCH);
  await enqueueDeliveries(deps.queues, overdue.map((delivery) => ({ ...delivery, delayMs: 0 })));
  const purged = await purgeAbandonedRevocations(deps.db, deps.webhookTimeoutMs + 60_000);
  if (events.length || overdue.length || purged) {
    deps.logger.debug('sweep re-queued work', { events: events.length, deliveries: overdue.length, purged });
  }
  return { events: events.length, deliveries: overdue.length, purged };
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
