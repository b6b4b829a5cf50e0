import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createSubscription } from '@svc/core/operator';
import { PRODUCER_FAN_OUT_MAX } from '@svc/core/dispatcher';
import { waitFor } from '@svc/core/testing';
import { seedTenant, type Harness } from '@svc/dispatcher/test-support';
import {
  deliveredRow,
  ISO_8601,
  newSite as newSiteOf,
  openDeliveryStage,
  openTestDb,
  PROMPT_DELIVERY_MS,
  runSvc,
  runSvcJson,
  testEnv,
} from './support.js';

const db = openTestDb();
const env = testEnv();
/** Where the stories that follow an event to its receiver run: a dispatcher, its database, a receiver. */
let stage: { harness: Harness; env: Record<string, string> };

beforeAll(async () => {
  stage = await openDeliveryStage();
});

afterAll(async () => {
  await stage.harness.close();
  await db.destroy();
});

const newSite = () => newSiteOf(db);

describe('svc ai-runs complete', () => {
  it('records the run with its composite score and an ai_check.completed event, whose first attempt a running dispatcher delivers at once', async () => {
    const h = stage.harness;
    const { accountId, site, subscribe } = await seedTenant(h);
    const subscription = await subscribe('/ok');

    const out = await runSvcJson<{ id: string; compositeScore: number; eventId: string }>(
      ['ai-runs', 'complete', '--site', site.id, '--score', '72.25'],
      stage.env,
    );

    expect(out).toEqual({ id: expect.stringMatching(/^run_/), compositeScore: 72.25, engines: [], eventId: expect.stringMatching(/^evt_/) });
    expect(await h.db('ai_monitor_runs').where({ id: out.id }).first()).toMatchObject({ site_id: site.id, composite_score: 72.25 });
    const event = await h.db('events').where({ id: out.eventId }).first('account_id', 'type', 'body', 'created_at');
    expect(event).toMatchObject({ account_id: accountId, type: 'ai_check.completed' });
    expect(JSON.parse(event.body as string)).toEqual({
      event: 'ai_check.completed',
      timestamp: expect.stringMatching(ISO_8601),
      data: { runId: out.id, siteId: site.id, domain: site.domain, compositeScore: 72.25 },
    });
    const delivery = await deliveredRow(h, out.eventId, subscription.id);
    expect(delivery).toMatchObject({ status: 'delivered', attempt_count: 1 });
    const received = h.receiver.requests.filter((request) => request.headers['x-service-delivery-id'] === delivery.id);
    expect(received.map((request) => request.body.toString())).toEqual([event.body]);
    expect(received[0]!.receivedAt - (event.created_at as Date).getTime()).toBeLessThan(PROMPT_DELIVERY_MS);
    expect(await h.queues.fanout.getJob(out.eventId)).toBeUndefined();
  });

  it('stores each --engine with the run and keeps the event body as spec §6.1 has it', async () => {
    const { siteId, domain } = await newSite();

    const out = await runSvcJson<{ id: string; engines: unknown; eventId: string }>(
      ['ai-runs', 'complete', '--site', siteId, '--score', '70', '--engine', 'chatgpt=72', '--engine', 'perplexity_2=68.5'],
      env,
    );

    const engines = [
      { engine: 'chatgpt', score: 72 },
      { engine: 'perplexity_2', score: 68.5 },
    ];
    expect(out.engines).toEqual(engines);
    expect((await db('ai_monitor_runs').where({ id: out.id }).first()).engines).toEqual(engines);
    const event = await db('events').where({ id: out.eventId }).first('body');
    expect(JSON.parse(event.body as string).data).toEqual({ runId: out.id, siteId, domain, compositeScore: 70 });
  });

  it.each([
    [['--engine', 'ChatGPT=1'], 'svc: error: engines[0].engine must be an id matching ^[a-z0-9][a-z0-9_-]{0,31}$\n'],
    [['--engine', 'gemini=1', '--engine', 'gemini=2'], 'svc: error: engines[1].engine "gemini" appears twice; each must be unique\n'],
    [Array.from({ length: 21 }, (_, i) => ['--engine', `e${i}=1`]).flat(), 'svc: error: engines has 21 entries; at most 20 are allowed\n'],
  ])('refuses bad engines %#, naming the rule, and records nothing', async (flags, stderr) => {
    const { accountId, siteId } = await newSite();

    const run = await runSvc(['ai-runs', 'complete', '--site', siteId, '--score', '70', ...flags], env);

    expect(run.stderr).toBe(stderr);
    expect(run.code).toBe(2);
    expect(await db('ai_monitor_runs').where({ site_id: siteId })).toEqual([]);
    expect(await db('events').where({ account_id: accountId })).toEqual([]);
  });

  it('refuses a non-numeric score with exit 2 and records nothing', async () => {
    const { accountId, siteId } = await newSite();

    const run = await runSvc(['ai-runs', 'complete', '--site', siteId, '--score', 'high'], env);

    expect(run.code).toBe(2);
    expect(run.stderr).toBe("svc: error: option '--score <n>' argument 'high' is invalid. It must be a number such as 87 or 87.5.\n");
    expect(await db('ai_monitor_runs').where({ site_id: siteId })).toEqual([]);
    expect(await db('events').where({ account_id: accountId })).toEqual([]);
  });

  it('refuses a site that does not exist with exit 2', async () => {
    const run = await runSvc(['ai-runs', 'complete', '--site', 'site_missing', '--score', '50', '--json'], env);

    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe('svc: error: site site_missing does not exist\n');
  });
});

