import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, createDb, createLogger, deployPowerUp, newId } from '@svc/core';
import { insertEvent, purgeExpiredHistory, RETENTION_LOCK_KEY } from '@svc/core/dispatcher';
import { createCapturingLogger, scrapeSample, uniqueTag, waitFor } from '@svc/core/testing';
import { DispatcherMetrics } from '../src/metrics/dispatcher-metrics.js';
import { RetentionPurger } from '../src/sweeps/retention-purger.js';
import { producerOf } from './support/delivery-probe.js';
import { createHarness, seedTenant, type Harness } from './support/harness.js';

const DAYS = 30;
const silent = createLogger('error', { silent: true });
let h: Harness;
let tenant: Awaited<ReturnType<typeof seedTenant>>;

beforeAll(async () => {
  // A database of its own: the purge acts on every expired row it can see.
  h = await createHarness();
});
afterAll(async () => {
  await h.close();
});
beforeEach(async () => {
  await h.db('delivery_attempts').del();
  await h.db('deliveries').del();
  await h.db('events').del();
  tenant = await seedTenant(h);
});

const ago = (days: number) => h.db.raw(`clock_timestamp() - make_interval(days => ?)`, [days]);

/** An event created `daysAgo`, fanned out unless told otherwise. */
async function eventFrom(daysAgo: number, options: { fannedOut?: boolean } = {}): Promise<string> {
  const event = await insertEvent(h.db, tenant.accountId, 'scan.completed', { scanId: 'scan_x', siteId: tenant.site.id, domain: tenant.site.domain, score: 1 });
  await h.db('events').where({ id: event.id }).update({ created_at: ago(daysAgo), fanned_out_at: options.fannedOut === false ? null : ago(daysAgo) });
  return event.id;
}

/** A delivery of the event to a new subscription: finished (or pending) with attempts made the given days ago. */
async function deliveryOf(eventId: string, status: 'delivered' | 'failed' | 'pending', attemptDaysAgo: number[]): Promise<string> {
  const sub = await tenant.subscribe(`/ok/${uniqueTag()}`);
  const id = newId('dlv');
  const last = Math.min(...attemptDaysAgo);
  await h.db('deliveries').insert({
    id,
    event_id: eventId,
    subscription_id: sub.id,
    status,
    attempt_count: attemptDaysAgo.length,
    created_at: ago(Math.max(...attemptDaysAgo)),
    next_attempt_at: status === 'pending' ? ago(last) : null,
    finished_at: status === 'pending' ? null : ago(last),
  });
  for (const [index, daysAgo] of attemptDaysAgo.entries()) {
    await h.db('delivery_attempts').insert({ delivery_id: id, n: index + 1, at: ago(daysAgo), status_code: 500, duration_ms: 5 });
  }
  return id;
}

async function exists(table: string, id: string): Promise<boolean> {
  return (await h.db(table).where({ id }).first()) !== undefined;
}

async function attemptCount(deliveryId: string): Promise<number> {
  return Number((await h.db('delivery_attempts').where({ delivery_id: deliveryId }).count({ n: '*' }))[0]!.n);
}

const purge = (overrides: Partial<Parameters<typeof purgeExpiredHistory>[1]> = {}) =>
  purgeExpiredHistory(h.db, { retentionDays: DAYS, batchSize: 500, maxBatches: 100, ...overrides });

