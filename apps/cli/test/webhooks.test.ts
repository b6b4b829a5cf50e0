import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { RECOVERY_MAX, standardWebhooksSecret } from '@svc/core';
import { createSubscription } from '@svc/core/operator';
import { seedAccount, seedSite, uniqueTag, waitFor } from '@svc/core/testing';
import type { Harness } from '@svc/dispatcher/test-support';
import { isWebhookEventList, isWebhookUrl, parseInstant, parseOverlapSeconds } from '../src/commands/webhook-rules.js';
import { ISO_8601, openDeliveryStage, openTestDb, PROMPT_DELIVERY_MS, runSvc, runSvcJson, testEnv } from './support.js';

const db = openTestDb();
const env = testEnv();
/** A dispatcher, its database and a receiver, for the recoveries. */
let stage: { harness: Harness; env: Record<string, string> };

beforeAll(async () => {
  stage = await openDeliveryStage();
});
afterAll(async () => {
  await stage.harness.close();
  await db.destroy();
});

/** A subscription of a new account in the shared test database, where no dispatcher sends. */
async function newSubscription(fields: { status?: 'active' | 'disabled' | 'deleting'; failureCount?: number } = {}) {
  const { accountId } = await seedAccount(db);
  const sub = await createSubscription(db, accountId, { url: `https://hooks.example.com/${uniqueTag()}`, events: ['scan.completed'] });
  if (fields.status || fields.failureCount) {
    await db('webhook_subscriptions')
      .where({ id: sub.id })
      .update({ status: fields.status ?? 'active', failure_count: fields.failureCount ?? 0, ...(fields.status === 'disabled' ? { disabled_at: new Date() } : {}) });
  }
  return { accountId, sub };
}

const rowOf = (id: string) =>
  db('webhook_subscriptions').where({ id }).first('url', 'events', 'secret', 'previous_secret', 'previous_secret_expires_at', 'failure_count', 'status', 'created_at');
const secondsUntil = (iso: string) => (Date.parse(iso) - Date.now()) / 1000;

