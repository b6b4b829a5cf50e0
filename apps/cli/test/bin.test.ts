import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from '@jest/globals';
import { createSubscription } from '@svc/core';
import { seedAccount, seedSite, TEST_DATABASE_URL, TEST_REDIS_URL, uniqueTag } from '@svc/core/testing';
import { BUNDLE_DIR } from '../src/bundle/run-bundled.js';
import { openTestDb } from './support.js';

const run = promisify(execFile);
/** The committed shim npm links as `svc` (this file runs from dist/test). */
const BIN = fileURLToPath(new URL('../../bin/svc.js', import.meta.url));
/** What the bin runs the bundles with (compiled beside this file's dist/test). */
const RUN_BUNDLED = new URL('../src/bundle/run-bundled.js', import.meta.url).href;
/** Long enough for a cold start; a process kept alive by an open connection would hit it. */
const EXIT_TIMEOUT_MS = 20_000;

const db = openTestDb();
afterAll(async () => {
  await db.destroy();
});

function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { DATABASE_URL: TEST_DATABASE_URL, REDIS_URL: TEST_REDIS_URL, LOG_LEVEL: 'error', ...extra };
}

describe('the svc bin', () => {
  it('creates an account when run as a child process and ends by itself', async () => {
    const name = `Bin ${uniqueTag()}`;

    const { stdout, stderr } = await run(process.execPath, [BIN, 'accounts', 'create', '--name', name, '--json'], {
      env: childEnv(),
      timeout: EXIT_TIMEOUT_MS,
    });

    expect(stderr).toBe('');
    const out = JSON.parse(stdout) as { id: string };
    expect(await db('accounts').where({ id: out.id }).first()).toMatchObject({ name });
  });

  it('completes a scan, announcing its event, and still ends by itself once its connections are closed', async () => {
    const { accountId } = await seedAccount(db);
    const site = await seedSite(db, accountId);
    const env = childEnv({ QUEUE_PREFIX: `test-cli-${uniqueTag()}` });
    const started = await run(process.execPath, [BIN, 'scans', 'start', '--site', site.id, '--json'], { env, timeout: EXIT_TIMEOUT_MS });
    const scanId = (JSON.parse(started.stdout) as { id: string }).id;

    const { stdout } = await run(process.execPath, [BIN, 'scans', 'complete', scanId, '--score', '88', '--json'], {
      env,
      timeout: EXIT_TIMEOUT_MS,
    });

    expect(JSON.parse(stdout)).toMatchObject({ id: scanId, status: 'completed', score: 88 });
  });

  it('exits 2 with one line on stderr and no stack trace for a bad score', async () => {
    const error = await run(process.execPath, [BIN, 'scans', 'complete', 'scan_x', '--score', 'abc'], {
      env: childEnv(),
      timeout: EXIT_TIMEOUT_MS,
    }).then(
      () => undefined,
      (failure: { code: number; stdout: string; stderr: string }) => failure,
    );

    expect(error).toMatchObject({ code: 2, stdout: '' });
    expect(error?.stderr).toBe("svc: error: option '--score <n>' argument 'abc' is invalid. It must be a number such as 87 or 87.5.\n");
  });

  it('prints exactly the same with the code cache as without it', async () => {
    const outcome = (args: string[], extra: Record<string, string>) =>
      run(process.execPath, [BIN, ...args], { env: childEnv(extra), timeout: EXIT_TIMEOUT_MS }).then(
        ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
        (failure: { code: number; stdout: string; stderr: string }) => ({ code: failure.code, stdout: failure.stdout, stderr: failure.stderr }),
      );
    for (const args of [['sites', '--help'], ['scans', 'complete', 'scan_x', '--score', 'abc'], ['deliveries', 'list', '--subscription', 'sub_missing', '--json']]) {
      const cached = await outcome(args, {});
      const compiled = await outcome(args, { SVC_CODE_CACHE: 'off' });
      expect(cached).toEqual(compiled);
      expect(cached.stdout + cached.stderr).not.toBe('');
    }
  });

  it('deploys a Power-Up to a subscribed site without loading BullMQ or ioredis (docs/adr/0015)', async () => {
    const { accountId } = await seedAccount(db);
    const site = await seedSite(db, accountId);
    await createSubscription(db, accountId, { url: `https://receiver.example.com/${uniqueTag()}`, events: ['*'] });
    // In a child process, as the bin would run, counting the bundles the command loaded.
    const probe = [
      `import { BUNDLE_DIR, loadBundledCli } from ${JSON.stringify(RUN_BUNDLED)};`,
      'const cli = loadBundledCli({ readDirs: [BUNDLE_DIR], writeDirs: [] });',
      `const code = await cli.runCli(['power-ups', 'deploy', '--site', ${JSON.stringify(site.id)}, '--power-up', 'pu_probe', '--json'], { stdout: { write: () => true } });`,
      'console.log(JSON.stringify({ code, bundles: cli.scripts.length }));',
    ].join('\n');

    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', probe], {
      env: childEnv({ QUEUE_PREFIX: `test-cli-${uniqueTag()}` }),
      timeout: EXIT_TIMEOUT_MS,
    });

    expect(JSON.parse(stdout)).toEqual({ code: 0, bundles: 1 });
    expect(await db('deliveries').join('events', 'events.id', 'deliveries.event_id').where({ 'events.account_id': accountId })).toHaveLength(1);
  });

  it('runs a command without starting the ES module loader of Node or loading child_process, assert or dns, from a bundle with only the postgres dialect of knex (docs/adr/0019, 0023)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-bin-modules-'));
    try {
      // Preloaded into a process: on exit, it writes down every module Node loaded.
      const preload = join(dir, 'record-modules.cjs');
      writeFileSync(preload, "process.on('exit', () => require('node:fs').writeFileSync(process.env.MODULES_FILE, JSON.stringify(process.moduleLoadList)));");
      const modulesOf = async (args: string[], extra: Record<string, string> = {}) => {
        const file = join(dir, `modules-${uniqueTag()}.json`);
        const { stdout } = await run(process.execPath, ['--require', preload, ...args], { env: childEnv({ ...extra, MODULES_FILE: file }), timeout: EXIT_TIMEOUT_MS });
        return { stdout, modules: JSON.parse(readFileSync(file, 'utf8')) as string[] };
      };
      const name = `Bin modules ${uniqueTag()}`;

      const bare = await modulesOf(['-e', '0']);
      const { stdout, modules } = await modulesOf([BIN, 'accounts', 'create', '--name', name, '--json']);

      // What Node loads for any process (its ES module loader's core) is in the bare list.
      const added = modules.filter((module) => !bare.modules.includes(module));
      expect(added).toContain('NativeModule net');
      expect(added.filter((module) => module.includes('modules/esm/') || /child_process|dgram/.test(module))).toEqual([]);
      // knex's asserts and pg's dns lookup (for pg-native only) are required on first use (ADR 23);
      // a host name to connect to would load dns for its own lookup.
      expect(added).not.toContain('NativeModule assert');
      if (isIP(new URL(TEST_DATABASE_URL).hostname)) expect(added).not.toContain('NativeModule dns');
      expect(await db('accounts').where({ id: (JSON.parse(stdout) as { id: string }).id }).first()).toMatchObject({ name });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const map = JSON.parse(readFileSync(join(BUNDLE_DIR, 'svc.cjs.map'), 'utf8')) as { sources: string[] };
    const dialects = new Set(map.sources.map((source) => /knex\/lib\/dialects\/([^/]+)\//.exec(source)?.[1]).filter(Boolean));
    expect([...dialects]).toEqual(['postgres']);
  });

  it('finds, after the build, a code cache of both bundles that V8 takes', async () => {
    // In a child process, as the bin would run: jest's own process runs with other V8 flags.
    const probe = [
      `import { BUNDLE_DIR, loadBundledCli } from ${JSON.stringify(RUN_BUNDLED)};`,
      'const cli = loadBundledCli({ readDirs: [BUNDLE_DIR], writeDirs: [] });',
      'cli.loadRedisLibs();',
      'console.log(JSON.stringify(cli.scripts.map((script) => script.cache)));',
    ].join('\n');

    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', probe], { timeout: EXIT_TIMEOUT_MS });

    expect(JSON.parse(stdout)).toEqual(['accepted', 'accepted']);
  });
});

