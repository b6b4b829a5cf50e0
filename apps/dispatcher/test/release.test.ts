import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createIsolatedDatabase, freePort, httpGet, TEST_REDIS_URL, uniqueTag, waitFor } from '@svc/core/testing';
import { makeCertificate, Receiver, type TestCertificate } from './support/receiver.js';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
/**
 * The Node.js the release runs on: this one, or SMOKE_NODE (a node binary) for the smoke runs on
 * other versions that .ci/run makes; SMOKE_NODE_MAJOR is the major version it must report.
 */
const NODE = process.env.SMOKE_NODE ?? process.execPath;
const NODE_MAJOR = process.env.SMOKE_NODE_MAJOR;

/** Every file under dir, relative to it, not following node_modules. */
function filesOf(dir: string, under = ''): string[] {
  return readdirSync(join(dir, under)).flatMap((name) => {
    const path = join(under, name);
    if (name === 'node_modules') return [];
    return statSync(join(dir, path)).isDirectory() ? filesOf(dir, path) : [path];
  });
}

function start(command: string, args: string[], env: NodeJS.ProcessEnv) {
  let output = '';
  // A process group of its own, as a terminal or a container gives a command: stopping it signals
  // npm, its shell and node together (npm alone does not pass SIGTERM on to the script).
  const child: ChildProcess = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<number>((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : 0))));
  /** Signals the whole group; resolves once no process of it is left. */
  const stop = async (signal: NodeJS.Signals) => {
    const signalGroup = (what: NodeJS.Signals | 0) => {
      try {
        process.kill(-child.pid!, what);
        return true;
      } catch {
        return false;
      }
    };
    signalGroup(signal);
    await waitFor(() => !signalGroup(0), 20_000, `${args.join(' ')} to stop`);
  };
  return { child, exited, stop, output: () => output };
}