describe('svc webhooks rotate-secret', () => {
  it('gives any account’s subscription a new secret in both forms; the old one signs beside it for --overlap seconds (a day by default, none with 0)', async () => {
    const { accountId, sub } = await newSubscription();

    const hour = await runSvcJson<Record<string, string | null>>(['webhooks', 'rotate-secret', sub.id, '--overlap', '3600'], env);
    const afterHour = await rowOf(sub.id);
    const day = await runSvcJson<Record<string, string | null>>(['webhooks', 'rotate-secret', sub.id], env);
    const none = await runSvcJson<Record<string, string | null>>(['webhooks', 'rotate-secret', sub.id, '--overlap', '0'], env);
    const afterNone = await rowOf(sub.id);

    expect(hour).toEqual({
      id: sub.id,
      accountId,
      secret: expect.stringMatching(/^[0-9a-f]{64}$/),
      standardWebhooksSecret: standardWebhooksSecret(hour.secret!),
      previousSecretExpiresAt: expect.stringMatching(ISO_8601),
    });
    expect(hour.standardWebhooksSecret).toBe(`whsec_${Buffer.from(hour.secret!, 'utf8').toString('base64')}`);
    expect(secondsUntil(hour.previousSecretExpiresAt!)).toBeGreaterThan(3590);
    expect(secondsUntil(hour.previousSecretExpiresAt!)).toBeLessThanOrEqual(3600);
    expect(afterHour).toMatchObject({ secret: hour.secret, previous_secret: sub.secret, previous_secret_expires_at: new Date(hour.previousSecretExpiresAt!) });
    expect(secondsUntil(day.previousSecretExpiresAt!)).toBeGreaterThan(86_390);
    expect(none.previousSecretExpiresAt).toBeNull();
    expect(afterNone).toMatchObject({ secret: none.secret, previous_secret: null, previous_secret_expires_at: null });
    expect(new Set([sub.secret, hour.secret, day.secret, none.secret]).size).toBe(4);
  });

  it('tells a person the secret, until when the old one signs, and to hand it over now; an auto-disabled subscription is rotated too', async () => {
    const { accountId, sub } = await newSubscription({ status: 'disabled' });

    const run = await runSvc(['webhooks', 'rotate-secret', sub.id, '--overlap', '60'], env);

    expect(run).toMatchObject({ code: 0, stderr: '' });
    const secret = (await rowOf(sub.id)).secret as string;
    expect(run.stdout.split('\n')).toEqual([
      `Rotated the secret of subscription ${sub.id} (account ${accountId})`,
      `  secret: ${secret}`,
      `  standardWebhooksSecret: ${standardWebhooksSecret(secret)}`,
      expect.stringMatching(/^The previous secret also signs every attempt until \d{4}-\d\d-\d\dT[\d:.]+Z\.$/),
      'Hand the new secret to the subscription’s owner now: it is not shown again.',
      '',
    ]);
  });

  it('refuses an overlap out of range or not whole, and an unknown or revoked subscription, with exit 2 and nothing rotated', async () => {
    const { sub } = await newSubscription();
    const revoked = await newSubscription({ status: 'deleting' });

    const runs = await Promise.all([
      runSvc(['webhooks', 'rotate-secret', sub.id, '--overlap', '604801', '--json'], env),
      runSvc(['webhooks', 'rotate-secret', sub.id, '--overlap', '-1'], env),
      runSvc(['webhooks', 'rotate-secret', sub.id, '--overlap', '1.5'], env),
      runSvc(['webhooks', 'rotate-secret', 'wh_does_not_exist', '--json'], env),
      runSvc(['webhooks', 'rotate-secret', revoked.sub.id], env),
    ]);

    expect(runs.map((r) => [r.code, r.stdout])).toEqual(runs.map(() => [2, '']));
    expect(runs[0]!.stderr).toBe("svc: error: option '--overlap <seconds>' argument '604801' is invalid. It must be a whole number of seconds from 0 to 604800.\n");
    expect(runs[3]!.stderr).toBe('svc: error: subscription wh_does_not_exist does not exist\n');
    expect(runs[4]!.stderr).toBe(`svc: error: subscription ${revoked.sub.id} does not exist\n`);
    expect((await rowOf(sub.id)).secret).toBe(sub.secret);
    expect((await rowOf(revoked.sub.id)).secret).toBe(revoked.sub.secret);
  });
});

