// The README's two webhook receivers, run as written: only their imports are pointed at this
// build (and Express's port at a free one), then real signed deliveries are sent to them.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { signatureHeaders } from '@svc/core';
import { waitFor } from '@svc/core/testing';

const README = fileURLToPath(new URL('../../README.md', import.meta.url));
const ENTRY = new URL('../src/index.js', import.meta.url).href;
const WEBHOOKS_ENTRY = new URL('../src/webhooks/index.js', import.meta.url).href;
const EXPRESS = pathToFileURL(createRequire(import.meta.url).resolve('express')).href;
const SECRET = '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';

let dir: string;
let readme: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-client-readme-'));
  readme = await readFile(README, 'utf8');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The first js code block after a heading of the README. */
function sampleAfter(heading: string): string {
  const at = readme.indexOf(`\n${heading}\n`);
  if (at === -1) throw new Error(`the README has no heading ${heading}`);
  const block = /```js\n([\s\S]*?)```/.exec(readme.slice(at));
  if (!block) throw new Error(`no js sample after ${heading}`);
  return block[1]!;
}

/** Writes a sample, its imports pointed at this build, and imports it. */
async function load(name: string, code: string, replacements: Array<[string, string]>): Promise<Record<string, unknown>> {
  let rewritten = code;
  for (const [from, to] of replacements) {
    if (!rewritten.includes(from)) throw new Error(`the sample no longer contains ${from}`);
    rewritten = rewritten.replace(from, to);
  }
  const file = join(dir, name);
  await writeFile(file, rewritten);
  return (await import(pathToFileURL(file).href)) as Record<string, unknown>;
}

const body = (score: number) => JSON.stringify({ event: 'scan.completed', timestamp: new Date().toISOString(), data: { scanId: 'scan_1', siteId: 'site_1', domain: 'acme.example', score } });
const signed = (text: string, deliveryId: string) => ({ 'content-type': 'application/json', 'x-service-delivery-id': deliveryId, ...signatureHeaders({ deliveryId, body: Buffer.from(text), secret: SECRET }) });

describe('the README’s webhook receivers', () => {
  it('the fetch handler answers a signed delivery 204, a tampered one 400 with its reason, and a GET 405', async () => {
    const sample = sampleAfter('### In a worker, Deno or Bun: a fetch handler');
    const { default: handler } = (await load('worker.mjs', sample, [["'@site-visibility/client/webhooks'", `'${WEBHOOKS_ENTRY}'`]])) as {
      default: { fetch(request: Request, env: Record<string, string>): Promise<Response> };
    };
    const logged = jest.spyOn(console, 'log').mockImplementation(() => undefined);
    const env = { WEBHOOK_SECRET: SECRET };
    const text = body(70);
    const post = (payload: string) => new Request('https://hooks.example.com/svc', { method: 'POST', body: payload, headers: signed(text, 'dlv_w') });

    try {
      const ok = await handler.fetch(post(text), env);
      const tampered = await handler.fetch(post(text.replace('70', '71')), env);
      const get = await handler.fetch(new Request('https://hooks.example.com/svc'), env);

      expect([ok.status, tampered.status, await tampered.text(), get.status]).toEqual([204, 400, 'invalid_signature', 405]);
      expect(logged.mock.calls).toEqual([['dlv_w', 'acme.example', 70]]);
    } finally {
      logged.mockRestore();
    }
  });

  it('the Express receiver answers a signed delivery 204 and passes it on once, and a tampered one 400', async () => {
    const sample = sampleAfter('### In Node.js, with Express');
    const saved: unknown[][] = [];
    (globalThis as { savedScores?: unknown[][] }).savedScores = saved;
    process.env.WEBHOOK_SECRET = SECRET;
    const { server } = (await load(`express-${Date.now()}.mjs`, `const saveScore = async (...args) => void globalThis.savedScores.push(args);\n${sample}`, [
      ["from 'express'", `from '${EXPRESS}'`],
      ["from '@site-visibility/client'", `from '${ENTRY}'`],
      ['app.listen(8080);', "export const server = app.listen(0, '127.0.0.1');"],
    ])) as { server: Server };
    try {
      await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
      const text = body(80);
      const send = async (payload: string) => (await fetch(url, { method: 'POST', body: payload, headers: signed(text, 'dlv_e') })).status;

      const answers = [await send(text), await send(text), await send(text.replace('80', '81'))];
      await waitFor(() => saved.length >= 1, 5_000, 'onEvent');

      expect(answers).toEqual([204, 204, 400]);
      expect(saved).toEqual([['site_1', 80]]);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      delete process.env.WEBHOOK_SECRET;
    }
  });
});

describe('the README’s verifier calls', () => {
  it('await every call of verifyWebhook, verifyWebhookDelivery and verifyWebhookRequest, in code blocks and inline code alike', () => {
    const blocks = [...readme.matchAll(/```\w*\n([\s\S]*?)```/g)].map(([, code]) => code!);
    const inline = [...readme.replace(/```[\s\S]*?```/g, '').matchAll(/`([^`\n]+)`/g)].map(([, code]) => code!);
    const calls = [...blocks, ...inline].flatMap((code) => [...code.matchAll(/(\S+\s+)?\b(verifyWebhook(?:Delivery|Request)?)\(/g)].map(([, before]) => ({ before: (before ?? '').trim().replace(/^[([{]+/, ''), code })));

    expect(calls.length).toBeGreaterThanOrEqual(5);
    expect(calls.filter(({ before }) => before !== 'await').map(({ code }) => code.trim().split('\n')[0])).toEqual([]);
  });
});
