import { mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type Browser, type BrowserContext, type BrowserContextOptions, type Page, type Request } from 'playwright-core';
import { completeScan } from '@svc/core';
import { createApiKey, createSettingsLink, createSubscription, listApiKeys } from '@svc/core/operator';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, waitForDelivery, type DeliveryRow, type Harness } from '@svc/dispatcher/test-support';
import { apiOn } from './delivery-stories.js';
import { listen, type ListeningApi, type TestApi } from './support.js';
import { launchChromium } from './browser.js';

/**
 * Settings as its owner meets it: Debian's chromium (.ci/run installs it; no browser is
 * downloaded) driven by playwright-core, elements found by role and accessible name, against the
 * API process on a real port and the harness's dispatcher and HTTPS receiver. Pages are checked
 * with axe-core (ADR 14). SETTINGS_SCREENSHOTS_DIR=<dir> also writes a PNG of the main pages
 * there (docs/images/settings).
 */
const SCREENSHOTS_DIR = process.env.SETTINGS_SCREENSHOTS_DIR;
/** axe-core's browser build, evaluated in the page (this file is compiled without the DOM's types). */
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const SCOPES = ['read:sites', 'read:scans', 'read:ai-monitor', 'read:webhooks', 'write:webhooks'];
const EVENT_BOXES = ['All events', 'scan.completed', 'ai_check.completed', 'power_up.deployed'];
const WHEN = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$/;

let h: Harness;
let api: TestApi;
let listening: ListeningApi | undefined;
let browser: Browser;
/** The API as the browser reaches it: localhost, a different site from 127.0.0.1. */
let origin: string;
/** The same process as scripts reach it. */
let direct: string;

beforeAll(async () => {
  // The harness's fast schedule: all 7 attempts within a second or two.
  h = await createHarness();
  h.startDispatcher();
  api = apiOn(h);
  listening = await listen(api);
  const { port } = listening;
  origin = `http://localhost:${port}`;
  direct = `http://127.0.0.1:${port}`;
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await listening?.close();
  await api?.close();
  await h?.close();
});

/** A fresh browser profile (no cookie) on the API's origin that records console errors and page errors. */
async function newContext(options: BrowserContextOptions = {}): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await browser.newContext({ baseURL: origin, ...options });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('console', (message) => {
    // An error page's own status is reported as a console error; anything else is a finding.
    if (message.type() === 'error' && !/^Failed to load resource: the server responded with a status of 4\d\d/.test(message.text())) errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(`page error: ${error.message}`));
  return { context, page, errors };
}

async function link(accountId: string): Promise<string> {
  return (await createSettingsLink(h.db, { accountId, baseUrl: origin })).url;
}

/** Opens the account's sign-in link in the page and waits for the API keys page it moves on to. */
async function signIn(page: Page, accountId: string): Promise<void> {
  await page.goto(await link(accountId));
  await page.waitForURL(`${origin}/settings/api-keys`);
  await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
}

/**
 * Runs `act` (a click, a key press, a goto) and waits until the document it navigates to has
 * loaded; the status of that document (after any 303).
 */
async function navigation(page: Page, act: () => Promise<unknown>): Promise<number> {
  const response = page.waitForResponse(
    (r) => r.request().isNavigationRequest() && r.frame() === page.mainFrame() && (r.status() < 300 || r.status() >= 400),
  );
  const committed = page.waitForEvent('framenavigated', { predicate: (frame) => frame === page.mainFrame() });
  await act();
  const [answer] = await Promise.all([response, committed]);
  await page.waitForLoadState('load');
  return answer.status();
}

async function heading1(page: Page): Promise<string> {
  return (await page.getByRole('heading', { level: 1 }).innerText()).trim();
}

/** The row of a table whose row header is `name`, as { column heading: cell text }. */
async function rowOf(page: Page, name: string): Promise<Record<string, string>> {
  const row = page.getByRole('row').filter({ has: page.getByRole('rowheader', { name, exact: true }) });
  await row.waitFor();
  const headings = await page.getByRole('table').filter({ has: row }).getByRole('columnheader').allInnerTexts();
  const cells = [await row.getByRole('rowheader').innerText(), ...(await row.getByRole('cell').allInnerTexts())];
  return Object.fromEntries(headings.map((heading, i) => [heading.trim(), (cells[i] ?? '').trim()]));
}