describe('svc webhooks update', () => {
  it('changes the url, the events, or both, keeping the secret, creation time and failure count; events are trimmed and repeats dropped', async () => {
    const { accountId, sub } = await newSubscription({ failureCount: 3 });

    const moved = await runSvcJson(['webhooks', 'update', sub.id, '--url', 'https://hooks.example.com/moved'], env);
    const events = await runSvcJson(['webhooks', 'update', sub.id, '--events', 'power_up.deployed, ai_check.completed,power_up.deployed'], env);
    const both = await runSvcJson(['webhooks', 'update', sub.id, '--url', 'https://hooks.example.com/both', '--events', '*'], env);

    expect(moved).toEqual({
      id: sub.id,
      url: 'https://hooks.example.com/moved',
      events: ['scan.completed'],
      createdAt: sub.createdAt.toISOString(),
      lastDeliveryAt: null,
      failureCount: 3,
      status: 'active',
      accountId,
    });
    expect(events).toEqual({ ...moved, events: ['power_up.deployed', 'ai_check.completed'] });
    expect(both).toEqual({ ...moved, url: 'https://hooks.example.com/both', events: ['*'] });
    expect(await rowOf(sub.id)).toMatchObject({ url: 'https://hooks.example.com/both', events: ['*'], secret: sub.secret, failure_count: 3, status: 'active' });
  });

  it('prints one line for a person', async () => {
    const { accountId, sub } = await newSubscription();

    const run = await runSvc(['webhooks', 'update', sub.id, '--events', 'scan.completed,ai_check.completed'], env);

    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toBe(`Updated subscription ${sub.id} (account ${accountId}): ${sub.url}  [scan.completed, ai_check.completed]  active, never delivered, failureCount 0\n`);
  });

  it('refuses what the API refuses with exit 2: no change, a url or events against its rules, an unknown or revoked subscription; nothing changes', async () => {
    const { sub } = await newSubscription();
    const revoked = await newSubscription({ status: 'deleting' });

    const runs = await Promise.all([
      runSvc(['webhooks', 'update', sub.id, '--json'], env),
      runSvc(['webhooks', 'update', sub.id, '--url', 'http://hooks.example.com/plain'], env),
      runSvc(['webhooks', 'update', sub.id, '--url', `https://hooks.example.com/${'a'.repeat(500)}`], env),
      runSvc(['webhooks', 'update', sub.id, '--events', '*,scan.completed'], env),
      runSvc(['webhooks', 'update', sub.id, '--events', 'scan.started'], env),
      runSvc(['webhooks', 'update', sub.id, '--events', ' , '], env),
      runSvc(['webhooks', 'update', 'wh_does_not_exist', '--url', 'https://hooks.example.com/x'], env),
      runSvc(['webhooks', 'update', revoked.sub.id, '--url', 'https://hooks.example.com/x'], env),
    ]);

    expect(runs.map((r) => [r.code, r.stdout])).toEqual(runs.map(() => [2, '']));
    expect(runs.map((r) => r.stderr)).toEqual([
      'svc: error: give --url or --events, or both\n',
      "svc: error: option '--url <url>' argument 'http://hooks.example.com/plain' is invalid. It must be a valid URL starting with https:// and at most 500 characters.\n",
      expect.stringMatching(/^svc: error: option '--url <url>' argument 'https:\/\/hooks\.example\.com\/a+' is invalid\. It must be a valid URL/),
      "svc: error: option '--events <events>' argument '*,scan.completed' is invalid. It must be a comma-separated list of scan.completed, ai_check.completed, power_up.deployed, or * alone.\n",
      "svc: error: option '--events <events>' argument 'scan.started' is invalid. It must be a comma-separated list of scan.completed, ai_check.completed, power_up.deployed, or * alone.\n",
      "svc: error: option '--events <events>' argument ' , ' is invalid. It must be a comma-separated list of scan.completed, ai_check.completed, power_up.deployed, or * alone.\n",
      'svc: error: subscription wh_does_not_exist does not exist\n',
      `svc: error: subscription ${revoked.sub.id} does not exist\n`,
    ]);
    expect(await rowOf(sub.id)).toMatchObject({ url: sub.url, events: ['scan.completed'] });
  });

  it('refuses an auto-disabled subscription with exit 1, leaving it disabled and unchanged', async () => {
    const { sub } = await newSubscription({ status: 'disabled' });

    const run = await runSvc(['webhooks', 'update', sub.id, '--url', 'https://hooks.example.com/revived', '--json'], env);

    expect(run).toMatchObject({ code: 1, stdout: '' });
    expect(run.stderr).toMatch(/^svc: error: This webhook subscription was disabled after repeated failures and never resumes/);
    expect(await rowOf(sub.id)).toMatchObject({ url: sub.url, status: 'disabled' });
  });
});

