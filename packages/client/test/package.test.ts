// The package as a customer gets it: packed by npm, installed from the tarball into an empty
// project outside this repository (so nothing of the repository's node_modules, @types/node
// included, can be found from it), then used from ES modules, CommonJS and TypeScript.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

const run = promisify(execFile);
const PACKAGE_DIR = fileURLToPath(new URL('../..', import.meta.url));
const REPO = fileURLToPath(new URL('../../../..', import.meta.url));
const TSC = join(REPO, 'node_modules/typescript/bin/tsc');
/** npm run from `npm test` passes its own settings down as npm_* variables: the customer's npm has none of them. */
const cleanEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith('npm_')));

let dir: string;
let app: string;
let packed: { filename: string; files: Array<{ path: string }> };
let installed: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-client-package-'));
  app = join(dir, 'app');
  // Scripts are not run: `npm test` has just built the package.
  const pack = await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dir], { cwd: PACKAGE_DIR, env: cleanEnv });
  [packed] = JSON.parse(pack.stdout) as [typeof packed];
  await mkdir(app);
  await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'customer-app', version: '1.0.0', private: true }));
  // Offline: the package has no dependency to fetch.
  await run('npm', ['install', join(dir, packed.filename), '--offline', '--no-audit', '--no-fund'], { cwd: app, env: cleanEnv });
  installed = join(app, 'node_modules/@site-visibility/client');
  await writeCustomerFiles();
}, 60_000);
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Every file under a folder, relative to it. */
async function filesUnder(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => relative(root, join(entry.parentPath, entry.name)));
}

