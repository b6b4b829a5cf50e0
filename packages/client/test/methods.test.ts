import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, completeScan } from '@svc/core';
import { markScanFailed, startScan } from '@svc/core/operator';
import { seedAccount, seedSite } from '@svc/core/testing';
import { SiteVisibilityClient, type ScanHistoryEntry } from '../src/index.js';
import { errorOf, startApi, type ListeningApi } from './support.js';

let api: ListeningApi;

beforeAll(async () => {
  api = await startApi({ RATE_LIMIT_PER_MINUTE: '100000' });
});
afterAll(async () => {
  await api.close();
});

const producer = () => ({ db: api.db, queues: api.queues });

async function customer(scopes: Parameters<typeof seedAccount>[1] = ['read:sites', 'read:scans', 'read:ai-monitor', 'read:webhooks', 'write:webhooks']) {
  const { accountId, key } = await seedAccount(api.db, scopes);
  return { accountId, client: new SiteVisibilityClient({ apiKey: key, baseUrl: api.baseUrl }) };
}

async function completedScan(siteId: string, score: number) {
  const scan = await startScan(api.db, siteId, { trigger: 'scheduled' });
  return (await completeScan(producer(), { scanId: scan.id, score, categories: [{ name: 'Performance', score: score / 2 }] })).scan;
}

describe('every read method against the real API', () => {
  it('walks the whole score history across pages, latest first, while new scans complete, each scan once', async () => {
    const { accountId, client } = await customer();
    const site = await seedSite(api.db, accountId);
    const existing = [];
    for (let i = 0; i < 7; i++) existing.push(await completedScan(site.id, i));

    const walked: ScanHistoryEntry[] = [];
    for await (const scan of client.scans.history(site.id, { limit: 3 })) {
      walked.push(scan);
      if (walked.length === 2) await completedScan(site.id, 99); // newer than every page still to come
    }

    expect(walked.map((s) => s.id)).toEqual(existing.map((s) => s.id).reverse());
    expect(walked[0]).toEqual({
      id: existing[6]!.id,
      score: 6,
      status: 'completed',
      trigger: 'scheduled',
      startedAt: expect.any(String),
      completedAt: existing[6]!.completedAt!.toISOString(),
    });
  });

  it('fetches only what completed after `since`, as a nightly job does with its checkpoint', async () => {
    const { accountId, client } = await customer();
    const site = await seedSite(api.db, accountId);
    const old = await completedScan(site.id, 1);
    const fresh = await completedScan(site.id, 2);

    const since: string[] = [];
    for await (const scan of client.scans.history(site.id, { since: old.completedAt! })) since.push(scan.id);

    expect(since).toEqual([fresh.id]);
  });

  it('reads one scan of any status with its categories, and the latest AI Monitor run or null', async () => {
    const { accountId, client } = await customer();
    const site = await seedSite(api.db, accountId);
    const done = await completedScan(site.id, 80);
    const failed = await markScanFailed(api.db, (await startScan(api.db, site.id)).id);

    const before = await client.aiMonitor.latest(site.id);
    const { run } = await completeAiMonitorRun(producer(), { siteId: site.id, compositeScore: 71.5, engines: [{ engine: 'chatgpt', score: 70 }] });
    const after = await client.aiMonitor.latest(site.id);

    expect(await client.scans.get(done.id)).toMatchObject({ id: done.id, status: 'completed', score: 80, categories: [{ name: 'Performance', score: 40 }] });
    expect(await client.scans.get(failed.id)).toMatchObject({ id: failed.id, status: 'failed', score: null, completedAt: null, categories: [] });
    expect(before).toBeNull();
    expect(after).toEqual({ id: run.id, siteId: site.id, status: 'completed', compositeScore: 71.5, completedAt: expect.any(String), engines: [{ engine: 'chatgpt', score: 70 }] });
  });

  it('creates, lists and deletes a subscription, the secret shown once', async () => {
    const { client } = await customer();

    const created = await client.webhooks.create({ url: 'https://hooks.example.com/svc', events: ['scan.completed'] });
    const listed = await client.webhooks.list();
    const deleted = await client.webhooks.delete(created.id);
    const afterDelete = await client.webhooks.list();

    expect(created.secret).toMatch(/^[0-9a-f]{64}$/);
    expect(created.standardWebhooksSecret).toBe(`whsec_${Buffer.from(created.secret, 'utf8').toString('base64')}`);
    expect(listed).toEqual([expect.objectContaining({ id: created.id, url: created.url, events: ['scan.completed'], failureCount: 0, lastDeliveryAt: null })]);
    expect(listed[0]).not.toHaveProperty('secret');
    expect(deleted).toEqual({ deleted: true, id: created.id });
    expect(afterDelete).toEqual([]);
  });
});

