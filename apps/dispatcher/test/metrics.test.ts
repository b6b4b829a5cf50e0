import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, createLogger, createRedis, enqueueDeliveries, newId, startMetricsServer, type MetricsServer } from '@svc/core';
import { insertEvent } from '@svc/core/dispatcher';
import { freePort, holdPort, httpGet, scrapeSample, uniqueTag, waitFor } from '@svc/core/testing';
import { checkReadiness, healthRoutes } from '../src/health/dispatcher-health.js';
import { spawnDispatcher } from './support/child-dispatcher.js';
import { producerOf, waitForDelivery } from './support/delivery-probe.js';
import { createHarness, seedTenant, type Harness } from './support/harness.js';

const silent = createLogger('error', { silent: true });

async function serve(h: Harness, dispatcher: ReturnType<Harness['startDispatcher']>): Promise<MetricsServer> {
  return startMetricsServer({
    port: await freePort(),
    host: '127.0.0.1',
    registry: dispatcher.metrics.registry,
    logger: silent,
    routes: healthRoutes(() => dispatcher.readiness()),
  });
}

async function scrape(server: MetricsServer): Promise<string> {
  const res = await httpGet(`http://127.0.0.1:${server.port}/metrics`);
  expect(res.status).toBe(200);
  return res.text;
}

const attempts = (text: string, outcome: string) => scrapeSample(text, 'svc_dispatcher_attempts_total', { outcome });

