import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { createTestApi, type TestApi } from './support.js';

/**
 * Redocly CLI (docs/adr/0015) judges the document /openapi.json serves, with the recommended
 * ruleset and the departures apps/api/src/openapi/redocly.yaml lists. It runs offline: no
 * telemetry, no update check, and a guard loaded into its process records any connection or DNS
 * lookup it tries (and refuses it), which fails the test.
 */

const CLI = createRequire(import.meta.url).resolve('@redocly/cli/bin/cli.js');
/** The configuration in the sources (tests run from dist/, which has no copy of it). */
const CONFIG = fileURLToPath(new URL('../../src/openapi/redocly.yaml', import.meta.url));

/** Preloaded into the linter's process: every TCP/TLS connection and DNS lookup is written down and fails. */
const NETWORK_GUARD = `
const fs = require('node:fs');
const net = require('node:net');
const dns = require('node:dns');
const record = (what) => fs.appendFileSync(process.env.NETWORK_GUARD_LOG, what + '\\n');
const refused = () => Object.assign(new Error('the test forbids network access'), { code: 'ECONNREFUSED' });
const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function (...args) {
  const options = Array.isArray(args[0]) ? args[0][0] : args[0];
  if (options && typeof options === 'object' && options.path) return connect.apply(this, args);
  record('connect ' + JSON.stringify(options && typeof options === 'object' ? { host: options.host, port: options.port } : args.slice(0, 2)));
  process.nextTick(() => this.destroy(refused()));
  return this;
};
const lookup = dns.lookup;
dns.lookup = function (host, ...rest) {
  record('lookup ' + host);
  const callback = rest[rest.length - 1];
  process.nextTick(() => callback(refused()));
};
dns.promises.lookup = async (host) => {
  record('lookup ' + host);
  throw refused();
};
`;

interface LintRun {
  exitCode: number;
  totals: { errors: number; warnings: number; ignored: number };
  problems: Array<{ ruleId: string; severity: string; message: string; location: Array<{ pointer: string }> }>;
  network: string[];
  stderr: string;
}

let api: TestApi;
let dir: string;

beforeAll(async () => {
  api = createTestApi();
  dir = await mkdtemp(join(tmpdir(), 'svc-openapi-lint-'));
  await writeFile(join(dir, 'network-guard.cjs'), NETWORK_GUARD);
});
afterAll(async () => {
  await api.close();
  await rm(dir, { recursive: true, force: true });
});

/** Runs `node <script>` (or the linter on `document`) with the guard preloaded; what it printed and what it tried on the network. */
function run(args: string[], name: string): Promise<{ exitCode: number; stdout: string; stderr: string; network: string[] }> {
  const log = join(dir, `${name}.network.log`);
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      args,
      {
        cwd: dir,
        timeout: 60_000,
        maxBuffer: 16 * 1024 * 1024,
        env: {
          PATH: process.env.PATH ?? '',
          HOME: dir,
          REDOCLY_TELEMETRY: 'off',
          REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true',
          NO_COLOR: '1',
          NETWORK_GUARD_LOG: log,
          NODE_OPTIONS: `--require ${join(dir, 'network-guard.cjs')}`,
        },
      },
      async (error, stdout, stderr) => {
        if (error && typeof error.code !== 'number') return reject(error);
        const network = (await readFile(log, 'utf8').catch(() => '')).split('\n').filter(Boolean);
        resolve({ exitCode: typeof error?.code === 'number' ? error.code : 0, stdout, stderr, network });
      },
    );
  });
}

async function lint(document: unknown, name: string): Promise<LintRun> {
  const file = join(dir, `${name}.json`);
  await writeFile(file, JSON.stringify(document, null, 2));
  const { exitCode, stdout, stderr, network } = await run([CLI, 'lint', `--config=${CONFIG}`, '--format=json', file], name);
  const report = JSON.parse(stdout) as Omit<LintRun, 'exitCode' | 'network' | 'stderr'>;
  return { exitCode, totals: report.totals, problems: report.problems, network, stderr };
}

const brief = (run: LintRun) => run.problems.map((p) => `${p.severity} ${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`);

describe('the served OpenAPI document, as Redocly CLI’s recommended rules judge it', () => {
  it('has no error and no warning, and the linter touches no network', async () => {
    const served = await request(api.app).get('/openapi.json');
    expect(served.status).toBe(200);

    const result = await lint(served.body, 'served');

    expect(brief(result)).toEqual([]);
    expect(result.totals).toEqual({ errors: 0, warnings: 0, ignored: 0 });
    expect(result.exitCode).toBe(0);
    expect(result.network).toEqual([]);
  });

  it('would be faulted for an example that names a field no schema has, an unused component and an /api/v1 operation without its 429', async () => {
    const document = structuredClone((await request(api.app).get('/openapi.json')).body);
    document.paths['/api/v1/sites'].get.responses['200'].content['application/json'].example.data.sites[0].colour = 'blue';
    document.components.schemas.Leftover = { type: 'string' };
    delete document.paths['/api/v1/scans/{scanId}'].get.responses['429'];

    const result = await lint(document, 'broken');

    expect(result.exitCode).not.toBe(0);
    expect(result.problems.map((p) => [p.ruleId, p.location[0]?.pointer])).toEqual(
      expect.arrayContaining([
        ['no-invalid-media-type-examples', expect.stringContaining('/paths/~1api~1v1~1sites/get/responses/200/content/application~1json/example')],
        ['no-unused-components', '#/components/schemas/Leftover'],
        ['rule/api-v1-answers-401-403-429', '#/paths/~1api~1v1~1scans~1{scanId}/get/responses'],
      ]),
    );
  });

  it('is judged by a guard that would see a connection or a lookup', async () => {
    const probe = join(dir, 'probe.mjs');
    await writeFile(probe, "await fetch('http://registry.npmjs.org/').catch(() => undefined);\nawait import('node:net').then((net) => new Promise((resolve) => net.connect(9, '127.0.0.1').on('error', resolve)));\n");

    const { network } = await run([probe], 'probe');

    expect(network).toEqual(expect.arrayContaining([expect.stringMatching(/^lookup registry\.npmjs\.org$|^connect .*registry\.npmjs\.org/), expect.stringContaining('127.0.0.1')]));
  });
});
