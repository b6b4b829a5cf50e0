import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type Browser, type Page } from 'playwright-core';
import { completeAiMonitorRun, completeScan } from '@svc/core';
import { createSite, createSubscription, startScan } from '@svc/core/operator';
import { seedAccount, uniqueTag } from '@svc/core/testing';
import { openApiDocument } from '../src/openapi/document.js';
import type { CodeSample, OpenApiOperation, OpenApiParameter, OpenApiPathItem } from '../src/openapi/openapi-types.js';
import { launchChromium } from './browser.js';
import { createTestApi, listen, type ListeningApi, type TestApi } from './support.js';

/**
 * /docs as a customer uses it: Chromium opens the reference the API serves, authorizes with an
 * API key in the Authorize dialog, and runs every /api/v1 operation of the document with
 * "Try it out" against the running service (real Postgres and Redis; every answer contract-checked
 * by support.ts), filling each path parameter by its accessible name. Operations come from the
 * document, so a new one is covered (or fails here for want of a seeded value) without editing this.
 */

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

interface ApiOperation {
  path: string;
  method: (typeof METHODS)[number];
  operation: OpenApiOperation;
  pathParameters: string[];
  success: string;
}

/** Reads first, then the changes, the revocation of the subscription the others use last. */
const ORDER = { get: 0, post: 1, put: 1, patch: 1, delete: 2 } as const;

const operations: ApiOperation[] = Object.entries(openApiDocument.paths as Record<string, OpenApiPathItem>)
  .filter(([path]) => path.startsWith('/api/v1/'))
  .flatMap(([path, item]) =>
    METHODS.flatMap((method) => {
      const operation = item[method];
      if (!operation) return [];
      const parameters = [...(item.parameters ?? []), ...(operation.parameters ?? [])] as OpenApiParameter[];
      const success = Object.keys(operation.responses).filter((status) => /^2\d\d$/.test(status));
      if (success.length !== 1) throw new Error(`${method.toUpperCase()} ${path} documents ${success.length} successes; this test expects one`);
      return [{ path, method, operation, pathParameters: parameters.filter((p) => p.in === 'path').map((p) => p.name), success: success[0]! }];
    }),
  )
  .sort((a, b) => ORDER[a.method] - ORDER[b.method]);

let api: TestApi;
let listening: ListeningApi | undefined;
let browser: Browser;
let origin: string;
let key: string;
/** A value for each path parameter, by name: ids of what the account holds. */
let values: Record<string, string>;

beforeAll(async () => {
  api = createTestApi();
  const account = await seedAccount(api.db);
  key = account.key;
  const site = await createSite(api.db, account.accountId, { domain: `docs-${uniqueTag()}.example`, name: 'Docs' });
  const subscription = await createSubscription(api.db, account.accountId, { url: 'https://hooks.acme.example/svc', events: ['scan.completed'] });
  const scan = await startScan(api.db, site.id, { trigger: 'scheduled' });
  const deps = { db: api.db, queues: api.queues };
  const { eventId } = await completeScan(deps, { scanId: scan.id, score: 87.5, categories: [{ name: 'Performance', score: 91 }] });
  await completeAiMonitorRun(deps, { siteId: site.id, compositeScore: 72.25, engines: [{ engine: 'chatgpt', score: 75 }] });
  const delivery = (await api.db('deliveries').where({ event_id: eventId, subscription_id: subscription.id }).first()) as { id: string };
  // As if its attempts had all failed (no dispatcher runs here): a failed delivery is one redelivery sends again.
  await api.db('deliveries').where({ id: delivery.id }).update({ status: 'failed', next_attempt_at: null, finished_at: api.db.fn.now() });
  values = { siteId: site.id, scanId: scan.id, subscriptionId: subscription.id, deliveryId: delivery.id };

  listening = await listen(api);
  origin = listening.base;
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await listening?.close();
  await api?.close();
});

