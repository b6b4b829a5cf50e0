import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { completeScan, isSettingsCsrfToken } from '@svc/core';
import { createApiKey, createSettingsLink, createSubscription, listApiKeys } from '@svc/core/operator';
import { seedAccount, uniqueTag, waitFor } from '@svc/core/testing';
import { seedTenant, waitForDelivery, type Harness } from '@svc/dispatcher/test-support';
import { startStage, stopStage } from './delivery-stories.js';
import { bearer, createTestApi, type TestApi } from './support.js';

let h: Harness;
let api: TestApi;

// The harness's fast schedule: all 7 attempts within a second or two.
beforeAll(async () => ({ h, api } = await startStage()));
afterAll(() => stopStage({ h, api }));

const BASE = 'http://settings.example.test';

/** A browser following a link (as its Sec-Fetch headers say): what uses a sign-in link at once. */
function follow(app: TestApi['app'], path: string, cookie?: string) {
  const req = request(app).get(path).set('Sec-Fetch-Mode', 'navigate').set('Sec-Fetch-Dest', 'document').set('Sec-Fetch-Site', 'cross-site');
  return cookie ? req.set('Cookie', cookie) : req;
}

/** A fresh sign-in link's token for the account. */
async function linkToken(accountId: string, ttlSeconds?: number): Promise<string> {
  const link = await createSettingsLink(h.db, { accountId, baseUrl: BASE, ...(ttlSeconds ? { ttlSeconds } : {}) });
  const url = new URL(link.url);
  expect(url.origin).toBe(BASE);
  expect(url.pathname).toBe('/settings/sign-in');
  return url.searchParams.get('token')!;
}

/** An owner signed in to Settings: the session cookie and the CSRF token its pages carry. */
async function signIn(accountId: string) {
  const res = await follow(api.app, `/settings/sign-in?token=${await linkToken(accountId)}`);
  expect(res.status).toBe(200);
  const cookie = String(res.headers['set-cookie']).split(';')[0]!;
  const page = await request(api.app).get('/settings/api-keys').set('Cookie', cookie);
  expect(page.status).toBe(200);
  const csrf = /name="_csrf" value="([^"]+)"/.exec(page.text)![1]!;
  return {
    cookie,
    csrf,
    get: (path: string) => request(api.app).get(path).set('Cookie', cookie),
    /** A POST as the page's form sends it; a create form's single-use token is read from a fresh page unless given. */
    post: async (path: string, form: Record<string, string | string[]>, withCsrf = true) => {
      const once: Record<string, string> = CREATE_FORMS.includes(path) && form._form === undefined ? { _form: await formToken(cookie, path) } : {};
      return request(api.app)
        .post(path)
        .set('Cookie', cookie)
        .type('form')
        .send(formBody({ ...form, ...once, ...(withCsrf ? { _csrf: csrf } : ({} as Record<string, string>)) }));
    },
  };
}

const CREATE_FORMS = ['/settings/api-keys', '/settings/webhooks'];

/** The single-use token of the create form on a freshly rendered page. */
async function formToken(cookie: string, path: string): Promise<string> {
  const page = await request(api.app).get(path).set('Cookie', cookie);
  return /name="_form" value="([^"]+)"/.exec(page.text)![1]!;
}

/** An urlencoded form as a browser sends it: a list field once per value. */
function formBody(form: Record<string, string | string[]>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(form)) for (const v of Array.isArray(value) ? value : [value]) params.append(name, v);
  return params.toString();
}

/** An account without any key, as a new customer's is. */
async function newOwner(): Promise<string> {
  const { accountId } = await seedAccount(h.db, ['read:sites']);
  await h.db('api_keys').where({ account_id: accountId }).del();
  return accountId;
}