describe('svc webhooks recover', () => {
  it('sends again what failed during an outage, at once through its own queued jobs; a dry run only counts; a second run finds nothing', async () => {
    const h = stage.harness;
    const { accountId } = await seedAccount(h.db);
    const site = await seedSite(h.db, accountId);
    const path = `/outage/${uniqueTag()}`;
    h.receiver.answerWith(path, 503);
    const sub = await createSubscription(h.db, accountId, { url: h.receiver.url(path), events: ['ai_check.completed'] });
    const since = new Date(Date.now() - 1_000);
    const events: string[] = [];
    for (const score of ['50', '60']) events.push((await runSvcJson<{ eventId: string }>(['ai-runs', 'complete', '--site', site.id, '--score', score], stage.env)).eventId);
    await waitFor(
      async () => (await h.db('deliveries').where({ subscription_id: sub.id, status: 'failed' })).length === 2,
      15_000,
      'both deliveries to fail for good',
    );
    const failed = await h.db('deliveries').where({ subscription_id: sub.id }).pluck('id');
    h.receiver.answerWith(path, 200);

    const dryRun = await runSvcJson(['webhooks', 'recover', sub.id, '--since', since.toISOString(), '--dry-run'], stage.env);
    const storedAfterDryRun = await h.db('deliveries').where({ subscription_id: sub.id }).count({ n: '*' });
    const startedAt = Date.now();
    const recovery = await runSvcJson<{ until: string }>(['webhooks', 'recover', sub.id, '--since', since.toISOString()], stage.env);
    await waitFor(async () => (await h.db('deliveries').where({ subscription_id: sub.id, status: 'delivered' })).length === 2, 10_000, 'the redeliveries delivered');
    const again = await runSvc(['webhooks', 'recover', sub.id, '--since', since.toISOString(), '--until', recovery.until], stage.env);

    expect(dryRun).toEqual({ subscriptionId: sub.id, accountId, count: 2, since: since.toISOString(), until: expect.stringMatching(ISO_8601), dryRun: true });
    expect(storedAfterDryRun).toEqual([{ n: '2' }]);
    expect(recovery).toEqual({ subscriptionId: sub.id, accountId, count: 2, since: since.toISOString(), until: expect.stringMatching(ISO_8601), dryRun: false });
    const redeliveries = await h.db('deliveries').where({ subscription_id: sub.id }).whereNotNull('redelivery_of').select('id', 'event_id', 'redelivery_of', 'status');
    expect(redeliveries.map((d) => d.redelivery_of).sort()).toEqual([...failed].sort());
    expect(redeliveries.map((d) => d.event_id).sort()).toEqual([...events].sort());
    const received = h.receiver.to(path).filter((r) => redeliveries.some((d) => d.id === r.headers['x-service-delivery-id']));
    expect(received).toHaveLength(2);
    // Within seconds of the command, while the dispatcher's sweep runs only every minute: its own jobs brought them.
    expect(Math.max(...received.map((r) => r.receivedAt)) - startedAt).toBeLessThan(PROMPT_DELIVERY_MS + 1_000);
    expect(again).toMatchObject({ code: 0, stderr: '' });
    expect(again.stdout).toBe(`Queued 0 deliveries of subscription ${sub.id} that failed between ${since.toISOString()} and ${recovery.until}, each again as a new delivery\n`);
  });

  it('prints a dry run for a person', async () => {
    const { sub } = await newSubscription();

    const run = await runSvc(['webhooks', 'recover', sub.id, '--since', '2026-11-20T00:00:00Z', '--until', '2026-11-21T00:00:00+01:00', '--dry-run'], env);

    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toBe(
      `Dry run: 0 deliveries of subscription ${sub.id} that failed between 2026-11-20T00:00:00.000Z and 2026-11-20T23:00:00.000Z would be sent again; nothing was sent\n`,
    );
  });

  it('refuses a window that is not one, or times that are not ISO 8601 with an offset, with exit 2; an unknown subscription with exit 2; an auto-disabled one with exit 1', async () => {
    const { sub } = await newSubscription();
    const disabled = await newSubscription({ status: 'disabled' });

    const runs = await Promise.all([
      runSvc(['webhooks', 'recover', sub.id, '--since', '2026-11-20T00:00:00Z', '--until', '2026-11-20T00:00:00Z'], env),
      runSvc(['webhooks', 'recover', sub.id, '--since', new Date(Date.now() + 60_000).toISOString()], env),
      runSvc(['webhooks', 'recover', sub.id, '--since', 'yesterday'], env),
      runSvc(['webhooks', 'recover', sub.id, '--since', '2026-11-20T00:00:00'], env),
      runSvc(['webhooks', 'recover', sub.id, '--since', '2026-02-30T00:00:00Z'], env),
      runSvc(['webhooks', 'recover', sub.id], env),
      runSvc(['webhooks', 'recover', 'wh_does_not_exist', '--since', '2026-11-20T00:00:00Z'], env),
      runSvc(['webhooks', 'recover', disabled.sub.id, '--since', '2026-11-20T00:00:00Z', '--json'], env),
    ]);

    expect(runs.map((r) => r.code)).toEqual([2, 2, 2, 2, 2, 2, 2, 1]);
    expect(runs.every((r) => r.stdout === '')).toBe(true);
    expect(runs[0]!.stderr).toBe('svc: error: --until must be after --since (--until is now when it is absent)\n');
    expect(runs[1]!.stderr).toBe(runs[0]!.stderr);
    expect(runs[2]!.stderr).toBe("svc: error: option '--since <time>' argument 'yesterday' is invalid. It must be an ISO 8601 time with its offset, such as 2026-11-20T00:00:00Z.\n");
    expect(runs[3]!.stderr).toMatch(/argument '2026-11-20T00:00:00' is invalid/);
    expect(runs[4]!.stderr).toMatch(/argument '2026-02-30T00:00:00Z' is invalid/);
    expect(runs[5]!.stderr).toBe("svc: error: required option '--since <time>' not specified\n");
    expect(runs[6]!.stderr).toBe('svc: error: subscription wh_does_not_exist does not exist\n');
    expect(runs[7]!.stderr).toMatch(/^svc: error: This webhook subscription was disabled after repeated failures and never resumes/);
  });

  it(`refuses a window of more than ${RECOVERY_MAX} failed deliveries with exit 1 and the count, sending nothing`, async () => {
    const h = stage.harness;
    const { accountId } = await seedAccount(h.db);
    // Written as failed for good a minute ago: no dispatcher attempt is left to make.
    const sub = await createSubscription(h.db, accountId, { url: h.receiver.url(`/many/${uniqueTag()}`), events: ['*'] });
    const n = RECOVERY_MAX + 1;
    await h.db.raw(
      `WITH e AS (
         INSERT INTO events (id, account_id, type, body)
         SELECT 'evt_many_' || ? || '_' || g, ?, 'scan.completed', '{}' FROM generate_series(1, ?) g
         RETURNING id
       )
       INSERT INTO deliveries (id, event_id, subscription_id, status, attempt_count, finished_at)
       SELECT 'dlv_' || substr(e.id, 5), e.id, ?, 'failed', 7, clock_timestamp() - interval '1 minute' FROM e`,
      [sub.id, accountId, n, sub.id],
    );

    const run = await runSvc(['webhooks', 'recover', sub.id, '--since', new Date(Date.now() - 3_600_000).toISOString(), '--dry-run'], stage.env);

    expect(run).toMatchObject({ code: 1, stdout: '' });
    expect(run.stderr).toBe(`svc: error: ${n} failed deliveries are in this window; a recovery sends at most ${RECOVERY_MAX}. Narrow the window with since and until.\n`);
    expect(await h.db('deliveries').where({ subscription_id: sub.id }).count({ n: '*' })).toEqual([{ n: String(n) }]);
  });
});