describe('retention (DELIVERY_RETENTION_DAYS)', () => {
  it('deletes a finished delivery whose last attempt is older than the retention, with its attempts, and its event with it', async () => {
    const deliveredEvent = await eventFrom(40);
    const delivered = await deliveryOf(deliveredEvent, 'delivered', [40, 39]);
    const failedEvent = await eventFrom(45);
    const failed = await deliveryOf(failedEvent, 'failed', [45, 44, 43, 42, 41, 40, 31]);

    const result = await purge();

    expect(result).toEqual({ ran: true, deliveries: 2, attempts: 9, events: 2 });
    for (const id of [delivered, failed]) {
      expect(await exists('deliveries', id)).toBe(false);
      expect(await attemptCount(id)).toBe(0);
    }
    expect(await exists('events', deliveredEvent)).toBe(false);
    expect(await exists('events', failedEvent)).toBe(false);
  });

  it('never deletes a pending delivery, however old, nor its event', async () => {
    const eventId = await eventFrom(60);
    const pending = await deliveryOf(eventId, 'pending', [60, 59, 50]);

    const result = await purge();

    expect(result).toMatchObject({ deliveries: 0, events: 0 });
    expect(await exists('deliveries', pending)).toBe(true);
    expect(await attemptCount(pending)).toBe(3);
    expect(await exists('events', eventId)).toBe(true);
  });

  it('keeps a finished delivery whose last attempt is recent, even of an old event, and keeps that event', async () => {
    const eventId = await eventFrom(35);
    const recent = await deliveryOf(eventId, 'failed', [35, 34, 33, 29]);

    await purge();

    expect(await exists('deliveries', recent)).toBe(true);
    expect(await attemptCount(recent)).toBe(4);
    expect(await exists('events', eventId)).toBe(true);
  });

  it('deletes an event only with its last delivery', async () => {
    const eventId = await eventFrom(40);
    const old = await deliveryOf(eventId, 'delivered', [40]);
    const young = await deliveryOf(eventId, 'delivered', [2]);

    await purge();
    expect(await exists('deliveries', old)).toBe(false);
    expect(await exists('deliveries', young)).toBe(true);
    expect(await exists('events', eventId)).toBe(true);

    // Time passes: the last delivery expires too, and the event goes with it.
    await h.db('deliveries').where({ id: young }).update({ finished_at: ago(31) });
    await h.db('delivery_attempts').where({ delivery_id: young }).update({ at: ago(31) });
    await purge();
    expect(await exists('deliveries', young)).toBe(false);
    expect(await exists('events', eventId)).toBe(false);
  });

  it('keeps a delivery a redelivery points at while that redelivery is pending or recent, and purges the two once both expired', async () => {
    const eventId = await eventFrom(40);
    const original = await deliveryOf(eventId, 'failed', [40, 39]);
    const { subscription_id: subscriptionId } = await h.db('deliveries').where({ id: original }).first('subscription_id');
    const redelivery = newId('dlv');
    await h.db('deliveries').insert({ id: redelivery, event_id: eventId, subscription_id: subscriptionId, redelivery_of: original, next_attempt_at: ago(0) });

    await purge();
    expect(await exists('deliveries', original)).toBe(true);
    expect(await exists('deliveries', redelivery)).toBe(true);

    // The redelivery finished long ago too: it goes, then the original, then the event.
    await h.db('deliveries').where({ id: redelivery }).update({ status: 'delivered', next_attempt_at: null, finished_at: ago(35) });
    await purge();
    await purge();
    expect(await exists('deliveries', redelivery)).toBe(false);
    expect(await exists('deliveries', original)).toBe(false);
    expect(await attemptCount(original)).toBe(0);
    expect(await exists('events', eventId)).toBe(false);
  });

  it('deletes an old event that never had a delivery, but not a recent one, nor one still waiting for its fan-out', async () => {
    const oldUnmatched = await eventFrom(31);
    const recentUnmatched = await eventFrom(29);
    const oldUnfanned = await eventFrom(90, { fannedOut: false });

    const result = await purge();

    expect(result.events).toBe(1);
    expect(await exists('events', oldUnmatched)).toBe(false);
    expect(await exists('events', recentUnmatched)).toBe(true);
    expect(await exists('events', oldUnfanned)).toBe(true);
  });

  it('never touches the facts: sites, scans, AI Monitor runs and deployments stay however old', async () => {
    const scan = await tenant.newScan();
    const { run } = await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: 3 });
    const { deployment } = await deployPowerUp(producerOf(h), { siteId: tenant.site.id, powerUpId: 'pu_schema' });
    await h.db('scans').where({ id: scan.id }).update({ started_at: ago(400) });
    await h.db('ai_monitor_runs').where({ id: run.id }).update({ completed_at: ago(400) });
    await h.db('power_up_deployments').where({ id: deployment.id }).update({ deployed_at: ago(400) });
    await h.db('events').update({ created_at: ago(400), fanned_out_at: ago(400) });

    const result = await purge();

    expect(result.events).toBe(2);
    expect(await exists('sites', tenant.site.id)).toBe(true);
    expect(await exists('scans', scan.id)).toBe(true);
    expect(await exists('ai_monitor_runs', run.id)).toBe(true);
    expect(await exists('power_up_deployments', deployment.id)).toBe(true);
  });

  it('purges in batches of the given size, at most maxBatches per run', async () => {
    for (let i = 0; i < 5; i++) await deliveryOf(await eventFrom(50), 'delivered', [50]);

    const first = await purge({ batchSize: 2, maxBatches: 1 });
    const rest = await purge({ batchSize: 2, maxBatches: 10 });

    expect(first).toEqual({ ran: true, deliveries: 2, attempts: 2, events: 2 });
    expect(rest).toEqual({ ran: true, deliveries: 3, attempts: 3, events: 3 });
    expect(await h.db('deliveries').count({ n: '*' })).toEqual([{ n: '0' }]);
  });

  it('lets one purger run at a time: while another holds the lock, a run deletes nothing', async () => {
    const eventId = await eventFrom(40);
    const delivery = await deliveryOf(eventId, 'delivered', [40]);

    let whileHeld: Awaited<ReturnType<typeof purge>> | undefined;
    await h.db.transaction(async (tx) => {
      await tx.raw('SELECT pg_advisory_xact_lock(?::bigint)', [String(RETENTION_LOCK_KEY)]);
      whileHeld = await purge();
    });
    const afterwards = await purge();

    expect(whileHeld).toEqual({ ran: false, deliveries: 0, attempts: 0, events: 0 });
    expect(afterwards).toMatchObject({ ran: true, deliveries: 1, events: 1 });
    expect(await exists('deliveries', delivery)).toBe(false);
  });

  it('keeps everything with DELIVERY_RETENTION_DAYS=0', async () => {
    const eventId = await eventFrom(4000);
    const delivery = await deliveryOf(eventId, 'delivered', [4000]);

    const result = await purge({ retentionDays: 0 });

    expect(result).toEqual({ ran: false, deliveries: 0, attempts: 0, events: 0 });
    expect(await exists('deliveries', delivery)).toBe(true);
  });

  it('counts the rows it purged in /metrics, by table', async () => {
    for (let i = 0; i < 3; i++) await deliveryOf(await eventFrom(40), 'failed', [40, 39]);
    await eventFrom(40);
    const metrics = new DispatcherMetrics();
    const purger = new RetentionPurger({ db: h.db, logger: silent, retentionDays: DAYS, metrics });

    await purger.runOnce();

    const text = await metrics.registry.metrics();
    expect(scrapeSample(text, 'svc_dispatcher_retention_purged_rows_total', { table: 'deliveries' })).toBe(3);
    expect(scrapeSample(text, 'svc_dispatcher_retention_purged_rows_total', { table: 'delivery_attempts' })).toBe(6);
    expect(scrapeSample(text, 'svc_dispatcher_retention_purged_rows_total', { table: 'events' })).toBe(4);
  });
});