describe('the release folder, run with production dependencies only', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-release-'));
  const release = join(dir, 'release');
  let database: Awaited<ReturnType<typeof createIsolatedDatabase>>;
  let certificate: TestCertificate;
  let receiver: Receiver;
  let env: NodeJS.ProcessEnv;
  const running: Array<ReturnType<typeof start>> = [];

  beforeAll(async () => {
    const built = spawnSync(process.execPath, [join(ROOT, 'scripts/release.mjs'), '--out', release], { encoding: 'utf8' });
    if (built.status !== 0) throw new Error(`scripts/release.mjs failed: ${built.stderr}`);
    database = await createIsolatedDatabase();
    certificate = makeCertificate();
    receiver = await new Receiver(certificate).start();
    env = {
      // npm runs the scripts with the first node on PATH: the one under test.
      PATH: `${dirname(NODE)}:${process.env.PATH}`,
      HOME: process.env.HOME ?? dir,
      DATABASE_URL: database.url,
      REDIS_URL: TEST_REDIS_URL,
      QUEUE_PREFIX: `test-release-${uniqueTag()}`,
      METRICS_PORT: '0',
      LOG_LEVEL: 'info',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      NODE_EXTRA_CA_CERTS: certificate.certPath,
    };
  }, 120_000);

  afterAll(async () => {
    for (const { stop } of running) await stop('SIGKILL');
    await receiver?.close();
    certificate?.cleanup();
    await database?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('holds compiled code, the migrations and production dependencies, and no sources, tests or dev tools', () => {
    const files = filesOf(release);
    expect(files.filter((file) => /\.(ts|map|tsbuildinfo)$/.test(file) || /(^|\/)(test|testing|src\/testing)\//.test(file))).toEqual([]);
    expect(files).toEqual(expect.arrayContaining(['package.json', 'apps/api/dist/src/main.js', 'apps/dispatcher/dist/src/main.js', 'apps/cli/bin/svc.js', 'packages/core/dist/src/db/migrate.main.js']));
    expect(files.filter((file) => file.startsWith('migrations/'))).toHaveLength(readdirSync(join(ROOT, 'migrations')).length);
    expect(existsSync(join(release, 'packages/client'))).toBe(false);
    expect(readFileSync(join(release, 'apps/cli/dist/bundle/svc.cjs'), 'utf8')).not.toMatch(/sourceMappingURL/);

    const manifest = JSON.parse(readFileSync(join(release, 'package.json'), 'utf8')) as { scripts: Record<string, string>; bin: Record<string, string>; devDependencies?: unknown };
    expect(Object.keys(manifest.scripts).sort()).toEqual(['migrate', 'start', 'start:api', 'start:dispatcher']);
    expect(manifest.bin).toEqual({ svc: 'apps/cli/bin/svc.js' });
    expect(manifest.devDependencies).toBeUndefined();

    // Every package the lockfile installs only for development is absent.
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
    const devOnly = Object.entries(lock.packages)
      .filter(([path, entry]) => entry.dev === true && path.startsWith('node_modules/') && !path.slice(13).includes('/node_modules/'))
      .map(([path]) => path);
    expect(devOnly.length).toBeGreaterThan(10);
    expect(devOnly.filter((path) => existsSync(join(release, path)))).toEqual([]);
    expect(relative(release, join(release, 'node_modules/knex'))).toBe('node_modules/knex');
    expect(existsSync(join(release, 'node_modules/knex/package.json'))).toBe(true);
  });

  it('migrates, runs an API and a dispatcher with npm run --prefix, delivers a signed event, and stops on SIGTERM', async () => {
    if (NODE_MAJOR) {
      const version = spawnSync('node', ['--version'], { env, encoding: 'utf8' }).stdout.trim();
      expect(version.startsWith(`v${NODE_MAJOR}.`)).toBe(true);
    }
    const npm = (script: string, more: NodeJS.ProcessEnv = {}) => start('npm', ['run', '--silent', '--prefix', release, script], { ...env, ...more });
    const migrate = npm('migrate');
    expect({ code: await migrate.exited, output: migrate.output() }).toEqual({ code: 0, output: expect.stringContaining('migrations applied') });

    const port = await freePort();
    const api = npm('start:api', { PORT: String(port) });
    const metricsPort = String(await freePort());
    const dispatcher = npm('start:dispatcher', { WEBHOOK_RETRY_DELAYS_MS: '100,100,100,100,100,100', METRICS_PORT: metricsPort });
    running.push(api, dispatcher);
    await waitFor(async () => (await httpGet(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, 30_000, `the release's API: ${api.output()}`);

    const svc = (...args: string[]) => {
      const run = spawnSync(join(release, 'node_modules/.bin/svc'), [...args, '--json'], { env, encoding: 'utf8' });
      if (run.status !== 0) throw new Error(`svc ${args.join(' ')}: ${run.stderr}`);
      return JSON.parse(run.stdout) as Record<string, string>;
    };
    const account = svc('accounts', 'create', '--name', 'Release');
    const site = svc('sites', 'add', '--account', account.id!, '--domain', 'release.example');
    const key = svc('keys', 'create', '--account', account.id!, '--name', 'release', '--scopes', 'read:webhooks,write:webhooks');
    const path = `/ok/release-${uniqueTag()}`;
    const created = await fetch(`http://127.0.0.1:${port}/api/v1/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: receiver.url(path), events: ['scan.completed'] }),
    });
    expect(created.status).toBe(201);
    const { subscription } = ((await created.json()) as { data: { subscription: { id: string; secret: string } } }).data;
    const scan = svc('scans', 'start', '--site', site.id!);
    svc('scans', 'complete', scan.id!, '--score', '88');

    const [arrival] = await waitFor(() => (receiver.to(path).length > 0 ? receiver.to(path) : undefined), 30_000, `the delivery: ${dispatcher.output()}`);
    const expected = `sha256=${createHmac('sha256', subscription.secret).update(arrival!.body).digest('hex')}`;
    expect(arrival!.headers['x-service-signature']).toBe(expected);
    expect(JSON.parse(arrival!.body.toString('utf8'))).toEqual(expect.objectContaining({ event: 'scan.completed', data: expect.objectContaining({ scanId: scan.id, score: 88 }) }));

    // The image's HEALTHCHECK command, asked of each process while it runs and after it stopped.
    const healthcheck = (port: string) =>
      spawnSync(NODE, [join(release, 'scripts/healthcheck.cjs')], { env: { ...env, HEALTHCHECK_PORT: port }, encoding: 'utf8' }).status;
    expect(healthcheck(String(port))).toBe(0);
    expect(healthcheck(metricsPort)).toBe(0);
    await Promise.all([api.stop('SIGTERM'), dispatcher.stop('SIGTERM')]);
    expect([healthcheck(String(port)), healthcheck(metricsPort)]).toEqual([1, 1]);
    expect(api.output()).toContain('"message":"api stopped"');
    expect(dispatcher.output()).toContain('"message":"dispatcher stopping: finishing attempts in flight"');
  }, 120_000);

  it('is what the image copies, and what docker compose runs: the API, the dispatcher and a one-shot migration, no bind mount', () => {
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    const stages = dockerfile.split(/^FROM /m).slice(1);
    expect(stages).toHaveLength(2);
    const [build, runtime] = stages as [string, string];
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:24-bookworm-slim$/m);
    expect(build).toMatch(/node scripts\/release\.mjs --out \/release/);
    // The running image holds the release folder and nothing else of the build.
    expect(runtime.match(/^(COPY|ADD) .*$/gm)).toEqual(['COPY --from=build /release /app']);
    expect(runtime).toMatch(/^USER node$/m);
    expect(runtime).toMatch(/^HEALTHCHECK /m);

    const compose = readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8');
    expect(compose).not.toMatch(/volumes:/);
    expect(compose).not.toMatch(/npm (ci|install)/);
    expect(compose).toMatch(/^ {2}migrate:\n {4}build: \.$/m);
    for (const service of ['api', 'dispatcher']) {
      const rest = compose.slice(compose.indexOf(`\n  ${service}:\n`) + 1);
      const block = rest.split(/\n {2}[a-z]+:\n/)[0]!;
      expect(block.startsWith(`  ${service}:`)).toBe(true);
      expect(block).toMatch(/migrate: \{ condition: service_completed_successfully \}/);
    }
    // Every program the image and compose run is in the release folder.
    const programs = [...`${dockerfile}\n${compose}`.matchAll(/['"]node['"], ['"]([a-z/.-]+\.[cm]?js)['"]/g)].map((match) => match[1]!);
    expect(programs.length).toBeGreaterThanOrEqual(4);
    expect(programs.filter((program) => !existsSync(join(release, program)))).toEqual([]);
  });
});