describe('signing in to Settings with a link', () => {
  it('opens a session for the link’s account with a cookie only /settings receives, HttpOnly and SameSite=Strict, and moves on to the API keys page', async () => {
    const accountId = await newOwner();

    const res = await follow(api.app, `/settings/sign-in?token=${await linkToken(accountId)}`);

    expect(res.status).toBe(200);
    const cookie = String(res.headers['set-cookie']);
    expect(cookie).toMatch(/^svc_settings=svcs_[A-Za-z0-9_-]{43}; Path=\/settings; Max-Age=43200; HttpOnly; SameSite=Strict$/);
    expect(res.text).toContain('<meta http-equiv="refresh" content="0;url=/settings/api-keys">');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['content-security-policy']).toContain("default-src 'none'");
    const sessions = await h.db('settings_sessions').where({ account_id: accountId });
    expect(sessions).toHaveLength(1);
    // Only the hash is stored.
    expect(sessions[0].token_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(sessions)).not.toContain(cookie.split(';')[0]!.split('=')[1]!);
  });

  it('marks the cookie Secure when PUBLIC_BASE_URL is https', async () => {
    const secureApi = createTestApi({ DATABASE_URL: h.config.databaseUrl, QUEUE_PREFIX: h.config.queuePrefix, PUBLIC_BASE_URL: 'https://visibility.example.com' }, { db: h.db });
    try {
      const res = await follow(secureApi.app, `/settings/sign-in?token=${await linkToken(await newOwner())}`);
      expect(String(res.headers['set-cookie'])).toMatch(/; HttpOnly; SameSite=Strict; Secure$/);
    } finally {
      await secureApi.close();
    }
  });

  it('refuses a reused link with 410, an expired one with 410 and an unknown or altered one with 401, opening no session', async () => {
    const accountId = await newOwner();
    const used = await linkToken(accountId);
    await follow(api.app, `/settings/sign-in?token=${used}`).expect(200);
    const expired = await linkToken(accountId);
    await h.db('settings_links').update({ expires_at: h.db.raw(`now() - interval '1 second'`) }).whereNotNull('token_hash').andWhere('used_at', null).andWhere({ account_id: accountId });

    const reused = await follow(api.app, `/settings/sign-in?token=${used}`);
    const late = await follow(api.app, `/settings/sign-in?token=${expired}`);
    const altered = await follow(api.app, `/settings/sign-in?token=${used.slice(0, -1)}${used.endsWith('A') ? 'B' : 'A'}`);
    const missing = await follow(api.app, '/settings/sign-in');

    expect([reused.status, late.status, altered.status, missing.status]).toEqual([410, 410, 401, 401]);
    expect(reused.text).toContain('already been used');
    expect(late.text).toContain('expired');
    for (const res of [reused, late, altered, missing]) expect(res.headers['set-cookie']).toBeUndefined();
    expect(await h.db('settings_sessions').where({ account_id: accountId })).toHaveLength(1);
  });

  it('does not use the link for anything but a browser following it (a link preview, a scanner, a HEAD): it answers a page to continue from', async () => {
    const accountId = await newOwner();
    await h.db('accounts').where({ id: accountId }).update({ name: 'Acme <Ltd>' });
    const token = await linkToken(accountId);

    const preview = await request(api.app).get(`/settings/sign-in?token=${token}`);
    const head = await request(api.app).head(`/settings/sign-in?token=${token}`).set('Sec-Fetch-Mode', 'navigate').set('Sec-Fetch-Dest', 'document');
    const continued = await request(api.app).post('/settings/sign-in').set('Sec-Fetch-Site', 'same-origin').type('form').send(`token=${token}`);

    expect([preview.status, head.status]).toEqual([200, 200]);
    for (const res of [preview, head]) expect(res.headers['set-cookie']).toBeUndefined();
    expect(preview.text).toContain('This link opens the Settings of <strong>Acme &lt;Ltd&gt;</strong>.');
    expect(preview.text).toContain('<button type="submit">Continue to Settings</button>');
    expect(continued.status).toBe(303);
    expect(continued.headers.location).toBe('/settings/api-keys');
    const cookie = String(continued.headers['set-cookie']).split(';')[0]!;
    const page = await request(api.app).get('/settings/api-keys').set('Cookie', cookie);
    expect(page.status).toBe(200);
    expect(page.text).toContain('Account: <strong>Acme &lt;Ltd&gt;</strong>');
  });

  it('refuses a continue posted from another site or a sandboxed page (403), leaving the link unused', async () => {
    const accountId = await newOwner();
    const token = await linkToken(accountId);

    const crossSite = await request(api.app).post('/settings/sign-in').set('Sec-Fetch-Site', 'cross-site').type('form').send(`token=${token}`);
    const otherOrigin = await request(api.app).post('/settings/sign-in').set('Origin', 'https://attacker.example').type('form').send(`token=${token}`);
    const nullOrigin = await request(api.app).post('/settings/sign-in').set('Origin', 'null').type('form').send(`token=${token}`);

    expect([crossSite.status, otherOrigin.status, nullOrigin.status]).toEqual([403, 403, 403]);
    for (const res of [crossSite, otherOrigin, nullOrigin]) expect(res.headers['set-cookie']).toBeUndefined();
    expect(await h.db('settings_links').where({ account_id: accountId }).whereNotNull('used_at')).toEqual([]);
    expect((await follow(api.app, `/settings/sign-in?token=${token}`)).headers['set-cookie']).toBeDefined();
  });

  it('asks before a link of another account switches a signed-in browser, and signs the first account out when it does', async () => {
    const first = await newOwner();
    const second = await newOwner();
    await h.db('accounts').where({ id: first }).update({ name: 'First Co' });
    await h.db('accounts').where({ id: second }).update({ name: 'Second Co' });
    const owner = await signIn(first);
    const token = await linkToken(second);

    const asked = await follow(api.app, `/settings/sign-in?token=${token}`, owner.cookie);
    expect(asked.status).toBe(200);
    expect(asked.headers['set-cookie']).toBeUndefined();
    expect(asked.text).toContain('This link opens the Settings of <strong>Second Co</strong>.');
    expect(asked.text).toContain('This browser is signed in to the Settings of <strong>First Co</strong>');
    expect((await owner.get('/settings/api-keys')).status).toBe(200);

    const switched = await request(api.app).post('/settings/sign-in').set('Cookie', owner.cookie).set('Sec-Fetch-Site', 'same-origin').type('form').send(`token=${token}`);

    expect(switched.status).toBe(303);
    const cookie = String(switched.headers['set-cookie']).split(';')[0]!;
    expect((await request(api.app).get('/settings/api-keys').set('Cookie', cookie)).text).toContain('Account: <strong>Second Co</strong>');
    expect((await owner.get('/settings/api-keys')).status).toBe(401);
  });

  it('issues links for 10 minutes by default, at most an hour, and only for an account that exists', async () => {
    const accountId = await newOwner();
    const link = await createSettingsLink(h.db, { accountId, baseUrl: BASE });
    const seconds = (link.expiresAt.getTime() - Date.now()) / 1000;
    expect(seconds).toBeGreaterThan(590);
    expect(seconds).toBeLessThanOrEqual(601);
    await expect(createSettingsLink(h.db, { accountId, baseUrl: BASE, ttlSeconds: 3601 })).rejects.toThrow(/1 to 3600/);
    await expect(createSettingsLink(h.db, { accountId, baseUrl: BASE, ttlSeconds: 0 })).rejects.toThrow(/1 to 3600/);
    await expect(createSettingsLink(h.db, { accountId: 'acct_nope', baseUrl: BASE })).rejects.toThrow(/does not exist/);
  });
});

