import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { uniqueTag } from '@svc/core/testing';
import { seedTenant, type Harness } from '@svc/dispatcher/test-support';
import {
  deliveredRow,
  ISO_8601,
  newSite as newSiteOf,
  newSubscribedSite as newSubscribedSiteOf,
  openDeliveryStage,
  openTestDb,
  PROMPT_DELIVERY_MS,
  runSvc,
  runSvcJson,
  testEnv,
} from './support.js';

const db = openTestDb();
const env = testEnv();
/** Where the story that follows an event to its receiver runs: a dispatcher, its database, a receiver. */
let stage: { harness: Harness; env: Record<string, string> };

beforeAll(async () => {
  stage = await openDeliveryStage();
});

afterAll(async () => {
  await stage.harness.close();
  await db.destroy();
});

const newSite = () => newSiteOf(db);
const newSubscribedSite = () => newSubscribedSiteOf(db);

async function startScan(siteId: string): Promise<string> {
  return (await runSvcJson<{ id: string }>(['scans', 'start', '--site', siteId], env)).id;
}

describe('svc scans start', () => {
  it('starts a running scan of the site', async () => {
    const { siteId } = await newSite();

    const out = await runSvcJson(['scans', 'start', '--site', siteId], env);

    expect(out).toEqual({ id: expect.stringMatching(/^scan_/), status: 'running', trigger: 'manual' });
    expect(await db('scans').where({ id: out.id }).first()).toMatchObject({ site_id: siteId, status: 'running', score: null, trigger: 'manual' });
  });

  it('records --trigger scheduled', async () => {
    const { siteId } = await newSite();

    const out = await runSvcJson<{ id: string }>(['scans', 'start', '--site', siteId, '--trigger', 'scheduled'], env);

    expect(out).toEqual({ id: expect.stringMatching(/^scan_/), status: 'running', trigger: 'scheduled' });
    expect(await db('scans').where({ id: out.id }).first()).toMatchObject({ trigger: 'scheduled' });
  });

  it('refuses an unknown --trigger with exit 2 and starts nothing', async () => {
    const { siteId } = await newSite();

    const run = await runSvc(['scans', 'start', '--site', siteId, '--trigger', 'nightly'], env);

    expect(run.code).toBe(2);
    expect(run.stderr).toBe('svc: error: trigger must be one of scheduled, manual\n');
    expect(await db('scans').where({ site_id: siteId })).toEqual([]);
  });

  it('refuses a site that does not exist with exit 2', async () => {
    const run = await runSvc(['scans', 'start', '--site', 'site_missing'], env);

    expect(run.code).toBe(2);
    expect(run.stderr).toBe('svc: error: site site_missing does not exist\n');
  });
});