/** The row headers of the page's table (none without a table). */
async function rowNames(page: Page): Promise<string[]> {
  return (await page.getByRole('rowheader').allInnerTexts()).map((text) => text.trim());
}

/** Fills and posts the create-key form by pointer; the status of the page that comes back. */
async function createKeyByPointer(page: Page, name: string, scopes: readonly string[]): Promise<number> {
  await page.getByLabel('Name', { exact: true }).fill(name);
  for (const scope of scopes) await page.getByLabel(scope, { exact: true }).check();
  return navigation(page, () => page.getByRole('button', { name: 'Create key' }).click());
}

async function createWebhookByPointer(page: Page, url: string, events: readonly string[]): Promise<number> {
  await page.getByLabel('URL', { exact: true }).fill(url);
  for (const event of events) await page.getByLabel(event, { exact: true }).check();
  return navigation(page, () => page.getByRole('button', { name: 'Create webhook' }).click());
}

async function apiGet(path: string, key: string): Promise<{ status: number; body: { error?: { code?: string } } }> {
  const res = await fetch(`${direct}${path}`, { headers: { Authorization: `Bearer ${key}` } });
  return { status: res.status, body: (await res.json()) as { error?: { code?: string } } };
}

/** An account with a site and none of the keys a seeded account starts with. */
async function newTenant() {
  const tenant = await seedTenant(h);
  await h.db('api_keys').where({ account_id: tenant.accountId }).del();
  return tenant;
}

async function fireScanCompleted(tenant: Awaited<ReturnType<typeof newTenant>>): Promise<string> {
  const scan = await tenant.newScan();
  const { eventId } = await completeScan({ db: h.db, queues: h.queues }, { scanId: scan.id, score: 71 });
  return eventId;
}

/**
 * The main product: another site (127.0.0.1 is not localhost) whose page `/` holds `body`, and
 * whose `/open-settings` answers 303 to `redirectTo`, as a server that issues the link on click would.
 */
