import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Job } from 'bullmq';
import { type FanoutJob } from '@svc/core';
import { insertEvent } from '@svc/core/dispatcher';
import { createCapturingLogger, type LogEntry } from '@svc/core/testing';
import { createFanoutProcessor } from '../src/processors/fanout.processor.js';
import { createHarness, seedTenant, type Harness } from './support/harness.js';

/** The most deliveries one fan-out statement may create (docs/operations.md, "Limits"). */
const PAGE_CAP = 1_000;
const SUBSCRIPTIONS = 2_500;

let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  // Nothing runs these jobs: drop them with the queue rather than leave them in Redis.
  await h.queues.deliveries[0]!.obliterate({ force: true });
  await h.close();
});

interface DeliveryRow {
  id: string;
  subscription_id: string;
  status: string;
  attempt_count: number;
}

/** An account with `count` active subscriptions to every event, made in one statement (createSubscription's rows, copied). */
async function wideTenant(count: number) {
  const tenant = await seedTenant(h);
  const template = await tenant.subscribe('/ok/wide-template');
  await h.db.raw(
    `INSERT INTO webhook_subscriptions (id, account_id, url, events, secret, status)
     SELECT 'wh_' || replace(gen_random_uuid()::text, '-', ''), account_id, url, events, secret, 'active'
       FROM webhook_subscriptions, generate_series(2, ?::int)
      WHERE id = ?`,
    [count, template.id],
  );
  return tenant;
}

async function deliveriesOf(eventId: string): Promise<DeliveryRow[]> {
  return h.db('deliveries').where({ event_id: eventId }).select('id', 'subscription_id', 'status', 'attempt_count');
}

async function activeSubscriptionsOf(accountId: string): Promise<string[]> {
  const rows: Array<{ id: string }> = await h.db('webhook_subscriptions').where({ account_id: accountId, status: 'active' }).select('id');
  return rows.map((row) => row.id);
}

/** Every job id queued (waiting, not yet run) on the delivery queue. */
async function queuedDeliveryJobIds(): Promise<Set<string>> {
  const jobs = await h.queues.deliveries[0]!.getJobs(['waiting', 'delayed', 'prioritized']);
  return new Set(jobs.map((job) => String(job.id)));
}

/** Runs one fan-out job through the dispatcher's processor, as a worker would. */
async function runFanoutJob(eventId: string): Promise<LogEntry[]> {
  const { logger, entries: captured } = createCapturingLogger('debug');
  const processJob = createFanoutProcessor({ db: h.db, queues: h.queues, logger });
  await processJob({ id: eventId, data: { eventId } } as Job<FanoutJob>);
  return captured;
}

/** The per-page lines the fan-out logs, with the deliveries each page's statement created. */
function pagesOf(entries: LogEntry[], eventId: string): Array<{ created: number; queued: number }> {
  return entries
    .filter((entry) => entry.message === 'fan-out page queued' && entry.eventId === eventId)
    .map((entry) => ({ created: Number(entry.created), queued: Number(entry.queued) }));
}

describe(`the fan-out of an account with ${SUBSCRIPTIONS} subscriptions`, () => {
  it(`creates one delivery per subscription in pages of at most ${PAGE_CAP}, queues every first attempt, and marks the event fanned out`, async () => {
    const tenant = await wideTenant(SUBSCRIPTIONS);
    const event = await insertEvent(h.db, tenant.accountId, 'scan.completed', { scanId: 'scan_wide', siteId: tenant.site.id, domain: tenant.site.domain, score: 50 });
    const before = await h.db('events').where({ id: event.id }).first('fanned_out_at');

    const entries = await runFanoutJob(event.id);

    const rows = await deliveriesOf(event.id);
    const subscriptions = await activeSubscriptionsOf(tenant.accountId);
    const queued = await queuedDeliveryJobIds();
    const pages = pagesOf(entries, event.id);
    const after = await h.db('events').where({ id: event.id }).first('fanned_out_at');

    expect(before.fanned_out_at).toBeNull();
    expect(subscriptions).toHaveLength(SUBSCRIPTIONS);
    expect(rows.map((row) => row.subscription_id).sort()).toEqual([...subscriptions].sort());
    expect(rows.every((row) => row.status === 'pending' && row.attempt_count === 0)).toBe(true);
    expect(rows.filter((row) => !queued.has(`${row.id}-1`))).toEqual([]);
    expect(pages).toHaveLength(Math.ceil(SUBSCRIPTIONS / PAGE_CAP));
    expect(pages.every((page) => page.created <= PAGE_CAP && page.queued <= PAGE_CAP)).toBe(true);
    expect(pages.reduce((sum, page) => sum + page.created, 0)).toBe(SUBSCRIPTIONS);
    expect(after.fanned_out_at).toBeInstanceOf(Date);
  });

  it('resumes a fan-out that died after its first page: each subscription still gets exactly one delivery, and the dead run’s first attempts are queued too', async () => {
    const tenant = await wideTenant(SUBSCRIPTIONS);
    const event = await insertEvent(h.db, tenant.accountId, 'scan.completed', { scanId: 'scan_resumed', siteId: tenant.site.id, domain: tenant.site.domain, score: 51 });
    // What a run killed after committing its first page leaves: 1,000 pending deliveries whose
    // jobs were never queued, and the event not marked fanned out.
    const subscriptions = await activeSubscriptionsOf(tenant.accountId);
    // The first page is the first 1,000 subscriptions in Postgres's order of their ids.
    const earlier: Array<{ id: string }> = await h.db('webhook_subscriptions').where({ account_id: tenant.accountId }).orderBy('id').limit(PAGE_CAP).select('id');
    await h.db.raw(
      `INSERT INTO deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at)
       SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), ?, s, 'pending', 0, clock_timestamp() FROM unnest(?::text[]) AS s`,
      [event.id, earlier.map((row) => row.id)],
    );

    const resumed = await runFanoutJob(event.id);
    const rows = await deliveriesOf(event.id);
    const queued = await queuedDeliveryJobIds();
    // Run once more, as a sweep that found the job gone would: nothing is added.
    const again = await runFanoutJob(event.id);
    const rowsAfterAgain = await deliveriesOf(event.id);

    expect(rows).toHaveLength(SUBSCRIPTIONS);
    expect(new Set(rows.map((row) => row.subscription_id))).toEqual(new Set(subscriptions));
    expect(rows.filter((row) => !queued.has(`${row.id}-1`))).toEqual([]);
    expect(pagesOf(resumed, event.id)).toEqual([
      { created: 0, queued: PAGE_CAP },
      { created: PAGE_CAP, queued: PAGE_CAP },
      { created: SUBSCRIPTIONS - 2 * PAGE_CAP, queued: SUBSCRIPTIONS - 2 * PAGE_CAP },
    ]);
    expect(pagesOf(again, event.id).every((page) => page.created === 0 && page.queued <= PAGE_CAP)).toBe(true);
    expect(rowsAfterAgain.map((row) => row.id).sort()).toEqual(rows.map((row) => row.id).sort());
    expect((await h.db('events').where({ id: event.id }).first('fanned_out_at')).fanned_out_at).toBeInstanceOf(Date);
  });
});