describe('a Settings session', () => {
  it('ends after 30 minutes idle, after 12 hours in all, and on Sign out (which needs the CSRF token)', async () => {
    const idle = await signIn(await newOwner());
    const old = await signIn(await newOwner());
    const out = await signIn(await newOwner());
    await setSession(idle.cookie, { last_seen_at: h.db.raw(`now() - interval '31 minutes'`) });
    await setSession(old.cookie, { created_at: h.db.raw(`now() - interval '12 hours 1 second'`) });

    const withoutCsrf = await out.post('/settings/sign-out', {}, false);
    expect(withoutCsrf.status).toBe(403);
    expect((await out.get('/settings/api-keys')).status).toBe(200);
    const signedOut = await out.post('/settings/sign-out', {});

    expect(signedOut.status).toBe(200);
    expect(String(signedOut.headers['set-cookie'])).toMatch(/^svc_settings=; Path=\/settings; Max-Age=0/);
    for (const session of [idle, old, out]) {
      const res = await session.get('/settings/api-keys');
      expect(res.status).toBe(401);
      expect(res.text).toContain('session has ended');
    }
  });

  it('is never opened by an API key, and never opens /api/v1', async () => {
    const { accountId, key } = await seedAccount(h.db, ['read:sites']);
    const session = await signIn(accountId);

    const byKey = await request(api.app).get('/settings/api-keys').set(bearer(key));
    const byCookie = await request(api.app).get('/api/v1/sites').set('Cookie', session.cookie);

    expect(byKey.status).toBe(401);
    expect(byCookie.status).toBe(401);
    expect(byCookie.body).toEqual({ error: { code: 'unauthorized', message: expect.any(String) } });
  });

  it('binds its CSRF token to itself: another session’s token is refused with 403', async () => {
    const accountId = await newOwner();
    const mine = await signIn(accountId);
    const other = await signIn(await newOwner());
    expect(isSettingsCsrfToken(mine.cookie.split('=')[1]!, mine.csrf)).toBe(true);

    const res = await request(api.app)
      .post('/settings/api-keys')
      .set('Cookie', mine.cookie)
      .type('form')
      .send(`name=x&scopes=read%3Asites&_csrf=${encodeURIComponent(other.csrf)}`);

    expect(res.status).toBe(403);
    expect(await listApiKeys(h.db, accountId)).toEqual([]);
  });
});