describe('the @site-visibility/client tarball', () => {
  it('holds the licence, the README, the changelog, package.json and the JavaScript and declarations of both builds, and nothing else', async () => {
    const sources = (await filesUnder(join(PACKAGE_DIR, 'src'))).filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'));
    const built = sources.flatMap((file) => {
      const base = file.replace(/\.ts$/, '');
      return [`dist/src/${base}.js`, `dist/src/${base}.d.ts`, `cjs/${base}.js`, `cjs/${base}.d.ts`];
    });
    const paths = packed.files.map((file) => file.path);

    expect(packed.filename).toBe('site-visibility-client-0.2.0.tgz');
    expect(sources).toEqual(expect.arrayContaining(['index.ts', 'webhooks/index.ts']));
    expect([...paths].sort()).toEqual(['LICENSE', 'README.md', 'CHANGELOG.md', 'package.json', 'cjs/package.json', ...built].sort());
    expect(paths.filter((path) => /test|tsbuildinfo|\.map$|\.ts$/.test(path) && !path.endsWith('.d.ts'))).toEqual([]);
    expect(await readFile(join(installed, 'LICENSE'), 'utf8')).toMatch(/^MIT License\n/);
    // No shipped file points at a source map that is not there.
    const shipped = await Promise.all(paths.map((path) => readFile(join(installed, path), 'utf8')));
    expect(shipped.filter((text) => text.includes('sourceMappingURL'))).toEqual([]);
  });

  it('declares its entries for import and require, each with its types, and no runtime dependency', async () => {
    const manifest = JSON.parse(await readFile(join(installed, 'package.json'), 'utf8')) as Record<string, unknown>;
    const entry = (esm: string, cjs: string) => ({ import: { types: `./dist/src/${esm}.d.ts`, default: `./dist/src/${esm}.js` }, require: { types: `./cjs/${cjs}.d.ts`, default: `./cjs/${cjs}.js` } });

    expect(manifest).toMatchObject({ name: '@site-visibility/client', license: 'MIT', type: 'module', main: './cjs/index.js', types: './cjs/index.d.ts' });
    expect(manifest.exports).toEqual({ '.': entry('index', 'index'), './webhooks': entry('webhooks/index', 'webhooks/index'), './package.json': './package.json' });
    expect(manifest.dependencies).toBeUndefined();
    expect(manifest.peerDependencies).toBeUndefined();
    expect(JSON.parse(await readFile(join(installed, 'cjs/package.json'), 'utf8'))).toEqual({ type: 'commonjs' });
  });

  it('has a changelog whose first entry is this version and says, with code, to await the verifier', async () => {
    const manifest = JSON.parse(await readFile(join(installed, 'package.json'), 'utf8')) as { version: string };
    const changelog = await readFile(join(installed, 'CHANGELOG.md'), 'utf8');
    const entries = [...changelog.matchAll(/^## (\S+)/gm)].map(([, version]) => version);
    const first = changelog.slice(changelog.indexOf('\n## '), changelog.indexOf('\n## ', changelog.indexOf('\n## ') + 1));

    expect(manifest.version).toBe('0.2.0');
    expect(entries).toEqual(['0.2.0', '0.1.0']);
    expect(first).toMatch(/asynchronous/);
    expect(first).toMatch(/await verifyWebhook\(/);
    // The code as 0.1.0's README showed it, and the same code for this version.
    expect(first).toMatch(/const event = verifyWebhook\(/);
  });

  it('links only to absolute addresses or to places inside itself: the repository’s docs and examples are not in the tarball', async () => {
    const texts = await Promise.all(['README.md', 'CHANGELOG.md'].map(async (file) => ({ file, text: await readFile(join(installed, file), 'utf8') })));
    const links = texts.flatMap(({ file, text }) => [...text.matchAll(/\]\(([^)\s]+)\)/g)].map(([, target]) => `${file}: ${target}`));

    expect(links.filter((link) => !/: (https:\/\/|#)/.test(link))).toEqual([]);
  });

  it('tells customers nothing of the service’s internal specification or issues', async () => {
    const texts = await Promise.all((await filesUnder(installed)).map(async (file) => ({ file, text: await readFile(join(installed, file), 'utf8') })));
    expect(texts.filter(({ text }) => /spec(ification)? §|§\s?\d|\bissue\s+#?\d|@svc\//i.test(text)).map(({ file }) => file)).toEqual([]);
  });
});

describe('the installed package', () => {
  const expected = (format: string, entry: string, webhooksEntry: string) => ({
    format,
    resolved: [entry, webhooksEntry],
    delivery: { deliveryId: 'dlv_1', event: { event: 'scan.completed', timestamp: '2026-11-23T04:00:00.000Z', data: { scanId: 'scan_1', siteId: 'site_1', domain: 'acme.example', score: 91 } } },
    bodyUsed: true,
    refused: 'invalid_signature',
    sameErrorClass: true,
    handler: 'function',
    sites: ['acme.example'],
    created: 'sub_1',
    requests: [
      { method: 'GET', url: 'https://api.example.com/api/v1/sites', idempotencyKey: null },
      { method: 'POST', url: 'https://api.example.com/api/v1/webhooks', idempotencyKey: 'a random UUID' },
    ],
  });

  it('runs imported as an ES module, both entries from their ES module build', async () => {
    const { stdout, stderr } = await run(process.execPath, ['customer.mjs'], { cwd: app, env: cleanEnv });
    expect(JSON.parse(stdout)).toEqual(expected('esm', 'dist/src/index.js', 'dist/src/webhooks/index.js'));
    expect(stderr).toBe('');
  });

  it('runs required from CommonJS, both entries from the CommonJS build (no require of an ES module, no warning)', async () => {
    const { stdout, stderr } = await run(process.execPath, ['customer.cjs'], { cwd: app, env: cleanEnv });
    expect(JSON.parse(stdout)).toEqual(expected('cjs', 'cjs/index.js', 'cjs/webhooks/index.js'));
    expect(stderr).toBe('');
  });

  /** Type-checks with the repository's TypeScript, the package's declarations included (skipLibCheck off); the files it read. */
  async function typeCheck(config: string): Promise<string[]> {
    const result = await run(process.execPath, [TSC, '-p', config, '--listFiles'], { cwd: app, env: cleanEnv }).catch((error: { stdout?: string; message: string }) => {
      throw new Error(`tsc -p ${config} failed:\n${error.stdout ?? error.message}`);
    });
    return result.stdout.split('\n').filter((line) => line.includes('/node_modules/'));
  }
  const library = (files: string[]) => files.filter((file) => file.includes('/@site-visibility/client/')).map((file) => file.replace(/^.*\/@site-visibility\/client\//, ''));

  it('type-checks for an ES module and a CommonJS file (module nodenext), strict, without @types/node, each from the declarations of its own build', async () => {
    const files = await typeCheck('tsconfig.nodenext.json');
    expect(files.filter((file) => file.includes('@types/'))).toEqual([]);
    expect(library(files)).toEqual(expect.arrayContaining(['dist/src/index.d.ts', 'dist/src/webhooks/index.d.ts', 'cjs/index.d.ts', 'cjs/webhooks/index.d.ts']));
  });

  it('type-checks for a bundler (moduleResolution bundler) from the ES module declarations', async () => {
    const files = await typeCheck('tsconfig.bundler.json');
    expect(files.filter((file) => file.includes('@types/'))).toEqual([]);
    expect(library(files)).toEqual(expect.arrayContaining(['dist/src/index.d.ts', 'dist/src/webhooks/index.d.ts']));
    expect(library(files).filter((file) => file.startsWith('cjs/'))).toEqual([]);
  });

  it('type-checks for a CommonJS project on the older resolution (module commonjs, moduleResolution node10, which ignores exports), both entries from the CommonJS declarations', async () => {
    const files = await typeCheck('tsconfig.node10.json');
    expect(files.filter((file) => file.includes('@types/'))).toEqual([]);
    expect(library(files)).toEqual(expect.arrayContaining(['cjs/index.d.ts', 'cjs/webhooks/index.d.ts']));
    expect(library(files).filter((file) => file.startsWith('dist/'))).toEqual([]);
  });

  it('type-checks the main entry with the fetch types from the DOM library or from @types/node, and says what is missing without either', async () => {
    // lib ES2022 + DOM is the nodenext project above; here ES2022 with Node's types, then ES2022 alone.
    const withNode = await typeCheck('tsconfig.main-node-types.json');
    expect(withNode.filter((file) => /lib\.dom/.test(file))).toEqual([]);
    expect(withNode.some((file) => file.includes('/@types/node/'))).toBe(true);

    const bare = await typeCheck('tsconfig.main-bare.json').then(
      () => 'type-checked',
      (error: Error) => error.message,
    );
    const missing = [...new Set([...bare.matchAll(/Cannot find name '(\w+)'/g)].map(([, name]) => name))].sort();
    expect(missing).toEqual(['AbortSignal', 'fetch']);
  });

  it('type-checks the webhooks entry with the ECMAScript library alone: no DOM and no Node types needed', async () => {
    const files = await typeCheck('tsconfig.webhooks-only.json');
    expect(files.filter((file) => /@types\/|lib\.dom/.test(file))).toEqual([]);
    expect(library(files)).toContain('dist/src/webhooks/index.d.ts');
    expect(library(files)).not.toContain('dist/src/index.d.ts');
  });
});

// What the customer's project holds. The programs print what they did, for the tests to compare.
const SIGN = (load: string) => `${load}
const secret = '0'.repeat(64);
const body = JSON.stringify({ event: 'scan.completed', timestamp: '2026-11-23T04:00:00.000Z', data: { scanId: 'scan_1', siteId: 'site_1', domain: 'acme.example', score: 91 } });
const timestamp = String(Math.floor(Date.now() / 1000));
const headers = {
  'content-type': 'application/json',
  'x-service-delivery-id': 'dlv_1',
  'x-service-signature': 'sha256=' + createHmac('sha256', secret).update(body).digest('hex'),
  'webhook-id': 'dlv_1',
  'webhook-timestamp': timestamp,
  'webhook-signature': 'v1,' + createHmac('sha256', secret).update('dlv_1.' + timestamp + '.' + body).digest('base64'),
};
const requests = [];
const answers = {
  GET: { sites: [{ id: 'site_1', domain: 'acme.example' }] },
  POST: { subscription: { id: 'sub_1' } },
};
const client = new SiteVisibilityClient({
  apiKey: 'svc_live_test',
  baseUrl: 'https://api.example.com',
  fetch: async (url, init) => {
    const key = init.headers['idempotency-key'] ?? null;
    requests.push({ method: init.method, url: String(url), idempotencyKey: key && (/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(key) ? 'a random UUID' : key) });
    return new Response(JSON.stringify({ data: answers[init.method] }), { status: 200, headers: { 'content-type': 'application/json' } });
  },
});

async function main(format, resolved) {
  const request = new Request('https://hooks.example.com/svc', { method: 'POST', body, headers });
  const delivery = await verifyWebhookRequest(request, secret);
  let refused;
  let sameErrorClass;
  try {
    await verifyWebhook(body.replace('91', '92'), headers, secret);
  } catch (error) {
    refused = error.reason;
    sameErrorClass = error instanceof WebhookVerificationError && error instanceof MainEntryError;
  }
  const sites = (await client.sites.list()).map((site) => site.domain);
  const created = (await client.webhooks.create({ url: 'https://hooks.example.com/svc', events: ['*'] })).id;
  const handler = typeof createWebhookHandler({ secret, onEvent: () => undefined });
  console.log(JSON.stringify({ format, resolved, delivery, bodyUsed: request.bodyUsed, refused, sameErrorClass, handler, sites, created, requests }));
}
`;

/** The customer programs' own way of naming the file an entry resolved to, inside the package. */
const PACKAGE_FILE = String.raw`(found) => String(found).replace(/^.*\/@site-visibility\/client\//, '')`;

const TYPED = `
import { createWebhookHandler, NotFoundError, SiteVisibilityClient, verifyWebhook, type ErrorCode, type SiteSummary } from '@site-visibility/client';
import { isEventOfType, verifyWebhookRequest, WebhookVerificationError, type VerifiedDelivery, type WebhookEvent } from '@site-visibility/client/webhooks';

const client = new SiteVisibilityClient({ apiKey: 'svc_live_test', baseUrl: 'https://api.example.com', maxRetries: 2 });

export async function domains(): Promise<string[]> {
  try {
    const sites: SiteSummary[] = await client.sites.list();
    return sites.map((site) => site.domain);
  } catch (error) {
    if (error instanceof NotFoundError) {
      const code: ErrorCode | (string & {}) = error.code;
      return [code];
    }
    throw error;
  }
}

// A fetch handler, as in a worker runtime.
export async function receive(request: Request, secrets: string[]): Promise<Response> {
  try {
    const delivery: VerifiedDelivery = await verifyWebhookRequest(request, secrets, { toleranceSeconds: 300 });
    if (isEventOfType(delivery.event, 'scan.completed')) {
      const score: number = delivery.event.data.score;
      return new Response(String(score), { status: 200 });
    }
    return new Response(null, { status: 204 });
  } catch (error) {
    if (error instanceof WebhookVerificationError) return new Response(error.reason, { status: 400 });
    throw error;
  }
}

export const handler = createWebhookHandler({ secret: ['old', 'new'], onEvent: async (event: WebhookEvent, { deliveryId }) => void [event.event, deliveryId] });

export async function check(body: Uint8Array, headers: Headers): Promise<string> {
  // @ts-expect-error verification is asynchronous: it gives a promise of the event, not the event
  const notAwaited: WebhookEvent = verifyWebhook(body, headers, 'secret');
  void notAwaited;
  return (await verifyWebhook(body, headers, 'secret')).event;
}
`;

// The main entry used without touching a fetch type of its own: what its declarations need.
const MAIN_ONLY = `
import { SiteVisibilityClient, createWebhookHandler, verifyWebhookDelivery } from '@site-visibility/client';

export const client = new SiteVisibilityClient({ apiKey: 'svc_live_test', baseUrl: 'https://api.example.com' });
export const handler = createWebhookHandler({ secret: 'secret', onEvent: () => undefined });
export async function check(body: Uint8Array, headers: Record<string, string>): Promise<string> {
  return (await verifyWebhookDelivery(body, headers, 'secret')).event.event;
}
`;

const WEBHOOKS_ONLY = `
import { verifyWebhookDelivery, verifyWebhookRequest, WebhookVerificationError, type WebhookRequest } from '@site-visibility/client/webhooks';

// Whatever the runtime's Request is, this is all that is used of it.
export async function receive(request: WebhookRequest, body: Uint8Array, headers: Record<string, string>): Promise<string> {
  try {
    const [a, b] = await Promise.all([verifyWebhookRequest(request, 'secret'), verifyWebhookDelivery(body, headers, ['old', 'new'])]);
    return a.event.event + b.event.event;
  } catch (error) {
    if (error instanceof WebhookVerificationError) return error.reason;
    throw error;
  }
}
`;

async function writeCustomerFiles(): Promise<void> {
  const strict = { strict: true, skipLibCheck: false, noEmit: true, target: 'ES2022', types: [] as string[], noUncheckedIndexedAccess: true, exactOptionalPropertyTypes: true };
  const files: Record<string, string> = {
    'customer.mjs': SIGN(`import { createHmac } from 'node:crypto';
import { createWebhookHandler, SiteVisibilityClient, verifyWebhook, WebhookVerificationError as MainEntryError } from '@site-visibility/client';
import { verifyWebhookRequest, WebhookVerificationError } from '@site-visibility/client/webhooks';`) +
      `await main('esm', ['@site-visibility/client', '@site-visibility/client/webhooks'].map((name) => (${PACKAGE_FILE})(import.meta.resolve(name))));\n`,
    'customer.cjs': SIGN(`const { createHmac } = require('node:crypto');
const { createWebhookHandler, SiteVisibilityClient, verifyWebhook, WebhookVerificationError: MainEntryError } = require('@site-visibility/client');
const { verifyWebhookRequest, WebhookVerificationError } = require('@site-visibility/client/webhooks');`) +
      `main('cjs', ['@site-visibility/client', '@site-visibility/client/webhooks'].map((name) => (${PACKAGE_FILE})(require.resolve(name)))).catch((error) => { console.error(error); process.exitCode = 1; });\n`,
    'esm-customer.mts': TYPED,
    'cjs-customer.cts': TYPED,
    'webhooks-only.mts': WEBHOOKS_ONLY,
    'node10-customer.ts': TYPED,
    'main-only.mts': MAIN_ONLY,
    'tsconfig.nodenext.json': JSON.stringify({ compilerOptions: { ...strict, module: 'nodenext', moduleResolution: 'nodenext' }, files: ['esm-customer.mts', 'cjs-customer.cts'] }),
    'tsconfig.bundler.json': JSON.stringify({ compilerOptions: { ...strict, module: 'preserve', moduleResolution: 'bundler' }, files: ['esm-customer.mts'] }),
    // What "module": "commonjs" implies when moduleResolution is not set: node10, which reads main, types and typesVersions but not exports.
    'tsconfig.node10.json': JSON.stringify({ compilerOptions: { ...strict, module: 'commonjs', moduleResolution: 'node10' }, files: ['node10-customer.ts'] }),
    'tsconfig.main-node-types.json': JSON.stringify({ compilerOptions: { ...strict, lib: ['ES2022'], types: ['node'], typeRoots: [join(REPO, 'node_modules/@types')], module: 'nodenext', moduleResolution: 'nodenext' }, files: ['main-only.mts'] }),
    'tsconfig.main-bare.json': JSON.stringify({ compilerOptions: { ...strict, lib: ['ES2022'], module: 'nodenext', moduleResolution: 'nodenext' }, files: ['main-only.mts'] }),
    'tsconfig.webhooks-only.json': JSON.stringify({ compilerOptions: { ...strict, lib: ['ES2022'], module: 'nodenext', moduleResolution: 'nodenext' }, files: ['webhooks-only.mts'] }),
  };
  for (const [name, text] of Object.entries(files)) await writeFile(join(app, name), text);
}
