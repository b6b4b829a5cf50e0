import { afterAll, describe, expect, it } from '@jest/globals';
import { createQueues, createRedis, deliveryJobId, newId, randomHex } from '@svc/core';
import { seedAccount, seedSite, TEST_REDIS_URL } from '@svc/core/testing';
import { ISO_8601, openTestDb, runSvc, runSvcJson, testEnv } from './support.js';

const db = openTestDb();
const env = testEnv();
afterAll(async () => {
  await db.destroy();
});

const MINUTE_MS = 60_000;

/**
 * A subscription with three deliveries in known states: a delivered one (two attempts), a
 * failed one (one attempt) and a pending one, created in that order. The subscription is
 * stored disabled so that no dispatcher of a concurrently running test sends or fans out to it.
 */
async function seedDeliveryLog() {
  const { accountId } = await seedAccount(db);
  const site = await seedSite(db, accountId);
  const subscriptionId = newId('wh');
  await db('webhook_subscriptions').insert({
    id: subscriptionId,
    account_id: accountId,
    url: 'https://receiver.example/hooks',
    events: ['*'],
    secret: randomHex(32),
    status: 'disabled',
    disabled_at: new Date(),
  });
  const scanId = (await runSvcJson<{ id: string }>(['scans', 'start', '--site', site.id], env)).id;
  const scanEvent = (await runSvcJson<{ eventId: string }>(['scans', 'complete', scanId, '--score', '80'], env)).eventId;
  const runEvent = (await runSvcJson<{ eventId: string }>(['ai-runs', 'complete', '--site', site.id, '--score', '61'], env)).eventId;
  const deployEvent = (
    await runSvcJson<{ eventId: string }>(['power-ups', 'deploy', '--site', site.id, '--power-up', 'pu_1'], env)
  ).eventId;

  const now = Date.now();
  const at = (minutesAgo: number) => new Date(now - minutesAgo * MINUTE_MS);
  const delivered = { id: newId('dlv'), eventId: scanEvent };
  const failed = { id: newId('dlv'), eventId: runEvent };
  const pending = { id: newId('dlv'), eventId: deployEvent };
  const delivery = (id: string, eventId: string, fields: Record<string, unknown>) => ({
    id,
    event_id: eventId,
    subscription_id: subscriptionId,
    ...fields,
  });
  await db('deliveries').insert([
    delivery(delivered.id, scanEvent, { status: 'delivered', attempt_count: 2, created_at: at(30), finished_at: at(29) }),
    delivery(failed.id, runEvent, {
      status: 'failed',
      attempt_count: 1,
      created_at: at(20),
      finished_at: at(20),
      failure_reason: 'subscription disabled',
    }),
    delivery(pending.id, deployEvent, {
      status: 'pending',
      attempt_count: 0,
      created_at: at(10),
      next_attempt_at: new Date(now + 60 * MINUTE_MS),
    }),
  ]);
  const attempt = (deliveryId: string, n: number, fields: Record<string, unknown>) => ({ delivery_id: deliveryId, n, ...fields });
  await db('delivery_attempts').insert([
    attempt(delivered.id, 1, { at: at(30), status_code: 503, error: 'HTTP 503', duration_ms: 120, response_excerpt: 'busy' }),
    attempt(delivered.id, 2, { at: at(29), status_code: 200, error: null, duration_ms: 45, response_excerpt: 'ok' }),
    attempt(failed.id, 1, { at: at(20), status_code: null, error: 'timeout', duration_ms: 10_000, response_excerpt: null }),
  ]);
  return { subscriptionId, delivered, failed, pending, at, now };
}

