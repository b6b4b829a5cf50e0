// The webhooks entry in a browser: a page imports the built ES module (dist/src/webhooks/index.js,
// served as it is, with everything it imports) and verifies a delivery the real dispatcher sent.
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeScan } from '@svc/core';
import { createSubscription } from '@svc/core/operator';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from '@svc/dispatcher/test-support';
import type * as Webhooks from '../src/webhooks/index.js';

// The one Chromium launcher of the repository's browser tests (apps/api/test/browser.ts), as built.
const { launchChromium } = (await import(new URL('../../../../apps/api/dist/test/browser.js', import.meta.url).href)) as typeof import('../../../apps/api/test/browser.js');
type Browser = Awaited<ReturnType<typeof launchChromium>>;

/** The package's build output, served as static files: /src/webhooks/index.js is the entry. */
const DIST = fileURLToPath(new URL('..', import.meta.url));
const PAGE = `<!doctype html>
<meta charset="utf-8">
<title>a webhook receiver's page</title>
<script type="module">
  import('/src/webhooks/index.js').then(
    (webhooks) => { window.webhooks = webhooks; },
    (error) => { window.loadError = String(error); },
  );
</script>
`;

/** What the test hands the page: a delivery exactly as it arrived. */
interface Captured {
  body: number[];
  headers: Record<string, string>;
  secret: string;
}

let h: Harness;
let server: Server;
let origin = '';
let browser: Browser;

beforeAll(async () => {
  server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://page').pathname;
    if (path === '/') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
      return;
    }
    const file = normalize(join(DIST, decodeURIComponent(path)));
    if (!file.startsWith(DIST.endsWith(sep) ? DIST : DIST + sep)) {
      res.writeHead(404).end();
      return;
    }
    readFile(file).then(
      (bytes) => res.writeHead(200, { 'content-type': extname(file) === '.js' ? 'text/javascript; charset=utf-8' : 'application/octet-stream' }).end(bytes),
      () => res.writeHead(404).end(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`; // loopback http: a secure context, so Web Crypto is there
  browser = await launchChromium(); // first: without Chromium it fails at once, saying what to install
  h = await createHarness();
  h.startDispatcher();
});
afterAll(async () => {
  await browser?.close();
  await h?.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** One real delivery: a subscription on the test receiver, a completed scan, the request the dispatcher sent. */
async function captureDelivery(): Promise<Captured> {
  const tenant = await seedTenant(h);
  const path = `/ok/browser-${uniqueTag()}`;
  const sub = await createSubscription(h.db, tenant.accountId, { url: h.receiver.url(path), events: ['scan.completed'] });
  await completeScan({ db: h.db, queues: h.queues }, { scanId: (await tenant.newScan()).id, score: 64.5 });
  await waitFor(() => h.receiver.to(path).length >= 1, 15_000, 'the delivery at the receiver');
  const [received] = h.receiver.to(path);
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(received!.headers)) {
    if (name === 'content-type' || name.startsWith('x-service-') || name.startsWith('webhook-')) headers[name] = String(value);
  }
  return { body: [...received!.body], headers, secret: sub.secret };
}

describe('@site-visibility/client/webhooks in headless Chromium', () => {
  it('verifies a real delivery from a fetch Request and from its bytes, and refuses a tampered copy', async () => {
    const delivery = await captureDelivery();
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('requestfailed', (request) => problems.push(`failed: ${request.url()}`));
    page.on('response', (response) => {
      if (response.status() >= 400) problems.push(`${response.status()}: ${response.url()}`);
    });
    await page.goto(`${origin}/`);
    await page.waitForFunction(() => 'webhooks' in globalThis || 'loadError' in globalThis, undefined, { timeout: 10_000 });
    expect(await page.evaluate(() => (globalThis as { loadError?: string }).loadError ?? 'loaded')).toBe('loaded');

    const report = await page.evaluate(async ({ body, headers, secret }: Captured) => {
      const { verifyWebhookDelivery, verifyWebhookRequest, WebhookVerificationError } = (globalThis as unknown as { webhooks: typeof Webhooks }).webhooks;
      const reason = async (verification: Promise<unknown>) => {
        try {
          await verification;
          return 'verified';
        } catch (error) {
          return error instanceof WebhookVerificationError ? error.reason : `unexpected: ${String(error)}`;
        }
      };
      const g = globalThis as unknown as Record<string, unknown> & { isSecureContext: boolean; location: { origin: string } };
      const hooks = `${g.location.origin}/hooks`;
      const bytes = new Uint8Array(body);
      const request = new Request(hooks, { method: 'POST', body: bytes, headers });
      const fromRequest = await verifyWebhookRequest(request, secret);
      const fromBytes = await verifyWebhookDelivery(bytes, headers, secret);
      // The score changed by one digit, every header as it came.
      const tampered = new TextEncoder().encode(new TextDecoder().decode(bytes).replace('64.5', '94.5'));
      return {
        secureContext: g.isSecureContext,
        node: [typeof g.Buffer, typeof g.process, typeof g.require],
        fromRequest,
        bodyUsed: request.bodyUsed,
        sameFromBytes: JSON.stringify(fromBytes) === JSON.stringify(fromRequest),
        tamperedRequest: await reason(verifyWebhookRequest(new Request(hooks, { method: 'POST', body: tampered, headers }), secret)),
        tamperedBytes: await reason(verifyWebhookDelivery(tampered, headers, secret)),
        wrongSecret: await reason(verifyWebhookDelivery(bytes, headers, 'f'.repeat(64))),
        rotation: await reason(verifyWebhookDelivery(bytes, headers, ['f'.repeat(64), secret])),
      };
    }, delivery);
    await page.close();

    expect(problems).toEqual([]);
    expect(report).toEqual({
      secureContext: true,
      node: ['undefined', 'undefined', 'undefined'],
      fromRequest: { deliveryId: delivery.headers['x-service-delivery-id'], event: JSON.parse(Buffer.from(delivery.body).toString('utf8')) },
      bodyUsed: true,
      sameFromBytes: true,
      tamperedRequest: 'invalid_signature',
      tamperedBytes: 'invalid_signature',
      wrongSecret: 'invalid_signature',
      rotation: 'verified',
    });
    expect(report.fromRequest.event).toMatchObject({ event: 'scan.completed', data: { score: 64.5 } });
    expect(delivery.headers).toMatchObject({ 'webhook-id': delivery.headers['x-service-delivery-id'], 'webhook-signature': expect.stringMatching(/^v1,/) });
  });
});