async function setSession(cookie: string, values: Record<string, unknown>): Promise<void> {
  const { createHash } = await import('node:crypto');
  const hash = createHash('sha256').update(cookie.split('=')[1]!).digest('hex');
  expect(await h.db('settings_sessions').where({ token_hash: hash }).update(values)).toBe(1);
}

describe('API keys in Settings', () => {
  it('creates a key with the scopes checked, shows it in full once, and lists it by its first 12 characters', async () => {
    const accountId = await newOwner();
    const owner = await signIn(accountId);

    const created = await owner.post('/settings/api-keys', { name: 'Nightly <export>', scopes: ['read:sites', 'read:webhooks'] });

    expect(created.status).toBe(201);
    const key = /<code id="new-key">(svc_live_[A-Za-z0-9_-]{32})<\/code>/.exec(created.text)![1]!;
    expect(created.text).toContain('Nightly &lt;export&gt;');
    const [stored] = await listApiKeys(h.db, accountId);
    expect(stored).toMatchObject({ name: 'Nightly <export>', prefix: key.slice(0, 12), scopes: ['read:sites', 'read:webhooks'], lastUsedAt: null, revokedAt: null });
    const listed = await owner.get('/settings/api-keys');
    expect(listed.text).not.toContain(key);
    expect(listed.text).toContain(`${key.slice(0, 12)}…`);
    expect(listed.text).toContain('Never');

    const sites = await request(api.app).get('/api/v1/sites').set(bearer(key));
    expect(sites.status).toBe(200);
    const scans = await request(api.app).get(`/api/v1/scans/scan_x`).set(bearer(key));
    expect(scans.status).toBe(403);
    const used = await waitFor(async () => (await listApiKeys(h.db, accountId))[0]!.lastUsedAt, 5_000, 'last used to be recorded');
    expect(used).toBeInstanceOf(Date);
  });

  it('gives the form back with the error beside the field for no scope, an empty name or an overlong one, and stores nothing', async () => {
    const accountId = await newOwner();
    const owner = await signIn(accountId);

    const noScope = await owner.post('/settings/api-keys', { name: 'No scope' });
    const empty = await owner.post('/settings/api-keys', { name: '   ', scopes: ['read:sites'] });
    const long = await owner.post('/settings/api-keys', { name: 'x'.repeat(201), scopes: ['read:sites'] });
    const unknownScope = await owner.post('/settings/api-keys', { name: 'Wild', scopes: ['*'] });

    expect([noScope.status, empty.status, long.status, unknownScope.status]).toEqual([400, 400, 400, 400]);
    expect(noScope.text).toContain('<p class="error" id="scopes-error">Grant at least one scope.</p>');
    expect(noScope.text).toContain('value="No scope"');
    expect(empty.text).toContain('<p class="error" id="key-name-error">Key name must be 1-200 characters.</p>');
    expect(empty.text).toContain('aria-describedby="key-name-error" aria-invalid="true"');
    expect(long.text).toContain('id="key-name-error"');
    expect(unknownScope.text).toContain('id="scopes-error"');
    expect(await listApiKeys(h.db, accountId)).toEqual([]);
  });

  it('revokes a key after a confirmation step; the API refuses it at once with invalid_key, and the list shows it as revoked', async () => {
    const accountId = await newOwner();
    const { id, key } = await createApiKey(h.db, accountId, { name: 'Lost laptop', scopes: ['read:sites'] });
    const owner = await signIn(accountId);
    await request(api.app).get('/api/v1/sites').set(bearer(key)).expect(200);

    const confirm = await owner.get(`/settings/api-keys/${id}/revoke`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain('Revoke key “Lost laptop”?');
    expect((await listApiKeys(h.db, accountId))[0]!.revokedAt).toBeNull();
    const revoked = await owner.post(`/settings/api-keys/${id}/revoke`, {});

    expect(revoked.status).toBe(303);
    expect(revoked.headers.location).toBe('/settings/api-keys?notice=revoked');
    const refused = await request(api.app).get('/api/v1/sites').set(bearer(key));
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('invalid_key');
    expect((await listApiKeys(h.db, accountId))[0]!.revokedAt).toBeInstanceOf(Date);
    expect((await owner.get('/settings/api-keys')).text).toMatch(/Revoked <time/);
  });

  it('changes nothing without the CSRF token: 403 for a creation and a revocation', async () => {
    const accountId = await newOwner();
    const { id } = await createApiKey(h.db, accountId, { name: 'Keep', scopes: ['read:sites'] });
    const owner = await signIn(accountId);

    const create = await owner.post('/settings/api-keys', { name: 'Forged', scopes: ['read:sites'] }, false);
    const revoke = await owner.post(`/settings/api-keys/${id}/revoke`, {}, false);

    expect([create.status, revoke.status]).toEqual([403, 403]);
    expect(create.text).toContain('nothing was changed');
    expect(await listApiKeys(h.db, accountId)).toEqual([expect.objectContaining({ id, name: 'Keep', revokedAt: null })]);
  });

  it('creates nothing a second time when the same form is sent again (a reload, Back then Forward): 409 with the list', async () => {
    const accountId = await newOwner();
    const owner = await signIn(accountId);
    const token = await formToken(owner.cookie, '/settings/api-keys');
    const hookToken = await formToken(owner.cookie, '/settings/webhooks');

    const first = await owner.post('/settings/api-keys', { name: 'Once', scopes: ['read:sites'], _form: token });
    const again = await owner.post('/settings/api-keys', { name: 'Once', scopes: ['read:sites'], _form: token });
    const forged = await owner.post('/settings/api-keys', { name: 'Once', scopes: ['read:sites'], _form: 'not-a-token' });
    const hook = await owner.post('/settings/webhooks', { url: 'https://hooks.example.com/once', events: ['*'], _form: hookToken });
    const hookAgain = await owner.post('/settings/webhooks', { url: 'https://hooks.example.com/once', events: ['*'], _form: hookToken });

    expect([first.status, again.status, forged.status, hook.status, hookAgain.status]).toEqual([201, 409, 409, 201, 409]);
    expect(again.text).toContain('This form was already sent, so nothing new was created.');
    expect(again.text).not.toContain('id="new-key"');
    expect(hookAgain.text).not.toContain('id="new-secret"');
    expect(await listApiKeys(h.db, accountId)).toHaveLength(1);
    expect(await h.db('webhook_subscriptions').where({ account_id: accountId })).toHaveLength(1);
  });

  it('answers the 404 page for another account’s key, and leaves it alone', async () => {
    const victim = await newOwner();
    const { id } = await createApiKey(h.db, victim, { name: 'Theirs', scopes: ['read:sites'] });
    const owner = await signIn(await newOwner());

    const confirm = await owner.get(`/settings/api-keys/${id}/revoke`);
    const revoke = await owner.post(`/settings/api-keys/${id}/revoke`, {});

    expect([confirm.status, revoke.status]).toEqual([404, 404]);
    expect(confirm.text).toContain('<h1>Not found</h1>');
    expect((await listApiKeys(h.db, victim))[0]!.revokedAt).toBeNull();
  });
});

describe('webhooks in Settings', () => {
  it('creates a webhook with the API’s rules, shows its secret once, and deletes it after a confirmation step', async () => {
    const accountId = await newOwner();
    const owner = await signIn(accountId);

    const http = await owner.post('/settings/webhooks', { url: 'http://hooks.example.com/x', events: ['scan.completed'] });
    const none = await owner.post('/settings/webhooks', { url: 'https://hooks.example.com/x' });
    const mixed = await owner.post('/settings/webhooks', { url: 'https://hooks.example.com/x', events: ['*', 'scan.completed'] });
    expect([http.status, none.status, mixed.status]).toEqual([400, 400, 400]);
    expect(http.text).toContain('id="webhook-url-error"');
    expect(none.text).toContain('id="events-error"');
    expect(mixed.text).toContain('id="events-error"');
    expect(await h.db('webhook_subscriptions').where({ account_id: accountId })).toEqual([]);

    const created = await owner.post('/settings/webhooks', { url: 'https://hooks.example.com/settings', events: ['scan.completed', 'power_up.deployed'] });

    expect(created.status).toBe(201);
    const secret = /<code id="new-secret">([0-9a-f]{64})<\/code>/.exec(created.text)![1]!;
    const [row] = await h.db('webhook_subscriptions').where({ account_id: accountId });
    expect(row).toMatchObject({ url: 'https://hooks.example.com/settings', events: ['scan.completed', 'power_up.deployed'], secret, status: 'active' });
    const listed = await owner.get('/settings/webhooks');
    expect(listed.text).not.toContain(secret);
    expect(listed.text).toContain(`href="/settings/webhooks/${row.id}"`);

    expect((await owner.get(`/settings/webhooks/${row.id}/delete`)).text).toContain('Delete the webhook to https://hooks.example.com/settings?');
    const deleted = await owner.post(`/settings/webhooks/${row.id}/delete`, {});
    expect(deleted.status).toBe(303);
    expect(await h.db('webhook_subscriptions').where({ id: row.id })).toEqual([]);
  });

  it('shows a failed delivery with every attempt in the log, and redelivers it as a new delivery', async () => {
    const tenant = await seedTenant(h);
    const path = `/fixed/settings-log-${uniqueTag()}`;
    h.receiver.answerWith(path, 500);
    const sub = await tenant.subscribe(path, ['scan.completed']);
    const scan = await tenant.newScan();
    const { eventId } = await completeScan({ db: h.db, queues: h.queues }, { scanId: scan.id, score: 71 });
    const failed = await waitForDelivery(h, eventId, sub.id, (r) => r.status === 'failed', 'the delivery to exhaust its attempts', 20_000);
    const owner = await signIn(tenant.accountId);

    const log = await owner.get(`/settings/webhooks/${sub.id}`);

    expect(log.status).toBe(200);
    expect(log.text).toContain('<h1>Delivery log</h1>');
    expect(log.text).toContain(`Delivery <code>${failed.id}</code>`);
    expect(log.text.match(/<td>HTTP 500<\/td>/g)).toHaveLength(7);
    expect(log.text).toContain('<pre>status 500</pre>');
    expect(log.text).toContain(`action="/settings/webhooks/${sub.id}/deliveries/${failed.id}/redeliver"`);

    h.receiver.answerWith(path, 200);
    const redelivered = await owner.post(`/settings/webhooks/${sub.id}/deliveries/${failed.id}/redeliver`, {});
    expect(redelivered.status).toBe(303);
    const again = await waitFor(
      async () => (await h.db('deliveries').where({ redelivery_of: failed.id, status: 'delivered' }).first()) as { id: string } | undefined,
      20_000,
      'the redelivery to arrive',
    );
    const after = await owner.get(`/settings/webhooks/${sub.id}`);
    expect(after.text).toContain(`a redelivery of <code>${failed.id}</code>`);
    expect(after.text).toContain(`Delivery <code>${again.id}</code>`);
    expect(after.text.indexOf(again.id)).toBeLessThan(after.text.indexOf(`Delivery <code>${failed.id}</code>`));
  });

  it('answers the 404 page for another account’s webhook and delivery, and deletes nothing', async () => {
    const victim = await newOwner();
    const sub = await createSubscription(h.db, victim, { url: 'https://hooks.example.com/theirs', events: ['*'] });
    const owner = await signIn(await newOwner());

    const statuses = [
      (await owner.get(`/settings/webhooks/${sub.id}`)).status,
      (await owner.get(`/settings/webhooks/${sub.id}/delete`)).status,
      (await owner.post(`/settings/webhooks/${sub.id}/delete`, {})).status,
      (await owner.post(`/settings/webhooks/${sub.id}/deliveries/dlv_x/redeliver`, {})).status,
      (await owner.get('/settings/no-such-page')).status,
    ];

    expect(statuses).toEqual([404, 404, 404, 404, 404]);
    const unknown = await owner.get('/settings/no-such-page');
    expect(unknown.text).toContain('Sign out');
    expect(unknown.text).toContain('href="/settings/api-keys"');
    expect(await h.db('webhook_subscriptions').where({ id: sub.id })).toHaveLength(1);
  });
});