describe('svc webhooks takes what the API takes', () => {
  /** The API's own body validators, compiled from its OpenAPI document (read from its build: svc itself never imports apps/api). */
  async function apiValidators() {
    const module = (await import(new URL('../../../api/dist/src/http/openapi-validators.js', import.meta.url).href)) as {
      validateBody(operationId: string): (body: unknown) => unknown;
    };
    const verdict = (validate: (body: unknown) => unknown) => (body: unknown) => {
      try {
        validate(body);
        return 'ok';
      } catch (error) {
        return (error as { code: string }).code;
      }
    };
    return {
      update: verdict(module.validateBody('updateWebhook')),
      rotate: verdict(module.validateBody('rotateWebhookSecret')),
      recover: verdict(module.validateBody('recoverWebhookDeliveries')),
    };
  }
  const svcVerdict = (code: string, check: () => unknown) => {
    try {
      return check() === false ? code : 'ok';
    } catch {
      return code;
    }
  };

  it('accepts and refuses the same urls, event lists, overlaps and times as the API’s validators', async () => {
    const api = await apiValidators();
    const urls = [
      'https://hooks.example.com/svc',
      'HTTPS://HOOKS.EXAMPLE.COM/svc?x=1#f',
      'https://127.0.0.1:8443/hook',
      'https://[::1]/hook',
      'https://user:pass@hooks.example.com/',
      'https://a',
      `https://x.example/${'a'.repeat(500 - 'https://x.example/'.length)}`,
      `https://x.example/${'a'.repeat(501 - 'https://x.example/'.length)}`,
      `https://x.example/${'😀'.repeat(500 - 'https://x.example/'.length)}`,
      `https://x.example/${'😀'.repeat(501 - 'https://x.example/'.length)}`,
      'http://hooks.example.com/',
      'ftp://hooks.example.com/',
      'https://',
      'https:///hook',
      'https://\\hooks.example.com',
      'https://hooks.example.com/a b',
      'https://hooks.example.com/\u0007',
      'https://hooks.example.com/\t',
      'https://exa mple.com/',
      'https://hooks.example.com:99999/',
      'hooks.example.com',
      '',
    ];
    const eventLists = [
      ['*'],
      ['scan.completed'],
      ['scan.completed', 'ai_check.completed', 'power_up.deployed'],
      ['scan.completed', 'scan.completed'],
      ['*', '*'],
      [],
      ['*', 'scan.completed'],
      ['scan.completed', '*'],
      ['scan.started'],
      ['SCAN.COMPLETED'],
      [''],
    ];
    const overlaps = [0, 1, 86_400, 604_800, 604_801];
    const times = [
      '2026-11-20T00:00:00Z',
      '2026-11-20T00:00:00.123456Z',
      '2026-11-20T01:00:00+01:00',
      '2026-11-20T01:00:00+0100',
      '2026-11-20t00:00:00z',
      '2026-11-20 00:00:00Z',
      '2028-02-29T00:00:00Z',
      '2026-11-20T00:00:00',
      '2026-11-20T01:00:00+01',
      '2026-11-20',
      '2026-02-29T00:00:00Z',
      '2026-04-31T00:00:00Z',
      '2026-13-01T00:00:00Z',
      '2026-11-20T24:00:00Z',
      '2026-11-20T23:59:60Z',
      'yesterday',
    ];

    expect(urls.map((url) => [url, svcVerdict('invalid_url', () => isWebhookUrl(url))])).toEqual(urls.map((url) => [url, api.update({ url })]));
    expect(eventLists.map((events) => [events, svcVerdict('invalid_events', () => isWebhookEventList(events))])).toEqual(
      eventLists.map((events) => [events, api.update({ events })]),
    );
    expect(overlaps.map((seconds) => [seconds, svcVerdict('invalid_body', () => parseOverlapSeconds(String(seconds)))])).toEqual(
      overlaps.map((seconds) => [seconds, api.rotate({ overlapSeconds: seconds })]),
    );
    // The API reads a time that passes its schema with new Date(): one that names no instant is refused there too.
    const apiTime = (since: string) => (api.recover({ since }) === 'ok' && !Number.isNaN(new Date(since).getTime()) ? 'ok' : 'invalid_body');
    expect(times.map((time) => [time, svcVerdict('invalid_body', () => parseInstant(time))])).toEqual(times.map((time) => [time, apiTime(time)]));
  });
});