async function mainProduct(body: string, redirectTo?: string): Promise<{ url: string; close(): Promise<void> }> {
  const portal = createServer((req, res) => {
    if (req.url === '/open-settings' && redirectTo) {
      res.writeHead(303, { location: redirectTo }).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(`<!doctype html><html lang="en"><title>Main product</title>${body}</html>`);
  });
  await new Promise<void>((resolve) => portal.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(portal.address() as AddressInfo).port}/`,
    close: () => new Promise<void>((resolve) => portal.close(() => resolve())),
  };
}

/** A page of the signed-in part: the section links and Sign out, whatever the page. */
async function expectSignedInChrome(page: Page): Promise<void> {
  const nav = page.getByRole('navigation', { name: 'Settings' });
  expect(await nav.getByRole('link', { name: 'API keys', exact: true }).count()).toBe(1);
  expect(await nav.getByRole('link', { name: 'Webhooks', exact: true }).count()).toBe(1);
  expect(await page.getByRole('button', { name: 'Sign out' }).count()).toBe(1);
}

/**
 * From the main product's page, clicks "Open Settings" and waits for Settings: the first page's
 * heading, and how the browser labelled each request to the sign-in link (Sec-Fetch-Site).
 */
async function followFromMainProduct(page: Page, portalUrl: string): Promise<{ landed: string; fetchSite: Array<string | undefined> }> {
  const signInRequests: Request[] = [];
  page.on('request', (req) => {
    if (req.url().startsWith(`${origin}/settings/sign-in`)) signInRequests.push(req);
  });
  await page.goto(portalUrl);
  await page.getByRole('link', { name: 'Open Settings' }).click();
  await page.waitForURL(`${origin}/settings/api-keys`);
  const landed = await heading1(page);
  const fetchSite = await Promise.all(signInRequests.map(async (req) => (await req.allHeaders())['sec-fetch-site']));
  return { landed, fetchSite };
}

describe('an owner in Settings', () => {
  it('opens a link from another site, creates a key shown once that works with only its scopes, sees it used, and revokes it so the API refuses it', async () => {
    const tenant = await newTenant();
    const url = await link(tenant.accountId);
    const portal = await mainProduct(`<a href="${url.replace(/&/g, '&amp;')}">Open Settings</a>`);
    const { context, page, errors } = await newContext();
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
    try {
      const { landed, fetchSite } = await followFromMainProduct(page, portal.url);
      const cookies = await context.cookies(`${origin}/settings/api-keys`);

      expect(landed).toBe('API keys');
      expect(fetchSite).toEqual(['cross-site']);
      expect(cookies).toEqual([expect.objectContaining({ name: 'svc_settings', path: '/settings', httpOnly: true, sameSite: 'Strict', secure: false })]);
      await expectSignedInChrome(page);
      expect(await page.getByRole('checkbox').evaluateAll((boxes) => boxes.map((box) => box.getAttribute('value')))).toEqual(SCOPES);
      expect(await page.getByText('No keys yet.').count()).toBe(1);

      const status = await createKeyByPointer(page, 'Nightly export', ['read:sites', 'read:webhooks']);
      const key = (await page.locator('#new-key').innerText()).trim();
      const shown = await page.getByRole('heading', { level: 2, name: 'Your new key “Nightly export”' }).count();
      await page.getByRole('button', { name: 'Copy' }).click();
      await page.getByText('Copied to the clipboard.').waitFor();
      const copied = await page.evaluate('navigator.clipboard.readText()');
      const fresh = await rowOf(page, 'Nightly export');

      expect(status).toBe(201);
      expect(shown).toBe(1);
      expect(key).toMatch(/^svc_live_[A-Za-z0-9_-]{32}$/);
      expect(copied).toBe(key);
      expect(fresh).toEqual({ Name: 'Nightly export', Key: `${key.slice(0, 12)}…`, Scopes: 'read:sites, read:webhooks', Created: expect.stringMatching(WHEN), 'Last used': 'Never', State: 'Active', Actions: 'Revoke' });
      const [stored] = await listApiKeys(h.db, tenant.accountId);
      expect(stored).toMatchObject({ name: 'Nightly export', prefix: key.slice(0, 12), scopes: ['read:sites', 'read:webhooks'], lastUsedAt: null, revokedAt: null });

      const sites = await apiGet('/api/v1/sites', key);
      const scans = await apiGet('/api/v1/scans/scan_x', key);
      expect(sites.status).toBe(200);
      expect(scans.status).toBe(403);
      await waitFor(async () => (await listApiKeys(h.db, tenant.accountId))[0]!.lastUsedAt, 5_000, 'the key’s first use to be recorded');
      // Opened again (a GET: reloading would send the creation's POST again).
      await navigation(page, () => page.getByRole('link', { name: 'API keys' }).click());
      const used = await rowOf(page, 'Nightly export');
      const html = await page.content();

      expect(used['Last used']).toMatch(WHEN);
      expect(html).not.toContain(key);
      expect(await page.locator('#new-key').count()).toBe(0);

      const row = page.getByRole('row').filter({ has: page.getByRole('rowheader', { name: 'Nightly export' }) });
      await navigation(page, () => row.getByRole('button', { name: 'Revoke' }).click());
      const confirm = await heading1(page);
      const stillActive = (await listApiKeys(h.db, tenant.accountId))[0]!.revokedAt;
      expect(confirm).toBe('Revoke key “Nightly export”?');
      expect(stillActive).toBeNull();
      expect(await page.getByRole('link', { name: 'Cancel' }).getAttribute('href')).toBe('/settings/api-keys');
      await navigation(page, () => page.getByRole('button', { name: 'Revoke' }).click());
      const refused = await apiGet('/api/v1/sites', key);
      const revoked = await rowOf(page, 'Nightly export');
      const notice = await page.getByRole('status').filter({ hasText: 'revoked' }).innerText();

      expect(refused.status).toBe(401);
      expect(refused.body.error?.code).toBe('invalid_key');
      expect(revoked.State).toMatch(/^Revoked \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$/);
      expect(revoked.Actions).toBe('');
      expect(notice).toBe('The key was revoked. The API refuses it from now on.');
      expect((await listApiKeys(h.db, tenant.accountId))[0]!.revokedAt).toBeInstanceOf(Date);
      expect(await page.content()).not.toContain(key);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
      await portal.close();
    }
  });

  it('arrives through a redirect (303) from the main product’s server on another site, and is signed in', async () => {
    const tenant = await newTenant();
    const url = await link(tenant.accountId);
    const portal = await mainProduct('<a href="/open-settings">Open Settings</a>', url);
    const { context, page, errors } = await newContext();
    try {
      const { landed, fetchSite } = await followFromMainProduct(page, portal.url);

      expect(landed).toBe('API keys');
      expect(fetchSite).toEqual(['cross-site']);
      await expectSignedInChrome(page);
      expect(await context.cookies(`${origin}/settings/api-keys`)).toEqual([expect.objectContaining({ name: 'svc_settings', sameSite: 'Strict' })]);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
      await portal.close();
    }
  });

  it('using only the keyboard, is told beside the scopes that one is needed, then creates a key', async () => {
    const tenant = await newTenant();
    const { context, page, errors } = await newContext();
    /** What has the focus: its tag, id, type, value and text. */
    const focused = async () =>
      (await page.evaluate(
        `(() => { const el = document.activeElement; return el ? [el.tagName.toLowerCase(), el.id, el.getAttribute('type') || '', el.getAttribute('value') || '', el.textContent.trim()].join('|') : ''; })()`,
      )) as string;
    /** Presses Tab until `wanted` has the focus (at most 20 times); the stops on the way. */
    const tabTo = async (wanted: (stop: string) => boolean) => {
      const stops: string[] = [];
      for (let i = 0; i < 20; i += 1) {
        await page.keyboard.press('Tab');
        const stop = await focused();
        stops.push(stop);
        if (wanted(stop)) return stops;
      }
      throw new Error(`Tab never reached the element; stops: ${stops.join(' → ')}`);
    };
    try {
      await signIn(page, tenant.accountId);

      const toName = await tabTo((stop) => stop.startsWith('input|key-name|'));
      await page.keyboard.type('Without scope');
      await tabTo((stop) => stop.startsWith('button||submit||Create key'));
      const refusedStatus = await navigation(page, () => page.keyboard.press('Enter'));
      const scopes = page.getByRole('group', { name: 'Scopes' });
      const error = await scopes.getByText('Grant at least one scope.').innerText();
      const describedBy = await scopes.getAttribute('aria-describedby');
      const errorId = await scopes.getByText('Grant at least one scope.').getAttribute('id');
      const kept = await page.getByLabel('Name', { exact: true }).inputValue();

      // The skip link, the two section links and Sign out come first.
      expect(toName.map((stop) => stop.split('|')[4])).toEqual(['Skip to content', 'API keys', 'Webhooks', 'Sign out', '']);
      expect(refusedStatus).toBe(400);
      expect(error).toBe('Grant at least one scope.');
      expect(await scopes.getAttribute('aria-invalid')).toBe('true');
      expect(describedBy).toBe(errorId);
      expect(kept).toBe('Without scope');
      expect(await listApiKeys(h.db, tenant.accountId)).toEqual([]);

      await tabTo((stop) => stop.startsWith('input|key-name|'));
      await page.keyboard.press('ControlOrMeta+A');
      await page.keyboard.type('Keyboard key');
      await tabTo((stop) => stop.startsWith('input||checkbox|read:scans|'));
      await page.keyboard.press('Space');
      await tabTo((stop) => stop.startsWith('input||checkbox|write:webhooks|'));
      await page.keyboard.press('Space');
      await tabTo((stop) => stop.startsWith('button||submit||Create key'));
      const createdStatus = await navigation(page, () => page.keyboard.press('Enter'));
      const key = (await page.locator('#new-key').innerText()).trim();
      const row = await rowOf(page, 'Keyboard key');

      expect(createdStatus).toBe(201);
      expect(row).toMatchObject({ Key: `${key.slice(0, 12)}…`, Scopes: 'read:scans, write:webhooks', State: 'Active' });
      expect(await listApiKeys(h.db, tenant.accountId)).toEqual([expect.objectContaining({ name: 'Keyboard key', scopes: ['read:scans', 'write:webhooks'], prefix: key.slice(0, 12) })]);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('creates a webhook and sees its secret once, follows a failed delivery’s 7 attempts in the log, redelivers it once the receiver is fixed, and deletes the webhook', async () => {
    const tenant = await newTenant();
    const path = `/fixed/settings-browser-${uniqueTag()}`;
    h.receiver.answerWith(path, 500);
    const url = h.receiver.url(path);
    const { context, page, errors } = await newContext();
    try {
      await signIn(page, tenant.accountId);
      await navigation(page, () => page.getByRole('navigation', { name: 'Settings' }).getByRole('link', { name: 'Webhooks' }).click());
      expect(await heading1(page)).toBe('Webhooks');
      await expectSignedInChrome(page);
      expect(await page.getByRole('checkbox').evaluateAll((boxes) => boxes.map((box) => box.parentElement?.textContent?.trim()))).toEqual(EVENT_BOXES);

      const status = await createWebhookByPointer(page, url, ['scan.completed']);
      const secret = (await page.locator('#new-secret').innerText()).trim();
      const [row] = await h.db('webhook_subscriptions').where({ account_id: tenant.accountId });

      expect(status).toBe(201);
      expect(secret).toMatch(/^[0-9a-f]{64}$/);
      expect(row).toMatchObject({ url, events: ['scan.completed'], secret, status: 'active' });
      expect(await rowOf(page, url)).toEqual({ URL: url, Events: 'scan.completed', 'Last delivered': 'Never', Failures: '0', State: 'Active', Actions: 'Delete' });
      await navigation(page, () => page.getByRole('link', { name: 'Webhooks' }).click());
      expect(await page.content()).not.toContain(secret);
      expect(await rowNames(page)).toEqual([url]);

      const eventId = await fireScanCompleted(tenant);
      const failed = await waitForDelivery(h, eventId, row.id, (r) => r.status === 'failed', 'the delivery to exhaust its 7 attempts', 20_000);
      await navigation(page, () => page.getByRole('link', { name: url }).click());
      const log = await heading1(page);
      const article = page.getByRole('article', { name: 'scan.completed · failed' });
      const attempts = await article.getByRole('cell', { name: 'HTTP 500', exact: true }).count();
      const excerpts = await article.getByText('status 500', { exact: true }).count();
      const meta = await article.getByText(`Delivery ${failed.id}`).innerText();

      expect(page.url()).toBe(`${origin}/settings/webhooks/${row.id}`);
      expect(log).toBe('Delivery log');
      expect(await page.getByRole('article').count()).toBe(1);
      expect(attempts).toBe(7);
      expect(excerpts).toBe(7);
      expect(meta).toContain(`Delivery ${failed.id}, created`);
      expect(await page.getByRole('main').innerText()).toContain(`Webhook ${row.id} to ${url} (scan.completed; active, 1 failure).`);
      expect(await page.getByRole('link', { name: 'Older deliveries' }).count()).toBe(0);

      h.receiver.answerWith(path, 200);
      await navigation(page, () => article.getByRole('button', { name: 'Redeliver' }).click());
      const queued = await page.getByRole('status').innerText();
      const again = await waitFor(
        async () => (await h.db('deliveries').where({ redelivery_of: failed.id, status: 'delivered' }).first()) as DeliveryRow | undefined,
        20_000,
        'the redelivery to arrive',
      );
      await navigation(page, () => page.reload());
      const articles = await page.getByRole('article').evaluateAll((nodes) => nodes.map((node) => node.getAttribute('aria-labelledby')));
      const delivered = page.getByRole('article', { name: 'scan.completed · delivered' });
      const deliveredText = await delivered.innerText();

      expect(queued).toBe('The delivery was queued again as a new delivery.');
      expect(articles).toEqual([`delivery-${again.id}`, `delivery-${failed.id}`]);
      expect(deliveredText).toContain(`a redelivery of ${failed.id}`);
      expect(await delivered.getByRole('cell', { name: 'HTTP 200', exact: true }).count()).toBe(1);
      expect(await delivered.getByRole('button', { name: 'Redeliver' }).count()).toBe(0);

      await navigation(page, () => page.getByRole('link', { name: 'Back to webhooks' }).click());
      const listed = await rowOf(page, url);
      expect(listed['Last delivered']).toMatch(WHEN);
      const rowLocator = page.getByRole('row').filter({ has: page.getByRole('rowheader', { name: url }) });
      await navigation(page, () => rowLocator.getByRole('button', { name: 'Delete' }).click());
      const confirm = await heading1(page);
      expect(confirm).toBe(`Delete the webhook to ${url}?`);
      expect(await h.db('webhook_subscriptions').where({ id: row.id })).toHaveLength(1);
      await navigation(page, () => page.getByRole('button', { name: 'Delete' }).click());
      const notice = await page.getByRole('status').innerText();

      expect(notice).toBe('The webhook was deleted.');
      expect(await rowNames(page)).toEqual([]);
      expect(await page.getByText('No webhooks yet.').count()).toBe(1);
      expect(await h.db('webhook_subscriptions').where({ id: row.id })).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('of another account sees none of the first account’s keys or webhooks, and the first account’s delivery log is Not found (404)', async () => {
    const first = await newTenant();
    await createApiKey(h.db, first.accountId, { name: 'First account’s key', scopes: ['read:sites'] });
    const sub = await createSubscription(h.db, first.accountId, { url: 'https://hooks.example.com/first', events: ['*'] });
    const { id: keyId } = await createApiKey(h.db, first.accountId, { name: 'Another of theirs', scopes: ['read:sites'] });
    const second = await newTenant();
    await createApiKey(h.db, second.accountId, { name: 'Second account’s key', scopes: ['read:scans'] });
    const { context, page, errors } = await newContext();
    try {
      await signIn(page, second.accountId);
      const keys = await rowNames(page);
      await navigation(page, () => page.getByRole('link', { name: 'Webhooks' }).click());
      const webhooks = await rowNames(page);
      const noWebhooks = await page.getByText('No webhooks yet.').count();
      const logStatus = await navigation(page, () => page.goto(`/settings/webhooks/${sub.id}`));
      const logHeading = await heading1(page);
      const logText = await page.getByRole('main').innerText();
      const revokeStatus = await navigation(page, () => page.goto(`/settings/api-keys/${keyId}/revoke`));
      const revokeHeading = await heading1(page);

      expect(keys).toEqual(['Second account’s key']);
      expect(webhooks).toEqual([]);
      expect(noWebhooks).toBe(1);
      expect([logStatus, logHeading]).toEqual([404, 'Not found']);
      expect(logText).toContain('No webhook with this id exists in your account.');
      expect(logText).not.toContain('hooks.example.com');
      expect([revokeStatus, revokeHeading]).toEqual([404, 'Not found']);
      await expectSignedInChrome(page);
      expect((await listApiKeys(h.db, first.accountId)).map((k) => k.revokedAt)).toEqual([null, null]);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('opening a reused link or an expired one gets a page saying so (410) and no session (Sign in again, 401)', async () => {
    const tenant = await newTenant();
    const used = await link(tenant.accountId);
    const first = await newContext();
    await first.page.goto(used);
    await first.page.waitForURL(`${origin}/settings/api-keys`);
    await first.context.close();
    const expired = await link(tenant.accountId);
    await h.db('settings_links').where({ account_id: tenant.accountId }).whereNull('used_at').update({ expires_at: h.db.raw(`now() - interval '1 second'`) });

    for (const [url, says] of [
      [used, 'This sign-in link has already been used.'],
      [expired, 'This sign-in link has expired.'],
    ] as const) {
      const { context, page, errors } = await newContext();
      try {
        const status = await navigation(page, () => page.goto(url));
        const title = await heading1(page);
        const text = await page.getByRole('main').innerText();
        const cookies = await context.cookies(`${origin}/settings/api-keys`);
        const buttons = await page.getByRole('button', { name: 'Sign out' }).count();
        const after = await navigation(page, () => page.goto('/settings/api-keys'));
        const afterTitle = await heading1(page);

        expect({ url, status, title }).toEqual({ url, status: 410, title: 'This link can no longer be used' });
        expect(text).toContain(says);
        expect(page.url()).toBe(`${origin}/settings/api-keys`);
        expect(cookies).toEqual([]);
        expect(buttons).toBe(0);
        expect([after, afterTitle]).toEqual([401, 'Sign in again']);
        expect(errors).toEqual([]);
      } finally {
        await context.close();
      }
    }
    // The one session is the first browser's: neither later visit opened another.
    expect(await h.db('settings_sessions').where({ account_id: tenant.accountId })).toHaveLength(1);
  });

  it('posting a form without its CSRF token changes nothing (403, Nothing was changed)', async () => {
    const tenant = await newTenant();
    const { context, page, errors } = await newContext();
    try {
      await signIn(page, tenant.accountId);
      await page.getByLabel('Name', { exact: true }).fill('Forged');
      await page.getByLabel('read:sites', { exact: true }).check();
      const removed = await page.evaluate(`(() => {
        const field = document.getElementById('key-name').form.querySelector('input[name="_csrf"]');
        field.remove();
        return document.getElementById('key-name').form.querySelectorAll('input[name="_csrf"]').length;
      })()`);
      const status = await navigation(page, () => page.getByRole('button', { name: 'Create key' }).click());
      const title = await heading1(page);
      const text = await page.getByRole('main').innerText();

      expect(removed).toBe(0);
      expect(status).toBe(403);
      expect(title).toBe('Nothing was changed');
      expect(text).toContain('nothing was changed');
      expect(await listApiKeys(h.db, tenant.accountId)).toEqual([]);
      // Still signed in: the refusal ends nothing.
      await navigation(page, () => page.getByRole('link', { name: 'Back to API keys' }).click());
      expect(await heading1(page)).toBe('API keys');
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });
});

/** The pages `tour` visits, in order. */
const TOUR = [
  'api-keys',
  'api-keys-error',
  'revoke-key',
  'webhooks',
  'delivery-log',
  'delete-webhook',
  'webhook-error',
  'webhook-created',
  'no-such-page',
  'not-found',
  'forbidden',
  'signed-out',
  'sign-in-again',
  'link-gone',
];

/**
 * Every kind of page of Settings, in the order an owner meets them, with `visit` called on each
 * (after checking it is the page meant): the account has a key, a webhook whose delivery failed
 * all 7 attempts, and creates a key along the way.
 */
async function tour(page: Page, visit: (name: string, page: Page) => Promise<void>): Promise<void> {
  const tenant = await newTenant();
  const path = `/fixed/settings-tour-${uniqueTag()}`;
  h.receiver.answerWith(path, 500);
  const sub = await tenant.subscribe(path, ['scan.completed', 'power_up.deployed']);
  const { id: keyId } = await createApiKey(h.db, tenant.accountId, { name: 'CI deploy', scopes: ['read:sites', 'read:scans'] });
  const eventId = await fireScanCompleted(tenant);
  await waitForDelivery(h, eventId, sub.id, (r) => r.status === 'failed', 'the delivery to exhaust its 7 attempts', 20_000);
  /** Checks the page reached is `name` (its status and h1), then visits it. */
  const at = async (name: string, status: number, expected: { status: number; title: string; signedIn?: false }) => {
    expect({ name, status, title: await heading1(page) }).toEqual({ name, status: expected.status, title: expected.title });
    const signedIn = expected.signedIn ?? true;
    if (signedIn) await expectSignedInChrome(page);
    await visit(name, page);
  };

  await signIn(page, tenant.accountId);
  await at('api-keys', await createKeyByPointer(page, 'Nightly export', ['read:sites', 'read:webhooks']), { status: 201, title: 'API keys' });
  await at('api-keys-error', await createKeyByPointer(page, '', []), { status: 400, title: 'API keys' });
  await at('revoke-key', await navigation(page, () => page.goto(`/settings/api-keys/${keyId}/revoke`)), { status: 200, title: 'Revoke key “CI deploy”?' });
  await at('webhooks', await navigation(page, () => page.goto('/settings/webhooks')), { status: 200, title: 'Webhooks' });
  await at('delivery-log', await navigation(page, () => page.getByRole('link', { name: h.receiver.url(path) }).click()), { status: 200, title: 'Delivery log' });
  await at('delete-webhook', await navigation(page, () => page.goto(`/settings/webhooks/${sub.id}/delete`)), { status: 200, title: `Delete the webhook to ${h.receiver.url(path)}?` });
  await navigation(page, () => page.goto('/settings/webhooks'));
  await at('webhook-error', await createWebhookByPointer(page, 'http://hooks.example.com/plain-http', ['All events']), { status: 400, title: 'Webhooks' });
  await navigation(page, () => page.goto('/settings/webhooks'));
  await at('webhook-created', await createWebhookByPointer(page, `https://hooks.example.com/${'long-path-'.repeat(6)}end`, ['scan.completed']), { status: 201, title: 'Webhooks' });
  await at('no-such-page', await navigation(page, () => page.goto('/settings/no-such-page')), { status: 404, title: 'Not found', signedIn: false });
  await at('not-found', await navigation(page, () => page.goto('/settings/webhooks/wh_none')), { status: 404, title: 'Not found' });
  await page.evaluate(`document.querySelector('form[action="/settings/sign-out"] input[name="_csrf"]').remove()`);
  await at('forbidden', await navigation(page, () => page.getByRole('button', { name: 'Sign out' }).click()), { status: 403, title: 'Nothing was changed' });
  await at('signed-out', await navigation(page, () => page.getByRole('button', { name: 'Sign out' }).click()), { status: 200, title: 'Signed out', signedIn: false });
  await at('sign-in-again', await navigation(page, () => page.goto('/settings/api-keys')), { status: 401, title: 'Sign in again', signedIn: false });
  const used = await link(tenant.accountId);
  await h.db('settings_links').where({ account_id: tenant.accountId }).whereNull('used_at').update({ used_at: h.db.raw('now()') });
  await at('link-gone', await navigation(page, () => page.goto(used)), { status: 410, title: 'This link can no longer be used', signedIn: false });
}

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: unknown[]; failureSummary?: string }>;
}

