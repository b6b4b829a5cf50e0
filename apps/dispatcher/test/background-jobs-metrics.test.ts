import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, createQueues, enqueueDeliveries, newId } from '@svc/core';
import { insertEvent } from '@svc/core/dispatcher';
import { recoverSubscriptionDeliveries } from '@svc/core/operator';
import { scrapeSample, uniqueTag, waitFor } from '@svc/core/testing';
import { DispatcherMetrics } from '../src/metrics/dispatcher-metrics.js';
import { producerOf, waitForDelivery, type DeliveryRow } from './support/delivery-probe.js';
import { createHarness, seedTenant, type Harness } from './support/harness.js';

const STATES = ['waiting', 'prioritized', 'paused', 'delayed', 'active'] as const;

/**
 * Background jobs (a recovery's first attempts, queued with a BullMQ priority): the queue gauge
 * must show them, and their lateness, behind all other work by design, is kept apart from the
 * lateness the alert WebhookAttemptsLate reads.
 */
describe('background (prioritized) delivery jobs in the dispatcher’s metrics', () => {
  let h: Harness;
  let dispatcher: ReturnType<Harness['startDispatcher']>;

  beforeAll(async () => {
    // One sweep at start, then none: only the recovery queues the recovered delivery's job.
    h = await createHarness({ DISPATCHER_SWEEP_INTERVAL_MS: '3600000' });
    dispatcher = h.startDispatcher();
  });
  afterAll(async () => {
    await h.close();
  });

  it('counts prioritized jobs, and a paused queue’s jobs, in svc_dispatcher_queue_jobs, as a real BullMQ queue holds them', async () => {
    // Queues of their own (no worker takes from them), read by a metrics object as a dispatcher's is.
    const queues = createQueues(h.redis, `${h.config.queuePrefix}-gauge`, 1);
    const metrics = new DispatcherMetrics();
    metrics.watch({ queues, db: h.db });
    const job = () => ({ deliveryId: newId('dlv'), subscriptionId: 'wh_gauge', attempt: 1, delayMs: 0 });
    /** The gauge once it reads `expected` (a scrape's read of Redis is bounded by 1 s: a loaded machine may miss one). */
    const settlesAt = async (expected: Record<(typeof STATES)[number], number>) => {
      let last: Record<string, number | undefined> = {};
      await waitFor(async () => {
        const text = await metrics.registry.metrics();
        last = Object.fromEntries(STATES.map((state) => [state, scrapeSample(text, 'svc_dispatcher_queue_jobs', { queue: 'deliver', state })]));
        return STATES.every((state) => last[state] === expected[state]);
      }, 10_000).catch(() => undefined);
      expect(last).toEqual(expected);
    };
    try {
      await enqueueDeliveries(queues, [job(), job(), job()], { background: true });
      await enqueueDeliveries(queues, [job(), job()]);
      await enqueueDeliveries(queues, [{ ...job(), delayMs: 3_600_000 }]);
      expect(await queues.deliveries[0]!.getJobCounts('waiting', 'prioritized', 'delayed')).toEqual({ waiting: 2, prioritized: 3, delayed: 1, paused: 0 });

      await settlesAt({ waiting: 2, prioritized: 3, paused: 0, delayed: 1, active: 0 });

      // A paused queue keeps its waiting jobs in `paused`; prioritized ones stay where they are.
      await queues.deliveries[0]!.pause();
      await settlesAt({ waiting: 0, prioritized: 3, paused: 2, delayed: 1, active: 0 });
    } finally {
      await queues.deliveries[0]!.obliterate({ force: true });
      await queues.fanout.obliterate({ force: true });
      await queues.close();
    }
  });

  it('observes a recovery’s attempt under svc_dispatcher_attempt_lateness_seconds{priority="background"}, a live event’s under priority="normal"', async () => {
    const registry = dispatcher.metrics.registry;
    const lateness = async (priority: string) => scrapeSample(await registry.metrics(), 'svc_dispatcher_attempt_lateness_seconds_count', { priority });
    const before = { normal: await lateness('normal'), background: await lateness('background') };
    expect(before).toEqual({ normal: expect.any(Number), background: expect.any(Number) });

    const tenant = await seedTenant(h);
    const tag = uniqueTag();
    const recovered = await tenant.subscribe(`/ok/recovered-${tag}`, ['scan.completed']);
    const live = await tenant.subscribe(`/ok/live-${tag}`, ['ai_check.completed']);
    // A delivery that failed for good a minute ago: the recovery sends it again as a new delivery.
    const since = new Date(Date.now() - 3_600_000);
    const scan = await tenant.newScan();
    const failedId = newId('dlv');
    await h.db.transaction(async (tx) => {
      const event = await insertEvent(tx, tenant.accountId, 'scan.completed', { scanId: scan.id, siteId: tenant.site.id, domain: tenant.site.domain, score: 7 });
      await tx('events').where({ id: event.id }).update({ fanned_out_at: tx.fn.now(3) });
      await tx('deliveries').insert({
        id: failedId,
        event_id: event.id,
        subscription_id: recovered.id,
        status: 'failed',
        attempt_count: 7,
        next_attempt_at: null,
        finished_at: tx.raw(`clock_timestamp() - interval '1 minute'`),
        failure_reason: 'HTTP 500',
      });
    });

    const recovery = await recoverSubscriptionDeliveries(producerOf(h), tenant.accountId, recovered.id, { since, until: new Date(), dryRun: false });
    expect(recovery.count).toBe(1);
    const { eventId } = await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: 8 });

    await waitForDelivery(h, eventId, live.id, (row) => row.status === 'delivered', 'the live delivery');
    await waitFor(
      async () => {
        const row = (await h.db('deliveries').where({ redelivery_of: failedId }).first()) as DeliveryRow | undefined;
        return row?.status === 'delivered';
      },
      10_000,
      'the recovered delivery',
    );
    // Observed just after each outcome is recorded: poll until both are, then compare.
    const expected = { normal: before.normal! + 1, background: before.background! + 1 };
    let observed = {};
    await waitFor(async () => {
      observed = { normal: await lateness('normal'), background: await lateness('background') };
      return JSON.stringify(observed) === JSON.stringify(expected);
    }, 10_000).catch(() => undefined);
    expect(observed).toEqual(expected);
  });
});