describe('the purger on its own timer (as a running dispatcher starts it)', () => {
  const INTERVAL_MS = 100;
  const started: RetentionPurger[] = [];
  const purgerWith = (deps: Partial<ConstructorParameters<typeof RetentionPurger>[0]> = {}) => {
    const purger = new RetentionPurger({ db: h.db, logger: silent, retentionDays: DAYS, metrics: new DispatcherMetrics(), ...deps }, INTERVAL_MS);
    started.push(purger);
    return purger;
  };
  // A story that fails half-way still stops its purger (stop() is idempotent).
  afterEach(async () => {
    await Promise.all(started.splice(0).map((purger) => purger.stop()));
  });

  it('purges expired history by itself, again at every interval, and never after stop()', async () => {
    const purger = purgerWith();
    const firstEvent = await eventFrom(40);
    const first = await deliveryOf(firstEvent, 'delivered', [40]);

    purger.start();
    await waitFor(async () => !(await exists('deliveries', first)), 5_000, 'the first purge');
    const afterFirstRun = { delivery: await exists('deliveries', first), event: await exists('events', firstEvent) };
    // Expired after the first run: only a later tick of the timer can take it.
    const second = await deliveryOf(await eventFrom(40), 'failed', [41, 40]);
    await waitFor(async () => !(await exists('deliveries', second)), 5_000, 'a purge at a later interval');
    const afterLaterRun = { delivery: await exists('deliveries', second), attempts: await attemptCount(second) };
    await purger.stop();

    expect(afterFirstRun).toEqual({ delivery: false, event: false });
    expect(afterLaterRun).toEqual({ delivery: false, attempts: 0 });
    // No run is left to come: a purge after stop() cannot happen.
    expect(purger.scheduled()).toBe(false);
  });

  it('with DELIVERY_RETENTION_DAYS=0 a started purger deletes nothing, however old', async () => {
    const purger = purgerWith({ retentionDays: 0 });
    const delivery = await deliveryOf(await eventFrom(4000), 'delivered', [4000]);

    purger.start();

    // Started, it schedules no run at all; what it would delete is there.
    expect(purger.scheduled()).toBe(false);
    expect(await exists('deliveries', delivery)).toBe(true);
  });

  it('logs a failed run and tries again at the next interval, without throwing', async () => {
    // A database handle whose pool is closed: every purge fails, as when Postgres is away.
    const closed = createDb(h.config.databaseUrl, { poolMax: 1 });
    await closed.destroy();
    const { logger, entries } = createCapturingLogger('warn');
    const purger = purgerWith({ db: closed, logger });

    purger.start();
    const failures = await waitFor(() => {
      const warned = entries.filter((entry) => entry.message === 'retention purge failed; will try again');
      return warned.length >= 2 && warned;
    }, 5_000, 'two failed runs');
    await purger.stop();

    expect(failures[0]).toMatchObject({ level: 'warn', error: expect.any(String) });
    expect(purger.scheduled()).toBe(false);
  });
});