describe('svc power-ups deploy', () => {
  it('records the deployment and a power_up.deployed event, whose first attempt a running dispatcher delivers at once', async () => {
    const h = stage.harness;
    const { accountId, site, subscribe } = await seedTenant(h);
    const subscription = await subscribe('/ok');

    const out = await runSvcJson<{ id: string; eventId: string }>(
      ['power-ups', 'deploy', '--site', site.id, '--power-up', 'pu_schema_markup'],
      stage.env,
    );

    expect(out).toEqual({ id: expect.stringMatching(/^dep_/), eventId: expect.stringMatching(/^evt_/) });
    expect(await h.db('power_up_deployments').where({ id: out.id }).first()).toMatchObject({
      site_id: site.id,
      power_up_id: 'pu_schema_markup',
    });
    const event = await h.db('events').where({ id: out.eventId }).first('account_id', 'type', 'body', 'created_at');
    expect(event).toMatchObject({ account_id: accountId, type: 'power_up.deployed' });
    expect(JSON.parse(event.body as string)).toEqual({
      event: 'power_up.deployed',
      timestamp: expect.stringMatching(ISO_8601),
      data: { deploymentId: out.id, siteId: site.id, powerUpId: 'pu_schema_markup' },
    });
    const delivery = await deliveredRow(h, out.eventId, subscription.id);
    expect(delivery).toMatchObject({ status: 'delivered', attempt_count: 1 });
    const received = h.receiver.requests.filter((request) => request.headers['x-service-delivery-id'] === delivery.id);
    expect(received.map((request) => request.body.toString())).toEqual([event.body]);
    expect(received[0]!.receivedAt - (event.created_at as Date).getTime()).toBeLessThan(PROMPT_DELIVERY_MS);
    expect(await h.queues.fanout.getJob(out.eventId)).toBeUndefined();
  });

  it('fires an event of an account with more subscriptions than its producer fans out, which a running dispatcher fans out from the job svc queued and every subscription receives', async () => {
    const h = stage.harness;
    const { accountId, site } = await seedTenant(h);
    const subscriptionIds: string[] = [];
    for (let i = 0; i <= PRODUCER_FAN_OUT_MAX; i++) {
      subscriptionIds.push((await createSubscription(h.db, accountId, { url: h.receiver.url(`/ok?wide=${i}`), events: ['power_up.deployed'] })).id);
    }

    const out = await runSvcJson<{ eventId: string }>(['power-ups', 'deploy', '--site', site.id, '--power-up', 'pu_wide'], stage.env);

    const delivered = await waitFor(
      async () => {
        const rows = await h.db('deliveries').where({ event_id: out.eventId, status: 'delivered' }).select('subscription_id');
        return rows.length === subscriptionIds.length && rows;
      },
      20_000,
      'every subscription to be delivered',
    );
    expect(delivered.map((row: { subscription_id: string }) => row.subscription_id).sort()).toEqual([...subscriptionIds].sort());
    const event = await h.db('events').where({ id: out.eventId }).first('created_at', 'fanned_out_at');
    // Not by its producer (the account is too wide) and not by a sweep (none ran since): by the fan-out job svc queued.
    expect(event.fanned_out_at.getTime()).toBeGreaterThan(event.created_at.getTime());
    // Each subscription received its delivery, never more often than attempts were recorded for it:
    // once, unless a loaded machine made an attempt time out (recorded) and retried it.
    const attempts = await h.db('deliveries').where({ event_id: out.eventId }).select('id', 'attempt_count');
    const received = new Map<string, number>();
    for (const request of h.receiver.requests.filter((r) => r.path.startsWith('/ok?wide='))) {
      const id = String(request.headers['x-service-delivery-id']);
      received.set(id, (received.get(id) ?? 0) + 1);
    }
    const outOfBounds = attempts.filter((row: { id: string; attempt_count: number }) => {
      const requests = received.get(row.id) ?? 0;
      return requests < 1 || requests > row.attempt_count;
    });
    expect(outOfBounds).toEqual([]);
    expect(new Set(received.keys())).toEqual(new Set(attempts.map((row: { id: string }) => row.id)));
    expect(attempts).toHaveLength(subscriptionIds.length);
  });

  it('fires an event no subscription wants without needing Redis: nothing to queue, no warning', async () => {
    const { accountId, siteId } = await newSite();
    const offline = testEnv({ REDIS_URL: 'redis://127.0.0.1:1', LOG_LEVEL: 'warn' });

    const run = await runSvc(['power-ups', 'deploy', '--site', siteId, '--power-up', 'pu_faq', '--json'], offline);

    expect(run.code).toBe(0);
    expect(run.stderr).toBe('');
    const out = JSON.parse(run.stdout) as { eventId: string };
    expect(await db('events').where({ account_id: accountId }).select('id', 'fanned_out_at')).toEqual([{ id: out.eventId, fanned_out_at: expect.any(Date) }]);
    expect(await db('deliveries').where({ event_id: out.eventId })).toEqual([]);
  });

  it('prints the deployment and its event for a person', async () => {
    const { siteId } = await newSite();

    const run = await runSvc(['power-ups', 'deploy', '--site', siteId, '--power-up', 'pu_faq'], env);

    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      new RegExp(`^Recorded deployment dep_\\w+ of Power-Up pu_faq on site ${siteId}\\n {2}event: evt_\\w+ \\(power_up\\.deployed\\)\\n$`),
    );
  });

  it('requires --power-up, naming it, and records nothing', async () => {
    const { siteId } = await newSite();

    const run = await runSvc(['power-ups', 'deploy', '--site', siteId], env);

    expect(run.code).toBe(2);
    expect(run.stderr).toBe("svc: error: required option '--power-up <powerUpId>' not specified\n");
    expect(await db('power_up_deployments').where({ site_id: siteId })).toEqual([]);
  });
});
