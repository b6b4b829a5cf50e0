import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Queue } from 'bullmq';
import { completeAiMonitorRun, deliveryJobId, LEGACY_QUEUES, signStandardWebhook } from '@svc/core';
import { recoverSubscriptionDeliveries, rotateSubscriptionSecret } from '@svc/core/operator';
import { freePort, httpGet, TEST_REDIS_URL, uniqueTag, waitFor } from '@svc/core/testing';
import { attemptsOf, producerOf, waitForDelivery, type DeliveryRow } from './support/delivery-probe.js';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { buildPreviousRelease, startDispatcherProcess, type DispatcherProcess, type PreviousRelease } from './support/previous-release.js';

/** X-Service-Signature as a v1 receiver computes it: HMAC-SHA256 hex of the raw body, keyed with the secret. */
function v1Signature(body: Buffer, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/**
 * A rolling upgrade (docs/operations.md, "Upgrading") migrates first and then replaces the
 * dispatchers one by one: meanwhile the previous release's dispatcher runs against the new schema
 * and on rows and jobs the new code wrote. Here that dispatcher is the one of the commit
 * ops/previous-release names (compiled from git history), run as a process against a database
 * migrated with the current migrations; everything it delivers is made by the current code.
 */
describe("the previous release's dispatcher (ops/previous-release) during a rolling upgrade", () => {
  let release: PreviousRelease;
  let h: Harness;
  let old: DispatcherProcess;
  /** Each receiver path's arrivals once its deliveries were recorded: no more by the end either. */
  const arrivalsByPath = new Map<string, number>();

  beforeAll(async () => {
    release = buildPreviousRelease();
    // Compiling that commit's core and dispatcher is most of this file's time (about 10 s on 2 cores).
    console.info(`previous release ${release.sha.slice(0, 12)} compiled in ${release.buildMs} ms; its @svc/core: ${release.coreEntry}`);
    // The current migrations, all of them: the schema after step 1 of the upgrade.
    h = await createHarness();
    const metricsPort = await freePort();
    old = startDispatcherProcess(release.dispatcherMain, {
      DATABASE_URL: h.config.databaseUrl,
      REDIS_URL: TEST_REDIS_URL,
      QUEUE_PREFIX: h.config.queuePrefix,
      METRICS_PORT: String(metricsPort),
      LOG_LEVEL: 'info',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      NODE_EXTRA_CA_CERTS: h.certificate.certPath,
      WEBHOOK_RETRY_DELAYS_MS: '100,100,100,100,100,100',
      // Generous: a loaded CI machine must not turn an attempt into a timeout.
      WEBHOOK_TIMEOUT_MS: '10000',
      DISPATCHER_SWEEP_INTERVAL_MS: '500',
    });
    await waitFor(
      async () => (await httpGet(`http://127.0.0.1:${metricsPort}/readyz`).catch(() => undefined))?.status === 200,
      30_000,
      `the previous release's dispatcher to be ready: ${old.output()}`,
    );
  }, 180_000);

  afterAll(async () => {
    await old?.stop(5_000);
    await h?.close();
    release?.cleanup();
  }, 60_000);

  it('delivers, once, an event the current producer made to a subscription the current code rotated, signed with the current secret', async () => {
    const tenant = await seedTenant(h);
    const path = `/ok/previous-release-${uniqueTag()}`;
    const created = await tenant.subscribe(path);
    // A row state only the new schema has: a rotation with an overlap (previous_secret set).
    const rotated = await rotateSubscriptionSecret(h.db, tenant.accountId, created.id, 3600);
    const stored = await h.db('webhook_subscriptions').where({ id: created.id }).first('previous_secret', 'previous_secret_expires_at');
    expect(stored.previous_secret).not.toBeNull();
    expect(stored.previous_secret_expires_at.getTime()).toBeGreaterThan(Date.now());
    expect(rotated.secret).not.toBe(created.secret);

    const { eventId } = await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: 73 });
    const delivery = await waitForDelivery(h, eventId, created.id, (row) => row.status !== 'pending', "the previous release's dispatcher to record the delivery", 30_000);
    expect(delivery).toMatchObject({ status: 'delivered', attempt_count: 1 });
    expect(await attemptsOf(h, delivery.id)).toEqual([expect.objectContaining({ n: 1, status_code: 200, error: null })]);

    // The current producer queued the first attempt on a hash-tagged delivery shard, which the
    // previous release does not work: its sweep found the delivery overdue in Postgres and sent it.
    // The job is still queued; the last story has a current dispatcher run it, and it sends nothing.
    expect(await h.queues.deliveries[0]!.getJobState(deliveryJobId(delivery.id, 1))).toBe('waiting');

    const arrivals = h.receiver.to(path);
    expect(arrivals).toHaveLength(1);
    arrivalsByPath.set(path, 1);
    const [arrival] = arrivals as [(typeof arrivals)[number]];
    const event = await h.db('events').where({ id: eventId }).first('body');
    expect(arrival.body.toString('utf8')).toBe(event.body);
    expect(arrival.headers['x-service-delivery-id']).toBe(delivery.id);
    // The v1 signature is made with the current `secret` column, never with the one it replaced.
    expect(arrival.headers['x-service-signature']).toBe(v1Signature(arrival.body, rotated.secret));
    expect(arrival.headers['x-service-signature']).not.toBe(v1Signature(arrival.body, created.secret));
    // The previous release knows no previous_secret: its webhook-signature carries the current
    // secret's signature alone (a current dispatcher adds the replaced one's during the overlap).
    const timestamp = Number(arrival.headers['webhook-timestamp']);
    expect(arrival.headers['webhook-signature']).toBe(signStandardWebhook(delivery.id, timestamp, arrival.body, rotated.secret));

    // The attempt was the previous release's process's: it logs it (no other dispatcher runs here),
    // just after recording it.
    const logged = await waitFor(() => old.logLines().find((line) => line.message === 'delivery attempt succeeded' && line.deliveryId === delivery.id), 10_000, 'the attempt in its log');
    expect(logged).toMatchObject({ level: 'info', result: 'delivered', status: 200, attempt: 1 });
  }, 60_000);

  it('fails a delivery on the current schema and sends its recovery, which the current code queues as a background (prioritized) job', async () => {
    const tenant = await seedTenant(h);
    const path = `/ok/previous-release-recovered-${uniqueTag()}`;
    h.receiver.answerWith(path, 500);
    const sub = await tenant.subscribe(path);
    const since = new Date(Date.now() - 60_000);
    const { eventId } = await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: 12 });
    // Seven attempts 100 ms apart, each recorded by the previous release's dispatcher.
    const failed = await waitForDelivery(h, eventId, sub.id, (row) => row.status !== 'pending', 'the delivery to fail for good', 60_000);
    expect(failed).toMatchObject({ status: 'failed', attempt_count: 7 });

    h.receiver.answerWith(path, 200);
    // The queue paused while the recovery queues its job, to see the job as the current code made it.
    await h.queues.deliveries[0]!.pause();
    let queued: Awaited<ReturnType<(typeof h.queues.deliveries)[number]['getJob']>>;
    try {
      const recovery = await recoverSubscriptionDeliveries(producerOf(h), tenant.accountId, sub.id, { since, until: new Date(Date.now() + 60_000), dryRun: false });
      expect(recovery.count).toBe(1);
      const [created] = (await h.db('deliveries').where({ redelivery_of: failed.id }).select('id')) as Array<{ id: string }>;
      queued = await h.queues.deliveries[0]!.getJob(deliveryJobId(created!.id, 1));
    } finally {
      await h.queues.deliveries[0]!.resume();
    }
    // A job only the current code queues: a prioritized (background) one.
    expect(queued?.opts.priority).toBeGreaterThan(0);
    expect(queued?.data).toEqual({ deliveryId: expect.any(String), subscriptionId: sub.id, attempt: 1 });
    const redelivery = await waitFor(
      async () => {
        const row = (await h.db('deliveries').where({ redelivery_of: failed.id }).first()) as DeliveryRow | undefined;
        return row !== undefined && row.status !== 'pending' && row;
      },
      30_000,
      'the recovered delivery to be recorded',
    );
    expect(redelivery).toMatchObject({ status: 'delivered', attempt_count: 1, event_id: eventId });
    expect(queued?.data.deliveryId).toBe(redelivery.id);

    const arrivals = h.receiver.to(path);
    expect(arrivals).toHaveLength(8);
    arrivalsByPath.set(path, 8);
    const last = arrivals[7]!;
    expect(last.headers['x-service-delivery-id']).toBe(redelivery.id);
    expect(last.headers['x-service-signature']).toBe(v1Signature(last.body, sub.secret));
    const logged = await waitFor(() => old.logLines().find((line) => line.message === 'delivery attempt succeeded' && line.deliveryId === redelivery.id), 10_000, 'the attempt in its log');
    expect(logged).toMatchObject({ level: 'info', result: 'delivered', status: 200, attempt: 1 });
  }, 90_000);

  it('logged no warning or error, and stops on SIGTERM', async () => {
    for (const [path, arrivals] of arrivalsByPath) expect({ path, arrivals: h.receiver.to(path).length }).toEqual({ path, arrivals });
    const code = await old.stop();
    const lines = old.logLines();
    expect({ code, complaints: lines.filter((line) => line.level !== 'info') }).toEqual({ code: 0, complaints: [] });
    expect(lines.map((line) => line.message)).toEqual(expect.arrayContaining(['dispatcher started', 'dispatcher stopping: finishing attempts in flight', 'dispatcher stopped']));
    // Nothing on stderr either (an unhandled rejection, a Node warning).
    expect(old.stderr()).toBe('');

    // The upgrade's next step: a current dispatcher takes over. It runs the jobs the current code
    // queued on its shard and moves what the previous release left on the queues as they were named
    // before (`deliver`, `fanout`); every one of those attempts was made already, so none is sent again.
    const legacy = new Queue(LEGACY_QUEUES.delivery, { connection: h.redis, prefix: h.config.queuePrefix });
    try {
      h.startDispatcher();
      const emptied = await waitFor(
        async () => {
          const [shard, left] = await Promise.all([h.queues.deliveries[0]!.getJobCounts(), legacy.getJobCounts()]);
          const total = Object.values(shard).reduce((sum, n) => sum + n, 0) + Object.values(left).reduce((sum, n) => sum + n, 0);
          const forgotten = (await h.redis.sismember(`${h.config.queuePrefix}:queues`, LEGACY_QUEUES.delivery)) === 0;
          return total === 0 && forgotten && { shard, left };
        },
        20_000,
        'the current dispatcher to empty its shard and the queue named as before',
      );
      expect(emptied.shard).toMatchObject({ waiting: 0, delayed: 0, active: 0 });
      for (const [path, arrivals] of arrivalsByPath) expect({ path, arrivals: h.receiver.to(path).length }).toEqual({ path, arrivals });
    } finally {
      await legacy.close();
    }
  }, 60_000);
});