describe('the self-service calls against the real API', () => {
  const secretOf = async (id: string) => (await api.db('webhook_subscriptions').where({ id }).first('secret', 'previous_secret', 'previous_secret_expires_at')) as {
    secret: string;
    previous_secret: string | null;
    previous_secret_expires_at: Date | null;
  };
  const disable = (id: string) => api.db('webhook_subscriptions').where({ id }).update({ status: 'disabled', disabled_at: new Date() });
  /** Seconds from now to an ISO time. */
  const secondsUntil = (iso: string) => (Date.parse(iso) - Date.now()) / 1000;

  it('changes a subscription’s url, then its events, keeping its secret, creation time and failure count', async () => {
    const { client } = await customer();
    const created = await client.webhooks.create({ url: 'https://hooks.example.com/a', events: ['scan.completed'] });

    const moved = await client.webhooks.update(created.id, { url: 'https://hooks.example.com/b' });
    const both = await client.webhooks.update(created.id, { url: 'https://hooks.example.com/c', events: ['power_up.deployed', 'ai_check.completed', 'power_up.deployed'] });
    const listed = await client.webhooks.list();

    expect(moved).toEqual({ id: created.id, url: 'https://hooks.example.com/b', events: ['scan.completed'], createdAt: created.createdAt, lastDeliveryAt: null, failureCount: 0, status: 'active' });
    expect(both).toEqual({ ...moved, url: 'https://hooks.example.com/c', events: ['power_up.deployed', 'ai_check.completed'] });
    expect(listed).toEqual([both]);
    expect((await secretOf(created.id)).secret).toBe(created.secret);
  });

  it('refuses an empty change, a bad url or events, an auto-disabled subscription and another account’s, changing nothing', async () => {
    const { client } = await customer();
    const other = await customer();
    const created = await client.webhooks.create({ url: 'https://hooks.example.com/keep', events: ['*'] });
    const disabled = await client.webhooks.create({ url: 'https://hooks.example.com/off', events: ['*'] });
    await disable(disabled.id);

    const cases = await Promise.all([
      errorOf(client.webhooks.update(created.id, {})),
      errorOf(client.webhooks.update(created.id, { url: 'http://plain.example.com' })),
      errorOf(client.webhooks.update(created.id, { events: ['*', 'scan.completed'] })),
      errorOf(client.webhooks.update(disabled.id, { url: 'https://hooks.example.com/on' })),
      errorOf(other.client.webhooks.update(created.id, { url: 'https://hooks.example.com/theirs' })),
    ]);

    expect(cases.map((e) => [e.code, e.status])).toEqual([
      ['invalid_body', 400],
      ['invalid_url', 400],
      ['invalid_events', 400],
      ['subscription_disabled', 409],
      ['not_found', 404],
    ]);
    expect((await client.webhooks.list()).map((s) => [s.id, s.url, s.events, s.status])).toEqual([
      [disabled.id, 'https://hooks.example.com/off', ['*'], 'disabled'],
      [created.id, 'https://hooks.example.com/keep', ['*'], 'active'],
    ]);
  });

  it('rotates a secret: a new one in both forms, the replaced one signing until previousSecretExpiresAt (a day by default, none with 0)', async () => {
    const { client } = await customer();
    const created = await client.webhooks.create({ url: 'https://hooks.example.com/rotate', events: ['*'] });

    const hour = await client.webhooks.rotateSecret(created.id, { overlapSeconds: 3600 });
    const stored = await secretOf(created.id);
    const byDefault = await client.webhooks.rotateSecret(created.id);
    const none = await client.webhooks.rotateSecret(created.id, { overlapSeconds: 0 });
    const last = await secretOf(created.id);

    expect(hour).toEqual({
      id: created.id,
      secret: expect.stringMatching(/^[0-9a-f]{64}$/),
      standardWebhooksSecret: `whsec_${Buffer.from(hour.secret, 'utf8').toString('base64')}`,
      previousSecretExpiresAt: expect.any(String),
    });
    expect(hour.secret).not.toBe(created.secret);
    expect(secondsUntil(hour.previousSecretExpiresAt!)).toBeGreaterThan(3590);
    expect(secondsUntil(hour.previousSecretExpiresAt!)).toBeLessThanOrEqual(3600);
    expect(stored).toEqual({ secret: hour.secret, previous_secret: created.secret, previous_secret_expires_at: new Date(hour.previousSecretExpiresAt!) });
    expect(secondsUntil(byDefault.previousSecretExpiresAt!)).toBeGreaterThan(86_390);
    expect(new Set([created.secret, hour.secret, byDefault.secret, none.secret]).size).toBe(4);
    expect(none.previousSecretExpiresAt).toBeNull();
    expect(last).toEqual({ secret: none.secret, previous_secret: null, previous_secret_expires_at: null });
  });

  it('refuses an overlap out of range and another account’s subscription; recovery refuses a bad window and an auto-disabled subscription', async () => {
    const { client } = await customer();
    const other = await customer();
    const created = await client.webhooks.create({ url: 'https://hooks.example.com/refuse', events: ['*'] });
    const disabled = await client.webhooks.create({ url: 'https://hooks.example.com/refuse-off', events: ['*'] });
    await disable(disabled.id);

    const cases = await Promise.all([
      errorOf(client.webhooks.rotateSecret(created.id, { overlapSeconds: 604_801 })),
      errorOf(client.webhooks.rotateSecret(created.id, { overlapSeconds: -1 })),
      errorOf(other.client.webhooks.rotateSecret(created.id)),
      errorOf(client.webhooks.recover(created.id, { since: 'yesterday' })),
      errorOf(client.webhooks.recover(created.id, { since: new Date(), until: new Date(Date.now() - 60_000) })),
      errorOf(client.webhooks.recover(disabled.id, { since: new Date(Date.now() - 60_000) })),
      errorOf(other.client.webhooks.recover(created.id, { since: new Date(Date.now() - 60_000) })),
    ]);

    expect(cases.map((e) => [e.code, e.status])).toEqual([
      ['invalid_body', 400],
      ['invalid_body', 400],
      ['not_found', 404],
      ['invalid_body', 400],
      ['invalid_body', 400],
      ['subscription_disabled', 409],
      ['not_found', 404],
    ]);
    expect(cases[0]!.message).toContain('overlapSeconds');
    expect((await secretOf(created.id)).previous_secret).toBeNull();
  });
});