describe('the dispatcher’s /metrics after real deliveries', () => {
  let h: Harness;
  let dispatcher: ReturnType<Harness['startDispatcher']>;
  let server: MetricsServer;

  beforeAll(async () => {
    h = await createHarness();
    dispatcher = h.startDispatcher();
    server = await serve(h, dispatcher);
  });
  afterAll(async () => {
    await server.close();
    await h.close();
  });

  it('counts attempts by outcome, times them, measures their lateness, counts an auto-disable, and names no account, subscription, url or secret', async () => {
    const tenant = await seedTenant(h);
    const tag = uniqueTag();
    const ok = await tenant.subscribe(`/ok/metrics-${tag}`, ['ai_check.completed']);
    const flaky = await tenant.subscribe(`/flaky/1/metrics-${tag}`, ['ai_check.completed']);
    const failing = await tenant.subscribe(`/fail/metrics-${tag}`, ['ai_check.completed']);
    // One permanent failure from the threshold: this event's exhaustion disables it.
    await h.db('webhook_subscriptions').where({ id: failing.id }).update({ failure_count: 99 });

    const { eventId } = await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: 5 });
    await waitForDelivery(h, eventId, ok.id, (row) => row.status === 'delivered', 'the ok delivery');
    await waitForDelivery(h, eventId, flaky.id, (row) => row.status === 'delivered', 'the flaky delivery');
    await waitForDelivery(h, eventId, failing.id, (row) => row.status === 'failed', 'the failing delivery to exhaust its attempts', 20_000);

    // The counters move just after the outcome is recorded: wait for the last of the 10 attempts.
    const text = await waitFor(async () => {
      const scraped = await scrape(server);
      return (scrapeSample(scraped, 'svc_dispatcher_attempt_duration_seconds_count') ?? 0) >= 10 && scraped;
    }, 10_000, 'the 10 attempts to be counted');
    expect(attempts(text, 'delivered')).toBe(2);
    expect(attempts(text, 'retry')).toBe(1 + 6);
    expect(attempts(text, 'failed')).toBe(1);
    expect(attempts(text, 'blocked')).toBe(0);
    expect(scrapeSample(text, 'svc_dispatcher_attempt_duration_seconds_count')).toBe(2 + 7 + 1);
    expect(scrapeSample(text, 'svc_dispatcher_attempt_lateness_seconds_count', { priority: 'normal' })).toBe(2 + 7 + 1);
    expect(scrapeSample(text, 'svc_dispatcher_attempt_lateness_seconds_bucket', { priority: 'normal', le: '+Inf' })).toBe(10);
    expect(scrapeSample(text, 'svc_dispatcher_attempt_lateness_seconds_count', { priority: 'background' })).toBe(0);
    expect(scrapeSample(text, 'svc_dispatcher_subscriptions_auto_disabled_total')).toBe(1);
    expect(text).toContain('process_cpu_user_seconds_total');
    const secrets = (await h.db('webhook_subscriptions').whereIn('id', [ok.id, flaky.id, failing.id]).pluck('secret')) as string[];
    for (const forbidden of [tenant.accountId, ok.id, flaky.id, failing.id, tag, h.receiver.url(''), eventId, tenant.site.id, ...secrets]) {
      expect(text).not.toContain(forbidden);
    }
  });

  it('shows jobs waiting, prioritized, paused, delayed and active per queue, and the deliveries pending in Postgres', async () => {
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe(`/ok/later-${uniqueTag()}`, ['scan.completed']);
    const scan = await tenant.newScan();
    const deliveryId = newId('dlv');
    await h.db.transaction(async (tx) => {
      const event = await insertEvent(tx, tenant.accountId, 'scan.completed', { scanId: scan.id, siteId: tenant.site.id, domain: tenant.site.domain, score: 1 });
      await tx('events').where({ id: event.id }).update({ fanned_out_at: tx.fn.now(3) });
      await tx('deliveries').insert({
        id: deliveryId,
        event_id: event.id,
        subscription_id: sub.id,
        next_attempt_at: tx.raw(`clock_timestamp() + interval '1 hour'`),
      });
    });
    await enqueueDeliveries(h.queues, [{ deliveryId, subscriptionId: sub.id, attempt: 1, delayMs: 3_600_000 }]);

    // A scrape reads Redis for at most 1 s and otherwise keeps the last value: poll for the delayed job.
    const text = await waitFor(async () => {
      const scraped = await scrape(server);
      return (scrapeSample(scraped, 'svc_dispatcher_queue_jobs', { queue: 'deliver', state: 'delayed' }) ?? 0) >= 1 && scraped;
    }, 10_000, 'the delayed job in the queue gauge');

    for (const queue of ['fanout', 'deliver']) {
      for (const state of ['waiting', 'prioritized', 'paused', 'delayed', 'active']) {
        expect(scrapeSample(text, 'svc_dispatcher_queue_jobs', { queue, state })).toEqual(expect.any(Number));
      }
    }
    expect(scrapeSample(text, 'svc_dispatcher_pending_deliveries')).toBe(
      Number((await h.db('deliveries').where({ status: 'pending' }).count({ n: '*' }))[0]!.n),
    );
    expect(scrapeSample(text, 'svc_dispatcher_pending_deliveries')).toBeGreaterThanOrEqual(1);
  });

  it('counts the jobs the sweep queued again after Redis lost them', async () => {
    const before = scrapeSample(await scrape(server), 'svc_dispatcher_sweep_requeued_total', { kind: 'delivery' }) ?? 0;
    const tenant = await seedTenant(h);
    const path = `/ok/lost-${uniqueTag()}`;
    const sub = await tenant.subscribe(path, ['scan.completed']);
    const scan = await tenant.newScan();
    // A due delivery whose job never reached Redis: only the sweep can find it.
    await h.db.transaction(async (tx) => {
      const event = await insertEvent(tx, tenant.accountId, 'scan.completed', { scanId: scan.id, siteId: tenant.site.id, domain: tenant.site.domain, score: 2 });
      await tx('events').where({ id: event.id }).update({ fanned_out_at: tx.fn.now(3) });
      await tx('deliveries').insert({ id: newId('dlv'), event_id: event.id, subscription_id: sub.id, next_attempt_at: tx.fn.now(3) });
    });

    await waitFor(() => h.receiver.to(path).length === 1, 20_000, 'the lost delivery to be re-queued and sent');

    const after = scrapeSample(await scrape(server), 'svc_dispatcher_sweep_requeued_total', { kind: 'delivery' }) ?? 0;
    expect(after - before).toBeGreaterThanOrEqual(1);
  });

  it('answers /healthz 200 and /readyz 200 with every check while running', async () => {
    const health = await httpGet(`http://127.0.0.1:${server.port}/healthz`);
    const ready = await httpGet(`http://127.0.0.1:${server.port}/readyz`);

    expect(health.status).toBe(200);
    expect(JSON.parse(health.text)).toEqual({ status: 'ok' });
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.text)).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'ok', workers: 'running', claims: 'progressing' } });
  });

  it('answers /readyz 503 naming the workers once they are stopped, while /healthz stays 200', async () => {
    const idle = h.startDispatcher();
    await idle.stop();
    const idleServer = await serve(h, idle);
    try {
      const ready = await httpGet(`http://127.0.0.1:${idleServer.port}/readyz`);
      const health = await httpGet(`http://127.0.0.1:${idleServer.port}/healthz`);

      expect(ready.status).toBe(503);
      expect(JSON.parse(ready.text)).toMatchObject({
        status: 'not_ready',
        checks: { postgres: 'ok', workers: 'stopped' },
        reasons: expect.arrayContaining(['the workers are not running (not started, or shutting down)']),
      });
      expect(health.status).toBe(200);
    } finally {
      await idleServer.close();
    }
  });

  it('is not ready, naming Redis, while Redis does not answer', async () => {
    const unreachable = createRedis('redis://127.0.0.1:1', 'fast-fail');
    unreachable.on('error', () => undefined);
    try {
      const readiness = await checkReadiness({ db: h.db, redis: unreachable, workersRunning: () => true });

      expect(readiness).toEqual({
        status: 'not_ready',
        checks: { postgres: 'ok', redis: 'down', workers: 'running', claims: 'progressing' },
        reasons: ['Redis does not answer'],
      });
    } finally {
      unreachable.disconnect();
    }
  });
});