describe('svc scans complete', () => {
  it('completes the scan and stores a scan.completed event with the spec body, whose first attempt a running dispatcher delivers at once', async () => {
    const h = stage.harness;
    const { accountId, site, subscribe } = await seedTenant(h);
    const subscription = await subscribe('/ok');
    const scanId = (await runSvcJson<{ id: string }>(['scans', 'start', '--site', site.id], stage.env)).id;

    const out = await runSvcJson<{ id: string; status: string; score: number; completedAt: string; eventId: string }>(
      ['scans', 'complete', scanId, '--score', '87.5'],
      stage.env,
    );

    expect(out).toEqual({
      id: scanId,
      status: 'completed',
      score: 87.5,
      completedAt: expect.stringMatching(ISO_8601),
      trigger: 'manual',
      categories: [],
      eventId: expect.stringMatching(/^evt_/),
    });
    const scan = await h.db('scans').where({ id: scanId }).first();
    expect(scan).toMatchObject({ status: 'completed', score: 87.5 });
    expect((scan.completed_at as Date).toISOString()).toBe(out.completedAt);
    const event = await h.db('events').where({ id: out.eventId }).first('id', 'account_id', 'type', 'body', 'created_at');
    expect(event).toMatchObject({ account_id: accountId, type: 'scan.completed' });
    expect(JSON.parse(event.body as string)).toEqual({
      event: 'scan.completed',
      timestamp: expect.stringMatching(ISO_8601),
      data: { scanId, siteId: site.id, domain: site.domain, score: 87.5 },
    });
    const delivery = await deliveredRow(h, out.eventId, subscription.id);
    expect(delivery).toMatchObject({ status: 'delivered', attempt_count: 1 });
    const received = h.receiver.requests.filter((request) => request.headers['x-service-delivery-id'] === delivery.id);
    expect(received.map((request) => request.body.toString())).toEqual([event.body]);
    expect(received[0]!.receivedAt - (event.created_at as Date).getTime()).toBeLessThan(PROMPT_DELIVERY_MS);
    expect(await h.queues.fanout.getJob(out.eventId)).toBeUndefined();
  });

  it('stores each --category with the scan and keeps the event body as spec §6.1 has it', async () => {
    const { siteId, domain } = await newSite();
    const scanId = await startScan(siteId);

    const out = await runSvcJson<{ categories: unknown; eventId: string }>(
      ['scans', 'complete', scanId, '--score', '80', '--category', 'Speed=91.5', '--category', 'a=b=-3'],
      env,
    );

    const categories = [
      { name: 'Speed', score: 91.5 },
      { name: 'a=b', score: -3 },
    ];
    expect(out.categories).toEqual(categories);
    expect((await db('scans').where({ id: scanId }).first()).categories).toEqual(categories);
    const event = await db('events').where({ id: out.eventId }).first('body');
    expect(JSON.parse(event.body as string).data).toEqual({ scanId, siteId, domain, score: 80 });
  });

  it.each([
    [['--category', 'Speed=1', '--category', 'Speed=2'], 'svc: error: categories[1].name "Speed" appears twice; each must be unique\n'],
    [['--category', `${'x'.repeat(65)}=1`], 'svc: error: categories[0].name must be 1 to 64 printable characters, not all blank\n'],
    [['--category', 'Tab\there=1'], 'svc: error: categories[0].name must be 1 to 64 printable characters, not all blank\n'],
    [Array.from({ length: 21 }, (_, i) => ['--category', `c${i}=1`]).flat(), 'svc: error: categories has 21 entries; at most 20 are allowed\n'],
  ])('refuses bad categories %#, naming the rule, and leaves the scan running with no event', async (flags, stderr) => {
    const { accountId, siteId } = await newSite();
    const scanId = await startScan(siteId);

    const run = await runSvc(['scans', 'complete', scanId, '--score', '80', ...flags], env);

    expect(run.stderr).toBe(stderr);
    expect(run.code).toBe(2);
    expect(await db('scans').where({ id: scanId }).first()).toMatchObject({ status: 'running', score: null, categories: [] });
    expect(await db('events').where({ account_id: accountId })).toEqual([]);
  });

  it('refuses a --category without NAME=SCORE with exit 2', async () => {
    const { siteId } = await newSite();
    const scanId = await startScan(siteId);

    const run = await runSvc(['scans', 'complete', scanId, '--score', '80', '--category', 'Speed'], env);

    expect(run.code).toBe(2);
    expect(run.stderr).toContain("option '--category <name=score>' argument 'Speed' is invalid");
  });

  it('prints the score and the event for a person', async () => {
    const { siteId } = await newSite();
    const scanId = await startScan(siteId);

    const run = await runSvc(['scans', 'complete', scanId, '--score', '90'], env);

    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(new RegExp(`^Completed scan ${scanId} with score 90\\n {2}event: evt_\\w+ \\(scan\\.completed\\)\\n$`));
  });

  it.each(['abc', '', '12abc', '1e3', 'Infinity', '0x10'])(
    'refuses --score %p with exit 2, naming the flag, and leaves the scan running with no event',
    async (score) => {
      const { accountId, siteId } = await newSite();
      const scanId = await startScan(siteId);

      const run = await runSvc(['scans', 'complete', scanId, '--score', score, '--json'], env);

      expect(run.code).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toBe(
        `svc: error: option '--score <n>' argument '${score}' is invalid. It must be a number such as 87 or 87.5.\n`,
      );
      expect(await db('scans').where({ id: scanId }).first()).toMatchObject({ status: 'running', score: null });
      expect(await db('events').where({ account_id: accountId })).toEqual([]);
    },
  );

  it('refuses to complete a scan twice with exit 1 and keeps the single event', async () => {
    const { accountId, siteId } = await newSite();
    const scanId = await startScan(siteId);
    await runSvcJson(['scans', 'complete', scanId, '--score', '70'], env);

    const run = await runSvc(['scans', 'complete', scanId, '--score', '75'], env);

    expect(run.code).toBe(1);
    expect(run.stderr).toBe(`svc: error: scan ${scanId} is completed, not running\n`);
    expect(await db('scans').where({ id: scanId }).first()).toMatchObject({ score: 70 });
    expect(await db('events').where({ account_id: accountId })).toHaveLength(1);
  });

  it('still records the scan, its event and its delivery when Redis is away, exits 0 and warns that the sweep will queue the first attempt', async () => {
    const { accountId, siteId, subscriptionId } = await newSubscribedSite();
    const scanId = await startScan(siteId);
    const offline = testEnv({ REDIS_URL: 'redis://127.0.0.1:1', LOG_LEVEL: 'warn' });

    const run = await runSvc(['scans', 'complete', scanId, '--score', '55', '--json'], offline);

    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout) as { eventId: string };
    expect(out).toMatchObject({ id: scanId, status: 'completed', score: 55 });
    const warnings = run.stderr.trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(warnings).toEqual([
      expect.objectContaining({ level: 'warn', service: 'svc', eventId: out.eventId, message: expect.stringMatching(/enqueue failed; the dispatcher sweep/) }),
    ]);
    expect(await db('events').where({ account_id: accountId }).select('id')).toEqual([{ id: out.eventId }]);
    // Pending in Postgres, due now: the dispatchers' sweep queues it once it is overdue.
    expect(await db('deliveries').where({ event_id: out.eventId }).select('subscription_id', 'status', 'attempt_count')).toEqual([
      { subscription_id: subscriptionId, status: 'pending', attempt_count: 0 },
    ]);
  });
});

describe('svc scans fail', () => {
  it('marks the scan failed and fires no event', async () => {
    const { accountId, siteId } = await newSite();
    const scanId = await startScan(siteId);

    const out = await runSvcJson(['scans', 'fail', scanId], env);

    expect(out).toEqual({ id: scanId, status: 'failed' });
    expect(await db('scans').where({ id: scanId }).first()).toMatchObject({ status: 'failed', score: null, completed_at: null });
    expect(await db('events').where({ account_id: accountId })).toEqual([]);
  });

  it('refuses to fail a completed scan with exit 1 and leaves it completed', async () => {
    const { siteId } = await newSite();
    const scanId = await startScan(siteId);
    await runSvcJson(['scans', 'complete', scanId, '--score', '60'], env);

    const run = await runSvc(['scans', 'fail', scanId], env);

    expect(run.code).toBe(1);
    expect(run.stderr).toBe(`svc: error: scan ${scanId} is completed, not running\n`);
    expect(await db('scans').where({ id: scanId }).first()).toMatchObject({ status: 'completed' });
  });

  it('refuses an unknown scan id with exit 2', async () => {
    const run = await runSvc(['scans', 'fail', `scan_${uniqueTag()}`], env);

    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^svc: error: scan scan_\w+ does not exist\n$/);
  });
});