describe('every error code reaches the caller as SiteVisibilityError', () => {
  it('names the spec’s codes with their statuses', async () => {
    const { accountId, client } = await customer();
    const site = await seedSite(api.db, accountId);
    const other = await customer();
    const narrow = await customer(['read:sites']);

    const cases = await Promise.all([
      errorOf(other.client.sites.get(site.id)),
      errorOf(narrow.client.scans.historyPage(site.id)),
      errorOf(narrow.client.aiMonitor.latest(site.id)),
      errorOf(client.scans.historyPage(site.id, { limit: 0 })),
      errorOf(client.scans.historyPage(site.id, { cursor: 'not-a-cursor' })),
      errorOf(client.scans.historyPage(site.id, { since: 'yesterday' })),
      errorOf(client.webhooks.create({ url: 'http://plain.example.com', events: ['*'] })),
      errorOf(client.webhooks.create({ url: 'https://ok.example.com', events: ['scan.started' as never] })),
      errorOf(client.webhooks.delete('wh_unknown')),
      errorOf(new SiteVisibilityClient({ apiKey: 'not-a-key', baseUrl: api.baseUrl }).sites.list()),
    ]);

    expect(cases.map((e) => [e.code, e.status])).toEqual([
      ['not_found', 404],
      ['insufficient_scope', 403],
      ['insufficient_scope', 403],
      ['invalid_query', 400],
      ['invalid_query', 400],
      ['invalid_query', 400],
      ['invalid_url', 400],
      ['invalid_events', 400],
      ['not_found', 404],
      ['invalid_key', 401],
    ]);
    expect(cases[1]!.message).toContain('read:scans');
    expect(cases[2]!.message).toContain('read:ai-monitor');
    expect(cases[3]!.message).toContain('limit');
    expect(cases[4]!.message).toContain('cursor');
    expect(cases[5]!.message).toContain('since');
    expect(cases.every((e) => /^[0-9a-f-]{36}$/.test(e.requestId ?? ''))).toBe(true);
  });
});
