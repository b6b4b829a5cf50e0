import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type Browser } from 'playwright-core';
import request from 'supertest';
import { seedAccount } from '@svc/core/testing';
import { openApiDocument } from '../src/openapi/document.js';
import { bearer, createTestApi, type TestApi } from './support.js';
import { launchChromium } from './browser.js';


let api: TestApi;

beforeAll(() => {
  api = createTestApi({ RATE_LIMIT_PER_MINUTE: '1' });
});
afterAll(async () => {
  await api.close();
});

describe('GET /docs', () => {
  it('serves the HTML reference and its files without a key and without counting against the limit', async () => {
    const { key } = await seedAccount(api.db, ['read:sites']);

    const page = await request(api.app).get('/docs').set(bearer(key));
    const script = await request(api.app).get('/docs/assets/swagger-ui-bundle.js');
    const counted = await request(api.app).get('/api/v1/sites').set(bearer(key));

    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.text).toContain('/docs/assets/swagger-ui-bundle.js');
    expect(page.text).not.toMatch(/https?:\/\//);
    expect(page.headers['content-security-policy']).toContain("default-src 'self'");
    expect(page.headers['x-ratelimit-limit']).toBeUndefined();
    expect(script.status).toBe(200);
    expect(counted.status).toBe(200);
  });

  it('serves none of the renderer package’s other files', async () => {
    for (const file of ['index.html', 'swagger-initializer.js', '..%2Fpackage.json', 'package.json']) {
      const res = await request(api.app).get(`/docs/assets/${file}`);
      expect({ file, status: res.status, code: res.body.error?.code }).toEqual({ file, status: 404, code: 'not_found' });
    }
  });
});

describe('/docs in a real browser', () => {
  let server: Server;
  let browser: Browser;
  let origin: string;

  beforeAll(async () => {
    server = createServer(api.app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  });

  it('renders every endpoint’s path and every webhook event, loads nothing from elsewhere, and logs no console error', async () => {
    const page = await browser.newPage();
    const consoleErrors: string[] = [];
    const foreignRequests: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    page.on('pageerror', (error) => consoleErrors.push(`page error: ${error.message}`));
    page.on('request', (req) => {
      if (!req.url().startsWith(origin) && !req.url().startsWith('data:')) foreignRequests.push(req.url());
    });
    const paths = Object.keys(openApiDocument.paths);

    await page.goto(`${origin}/docs`, { waitUntil: 'load' });
    // A string, evaluated in the page: this file is compiled without the DOM's types.
    await page.waitForFunction(`document.querySelectorAll('.opblock-summary-path[data-path]').length >= ${paths.length}`, undefined, {
      timeout: 30_000,
    });
    const rendered = await page.$$eval('.opblock-summary-path[data-path]', (nodes) => nodes.map((node) => node.getAttribute('data-path')));
    const text = await page.innerText('body');
    await page.close();

    expect([...new Set(rendered)].sort()).toEqual(expect.arrayContaining([...paths].sort()));
    for (const event of Object.keys(openApiDocument.webhooks)) expect(text).toContain(event);
    expect(foreignRequests).toEqual([]);
    expect(consoleErrors).toEqual([]);
  });
});