describe('every page of Settings', () => {
  it('has no serious or critical axe-core violation', async () => {
    // axe-core is evaluated into the page over the DevTools protocol, which the pages' CSP
    // (script-src 'self', no inline script) does not govern: the pages are checked as served.
    const { context, page, errors } = await newContext();
    const found: Array<{ page: string; id: string; impact: string | null; help: string; nodes: string[] }> = [];
    const rulesPassed: Record<string, number> = {};
    try {
      await tour(page, async (name) => {
        await page.evaluate(AXE_SOURCE);
        const result = (await page.evaluate(
          `axe.run(document, { resultTypes: ['violations'] }).then((r) => ({ violations: r.violations, passed: r.passes.length }))`,
        )) as { violations: AxeViolation[]; passed: number };
        rulesPassed[name] = result.passed;
        for (const v of result.violations) {
          found.push({ page: name, id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => `${n.target.join(' ')}: ${n.failureSummary ?? ''}`) });
        }
      });
    } finally {
      await context.close();
    }

    expect(Object.keys(rulesPassed)).toEqual(TOUR);
    expect(Object.entries(rulesPassed).filter(([, passed]) => passed < 10)).toEqual([]);
    expect(found.filter((v) => v.impact === 'serious' || v.impact === 'critical')).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('does not scroll sideways at 375 px wide', async () => {
    const { context, page, errors } = await newContext({ viewport: { width: 375, height: 812 } });
    const widths: Record<string, number> = {};
    try {
      await tour(page, async (name) => {
        widths[name] = (await page.evaluate('document.documentElement.scrollWidth')) as number;
      });
    } finally {
      await context.close();
    }

    expect(Object.keys(widths)).toEqual(TOUR);
    expect(Object.entries(widths).filter(([, width]) => width > 375)).toEqual([]);
    expect(errors).toEqual([]);
  });

  (SCREENSHOTS_DIR ? it : it.skip)('is photographed into SETTINGS_SCREENSHOTS_DIR', async () => {
    const dir = SCREENSHOTS_DIR!;
    mkdirSync(dir, { recursive: true });
    const wanted = ['api-keys', 'revoke-key', 'webhooks', 'delivery-log'];
    const { context, page } = await newContext({ viewport: { width: 1100, height: 800 } });
    const taken: string[] = [];
    try {
      await tour(page, async (name) => {
        if (!wanted.includes(name)) return;
        await page.screenshot({ path: join(dir, `${name}.png`), fullPage: true });
        taken.push(name);
      });
    } finally {
      await context.close();
    }

    expect(taken).toEqual(wanted);
  });
});