/** Text as a reader sees it, whitespace runs as one space. */
const squeeze = (text: string) => text.replace(/\s+/g, ' ').trim();

async function authorize(page: Page, apiKey: string): Promise<void> {
  await page.getByRole('button', { name: 'Authorize', exact: true }).click();
  await page.getByRole('textbox', { name: 'auth-bearer-value' }).fill(apiKey);
  await page.getByRole('button', { name: 'Apply credentials' }).click();
  await page.getByRole('button', { name: 'Remove authorization' }).waitFor();
  await page.getByRole('button', { name: 'Close' }).click();
}

describe('/docs, Try it out', () => {
  it('authorizes with an API key and calls every /api/v1 operation of the document on the running service, each showing its code samples', async () => {
    const page = await browser.newPage();
    // Each step is quick when it works: a failure says where within seconds, not after jest's timeout.
    page.setDefaultTimeout(10_000);
    const pageErrors: string[] = [];
    page.on('pageerror', (error) => pageErrors.push(error.message));
    const results: Array<{ operation: string; url: string; status: string; rendered: string }> = [];
    const samplesSeen: Array<{ operation: string; labels: string[]; missing: string[] }> = [];
    try {
      await page.goto(`${origin}/docs`, { waitUntil: 'load' });
      await authorize(page, key);

      for (const { path, method, operation, pathParameters, success } of operations) {
        const name = `${method.toUpperCase()} ${path}`;
        const block = page.locator(`.opblock.opblock-${method}`).filter({ has: page.locator(`.opblock-summary-path[data-path="${path}"]`) });
        await block.getByRole('button', { name: operation.summary }).first().click();

        const samples = block.getByRole('region', { name: 'Code samples' });
        await samples.waitFor();
        const shown = squeeze(await samples.innerText());
        samplesSeen.push({
          operation: name,
          labels: (await samples.getByRole('heading').allInnerTexts()).map((text) => text.trim()),
          missing: (operation['x-codeSamples'] ?? []).filter((sample: CodeSample) => !shown.includes(squeeze(sample.source))).map((sample) => sample.label),
        });

        await block.getByRole('button', { name: 'Try it out' }).click();
        let filled = path;
        for (const parameter of pathParameters) {
          const value = values[parameter];
          if (value === undefined) throw new Error(`${name}: no seeded value for the path parameter {${parameter}}; add one to this test`);
          await block.getByRole('textbox', { name: parameter, exact: true }).fill(value);
          filled = filled.replace(`{${parameter}}`, value);
        }
        const answer = page.waitForResponse((response) => response.request().method() === method.toUpperCase() && new URL(response.url()).pathname === filled);
        await block.getByRole('button', { name: 'Execute' }).click();
        const response = await answer;
        const rendered = block.locator('.live-responses-table .response .response-col_status');
        await rendered.waitFor();
        results.push({ operation: name, url: response.url().split('?')[0]!, status: String(response.status()), rendered: (await rendered.innerText()).trim() });
        expect(results.at(-1)).toEqual({ operation: name, url: `${origin}${filled}`, status: success, rendered: success });
        // Folded again: Swagger UI redraws every open operation on each change, slower with each one left open.
        await block.getByRole('button', { name: operation.summary }).first().click();
      }
    } finally {
      await page.close();
    }

    expect(results.map((result) => result.operation)).toEqual(operations.map(({ method, path }) => `${method.toUpperCase()} ${path}`));
    expect(results.filter(({ operation }) => operation.startsWith('GET ')).length).toBeGreaterThanOrEqual(8);
    expect(results.filter(({ operation }) => operation.startsWith('POST ')).length).toBeGreaterThanOrEqual(1);
    // Every operation showed both of its samples, each as the document has it.
    expect(samplesSeen).toEqual(operations.map(({ method, path }) => ({ operation: `${method.toUpperCase()} ${path}`, labels: ['Code samples', 'curl', '@site-visibility/client'], missing: [] })));
    expect(pageErrors).toEqual([]);
  }, 120_000);
});
