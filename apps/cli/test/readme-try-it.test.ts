import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createDb, type Db } from '@svc/core';
import { createIsolatedDatabase, freePort, httpGet, TEST_REDIS_URL, uniqueTag, waitFor } from '@svc/core/testing';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

/** README's "Try it" commands: the first sh block under that heading, as a reader copies it. */
function tryItSection(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('\n## Try it\n'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  if (section.length === readme.length + 1 || block === undefined) throw new Error('README has no "## Try it" section with an sh block');
  return block;
}

/**
 * Runs before the section: strict bash, and a curl that still prints what the real one prints
 * but also writes each answer's status and arguments to a file, so the test sees every call's status.
 */
const PRELUDE = [
  'set -euo pipefail',
  'curl() {',
  '  local out',
  "  out=$(command curl -sS -w '\\n%{http_code}' \"$@\")",
  "  printf '%s\\n' \"${out%$'\\n'*}\"",
  "  printf '%s %s\\n' \"${out##*$'\\n'}\" \"$*\" >> \"$TRY_IT_STATUSES\"",
  '}',
  '',
].join('\n');

function run(command: string, args: string[], env: NodeJS.ProcessEnv): { child: ChildProcess; output: () => string; exited: Promise<number> } {
  let output = '';
  const child = spawn(command, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<number>((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : 0))));
  return { child, output: () => output, exited };
}

describe("README's Try it, run line by line against `npm start`'s processes", () => {
  let database: Awaited<ReturnType<typeof createIsolatedDatabase>>;
  let db: Db;
  let service: ReturnType<typeof run>;
  let env: NodeJS.ProcessEnv;
  let port: number;
  const dir = mkdtempSync(join(tmpdir(), 'svc-try-it-'));

  beforeAll(async () => {
    database = await createIsolatedDatabase();
    db = createDb(database.url, { poolMax: 2 });
    port = await freePort();
    env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME ?? dir,
      DATABASE_URL: database.url,
      REDIS_URL: TEST_REDIS_URL,
      QUEUE_PREFIX: `test-try-it-${uniqueTag()}`,
      PORT: String(port),
      METRICS_PORT: '0',
      LOG_LEVEL: 'error',
      TRY_IT_STATUSES: join(dir, 'statuses'),
    };
    // What `npm start` runs once built: migrate, then one API and one dispatcher.
    service = run(process.execPath, ['scripts/start-all.mjs'], env);
    await waitFor(async () => (await httpGet(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, 30_000, `the service on ${port}: ${service.output()}`);
  }, 60_000);

  afterAll(async () => {
    if (service?.child.exitCode === null) {
      service.child.kill('SIGTERM');
      await service.exited;
    }
    await db?.destroy();
    await database?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs every command as written, each API call answered as its comment says, and leaves the state it describes', async () => {
    const section = tryItSection();
    // The one change a reader would make: the port this test's service listens on.
    const script = section.replaceAll('localhost:3000', `localhost:${port}`);
    const shell = run('bash', ['-c', PRELUDE + script], env);
    const code = await shell.exited;
    const output = shell.output();
    expect({ code, output: code === 0 ? '' : output }).toEqual({ code: 0, output: '' });

    const calls = readFileSync(env.TRY_IT_STATUSES!, 'utf8')
      .trim()
      .split('\n')
      .map((line) => ({ status: Number(line.slice(0, 3)), args: line.slice(4) }));
    // Every curl of the section ran (none skipped by an early exit) ...
    expect(calls).toHaveLength(section.match(/(^|\$\()\s*curl /gm)?.length ?? -1);
    // ... and each got a success, but the redelivery of a delivery still being retried, which the
    // section says answers 409 (delivery_pending) while hooks.example.com does not answer.
    const unexpected = calls.filter(({ status, args }) => !(status >= 200 && status < 300) && !(status === 409 && args.includes('/redeliver')));
    expect(unexpected).toEqual([]);

    // The state the section describes: one account with its key, a site, a subscription whose
    // events the PATCH changed and whose secret was rotated, and the scan's delivery in its log.
    const accounts = await db('accounts').where({ name: 'Acme' }).select('id');
    expect(accounts).toHaveLength(1);
    const subscriptions = await db('webhook_subscriptions').where({ account_id: accounts[0]!.id }).select('events', 'previous_secret');
    expect(subscriptions).toEqual([expect.objectContaining({ events: ['scan.completed', 'ai_check.completed'] })]);
    expect(subscriptions[0]!.previous_secret).toEqual(expect.any(String));
    expect(output).toMatch(new RegExp(`"url":"http://localhost:${port}/settings/sign-in\\?token=`));
    const deliveries = await db('deliveries as d')
      .join('events as e', 'e.id', 'd.event_id')
      .join('webhook_subscriptions as s', 's.id', 'd.subscription_id')
      .where('s.account_id', accounts[0]!.id)
      .select('e.type');
    expect(deliveries.map((row: { type: string }) => row.type)).toEqual(['scan.completed']);
  }, 120_000);
});