describe('the SSRF guard in /metrics', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  it('counts every attempt the guard refused as blocked', async () => {
    const dispatcher = h.startDispatcher({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe(`/ok/guarded-${uniqueTag()}`, ['ai_check.completed']);
    const { eventId } = await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: 1 });

    await waitForDelivery(h, eventId, sub.id, (row) => row.status === 'failed', 'the blocked delivery to exhaust its attempts', 20_000);

    // Counted just after the 7th outcome is recorded: poll for it, then compare.
    const text = await waitFor(async () => {
      const scraped = await dispatcher.metrics.registry.metrics();
      return (scrapeSample(scraped, 'svc_dispatcher_attempt_duration_seconds_count') ?? 0) >= 7 && scraped;
    }, 10_000, 'the 7 attempts to be counted');
    expect(scrapeSample(text, 'svc_dispatcher_attempts_total', { outcome: 'blocked' })).toBe(7);
    expect(scrapeSample(text, 'svc_dispatcher_attempts_total', { outcome: 'delivered' })).toBe(0);
    expect(h.receiver.requests).toHaveLength(0);
  });
});

describe('a dispatcher process and its METRICS_PORT', () => {
  let h: Harness;
  let held: Awaited<ReturnType<typeof holdPort>>;
  let takenPort: number;
  beforeAll(async () => {
    h = await createHarness();
    held = await holdPort();
    takenPort = held.port;
  });
  afterAll(async () => {
    await held.release();
    await h.close();
  });

  it('logs one warning naming METRICS_PORT when the port is taken and goes on delivering', async () => {
    // With SECRETS_ENCRYPTION_KEY, so the port's is the only warning (not the one about plain-text secrets).
    const child = spawnDispatcher(h, { METRICS_PORT: String(takenPort), LOG_LEVEL: 'warn', SECRETS_ENCRYPTION_KEY: randomBytes(32).toString('base64') });
    try {
      const tenant = await seedTenant(h);
      const path = `/ok/taken-port-${uniqueTag()}`;
      const sub = await tenant.subscribe(path, ['ai_check.completed']);
      const { eventId } = await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: 1 });

      await waitForDelivery(h, eventId, sub.id, (row) => row.status === 'delivered', 'the delivery despite the taken port', 20_000);

      const warnings = child.stdout().split('\n').filter((line) => line.includes('"level":"warn"'));
      expect(warnings).toHaveLength(1);
      expect(JSON.parse(warnings[0]!)).toMatchObject({ variable: 'METRICS_PORT', port: takenPort, error: 'EADDRINUSE' });
      expect(child.child.exitCode).toBeNull();
      expect(h.receiver.to(path)).toHaveLength(1);
    } finally {
      child.child.kill('SIGTERM');
      await child.exited;
    }
  });

  it('serves /metrics, /healthz and /readyz on METRICS_PORT', async () => {
    const port = await freePort();
    const child = spawnDispatcher(h, { METRICS_PORT: String(port) });
    try {
      const ready = await waitFor(async () => {
        const res = await httpGet(`http://127.0.0.1:${port}/readyz`);
        return res.status === 200 && res;
      }, 20_000, 'the child dispatcher to be ready');
      const metrics = await httpGet(`http://127.0.0.1:${port}/metrics`);

      expect(JSON.parse(ready.text)).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'ok', workers: 'running', claims: 'progressing' } });
      expect((await httpGet(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
      expect(metrics.status).toBe(200);
      expect(metrics.text).toContain('svc_dispatcher_attempts_total{outcome="delivered"}');
      expect(metrics.text).toContain('nodejs_heap_size_used_bytes');
    } finally {
      child.child.kill('SIGTERM');
      await child.exited;
    }
  });
});