describe('svc deliveries list', () => {
  it('lists the subscription’s deliveries newest first, each with every attempt', async () => {
    const { subscriptionId, delivered, failed, pending, at, now } = await seedDeliveryLog();

    const out = await runSvcJson(['deliveries', 'list', '--subscription', subscriptionId], env);

    expect(out).toEqual({
      deliveries: [
        {
          id: pending.id,
          eventId: pending.eventId,
          event: 'power_up.deployed',
          status: 'pending',
          createdAt: at(10).toISOString(),
          nextAttemptAt: new Date(now + 60 * MINUTE_MS).toISOString(),
          failureReason: null,
          redeliveryOf: null,
          attempts: [],
        },
        {
          id: failed.id,
          eventId: failed.eventId,
          event: 'ai_check.completed',
          status: 'failed',
          createdAt: at(20).toISOString(),
          nextAttemptAt: null,
          failureReason: 'subscription disabled',
          redeliveryOf: null,
          attempts: [
            { n: 1, at: at(20).toISOString(), statusCode: null, error: 'timeout', durationMs: 10_000, responseExcerpt: null, responseExcerptBase64: null },
          ],
        },
        {
          id: delivered.id,
          eventId: delivered.eventId,
          event: 'scan.completed',
          status: 'delivered',
          createdAt: at(30).toISOString(),
          nextAttemptAt: null,
          failureReason: null,
          redeliveryOf: null,
          attempts: [
            { n: 1, at: at(30).toISOString(), statusCode: 503, error: 'HTTP 503', durationMs: 120, responseExcerpt: 'busy', responseExcerptBase64: Buffer.from('busy').toString('base64') },
            { n: 2, at: at(29).toISOString(), statusCode: 200, error: null, durationMs: 45, responseExcerpt: 'ok', responseExcerptBase64: Buffer.from('ok').toString('base64') },
          ],
        },
      ],
    });
  });

  it('prints one line per delivery and one per attempt for a person', async () => {
    const { subscriptionId, delivered, failed, pending } = await seedDeliveryLog();

    const run = await runSvc(['deliveries', 'list', '--subscription', subscriptionId], env);

    expect(run.code).toBe(0);
    expect(run.stdout.trimEnd().split('\n')).toEqual([
      expect.stringMatching(new RegExp(`^${pending.id} {2}power_up\\.deployed {2}pending {2}event ${pending.eventId} .*next attempt `)),
      expect.stringMatching(new RegExp(`^${failed.id} {2}ai_check\\.completed {2}failed \\(subscription disabled\\) {2}event `)),
      expect.stringMatching(/^ {2}#1 \S+ {2}timeout {2}10000 ms$/),
      expect.stringMatching(new RegExp(`^${delivered.id} {2}scan\\.completed {2}delivered {2}event ${delivered.eventId} `)),
      expect.stringMatching(/^ {2}#1 \S+ {2}HTTP 503 {2}120 ms$/),
      expect.stringMatching(/^ {2}#2 \S+ {2}HTTP 200 {2}45 ms$/),
    ]);
  });

  it('prints an empty list for a subscription without deliveries', async () => {
    const out = await runSvcJson(['deliveries', 'list', '--subscription', newId('wh')], env);

    expect(out).toEqual({ deliveries: [] });
  });
});

describe('svc deliveries redeliver', () => {
  /** The seeded log's subscription made active again (no dispatcher sends from the shared test database). */
  async function activeDeliveryLog() {
    const log = await seedDeliveryLog();
    await db('webhook_subscriptions').where({ id: log.subscriptionId }).update({ status: 'active', disabled_at: null });
    return log;
  }

  it('stores a new pending delivery of the same event, redeliveryOf the original, and queues its first attempt', async () => {
    const { subscriptionId, delivered } = await activeDeliveryLog();

    const out = await runSvcJson<Record<string, string>>(['deliveries', 'redeliver', delivered.id], env);

    expect(out).toEqual({
      id: expect.stringMatching(/^dlv_[0-9a-f]{32}$/),
      subscriptionId,
      eventId: delivered.eventId,
      event: 'scan.completed',
      status: 'pending',
      createdAt: expect.stringMatching(ISO_8601),
      nextAttemptAt: expect.stringMatching(ISO_8601),
      redeliveryOf: delivered.id,
    });
    expect(await db('deliveries').where({ id: out.id }).first()).toMatchObject({
      event_id: delivered.eventId,
      subscription_id: subscriptionId,
      status: 'pending',
      attempt_count: 0,
      redelivery_of: delivered.id,
    });
    const redis = createRedis(TEST_REDIS_URL, 'bullmq');
    const queues = createQueues(redis, env.QUEUE_PREFIX!, 1);
    try {
      const job = await queues.deliveries[0]!.getJob(deliveryJobId(out.id!, 1));
      expect(job?.data).toEqual({ deliveryId: out.id, subscriptionId, attempt: 1 });
      await job?.remove();
    } finally {
      await queues.close();
      redis.disconnect();
    }
    const listed = await runSvcJson<{ deliveries: Array<{ id: string; redeliveryOf: string | null }> }>(
      ['deliveries', 'list', '--subscription', subscriptionId],
      env,
    );
    expect(listed.deliveries[0]).toMatchObject({ id: out.id, redeliveryOf: delivered.id });
    const text = await runSvc(['deliveries', 'list', '--subscription', subscriptionId], env);
    expect(text.stdout.split('\n')[0]).toMatch(new RegExp(`^${out.id} {2}scan\\.completed {2}pending {2}.*, redelivery of ${delivered.id}, next attempt `));
  });

  it('prints one line for a person', async () => {
    const { subscriptionId, failed } = await activeDeliveryLog();

    const run = await runSvc(['deliveries', 'redeliver', failed.id], env);

    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(new RegExp(`^Queued redelivery dlv_\\w+ of ${failed.id} \\(ai_check\\.completed, event ${failed.eventId}\\) to subscription ${subscriptionId}\n$`));
  });

  it('refuses a delivery whose event is still pending to the subscription: exit 1, nothing stored', async () => {
    const { subscriptionId, pending } = await activeDeliveryLog();

    const run = await runSvc(['deliveries', 'redeliver', pending.id, '--json'], env);

    expect(run).toMatchObject({ code: 1, stdout: '' });
    expect(run.stderr).toMatch(/^svc: error: A delivery of this event to this subscription is still pending/);
    expect(await db('deliveries').where({ subscription_id: subscriptionId })).toHaveLength(3);
  });

  it('refuses an auto-disabled subscription: exit 1, nothing stored', async () => {
    const { subscriptionId, delivered } = await seedDeliveryLog();

    const run = await runSvc(['deliveries', 'redeliver', delivered.id, '--json'], env);

    expect(run).toMatchObject({ code: 1, stdout: '' });
    expect(run.stderr).toMatch(/^svc: error: This webhook subscription was disabled/);
    expect(await db('deliveries').where({ subscription_id: subscriptionId })).toHaveLength(3);
  });

  it('exits 2 for a delivery that does not exist', async () => {
    const run = await runSvc(['deliveries', 'redeliver', newId('dlv')], env);

    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^svc: error: delivery dlv_\w+ does not exist/);
  });
});
