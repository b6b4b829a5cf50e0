import { createDb, type Db } from '@svc/core';
import { TEST_DATABASE_URL, TEST_REDIS_URL, uniqueTag } from '@svc/core/testing';
import { runCli } from '../src/run-cli.js';

/** What one in-process `svc` run left behind. */
export interface SvcRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** The environment tests run `svc` with: the test database, real Redis, a queue prefix of this file's own. */
export function testEnv(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: TEST_DATABASE_URL,
    REDIS_URL: TEST_REDIS_URL,
    QUEUE_PREFIX: `test-cli-${uniqueTag()}`,
    LOG_LEVEL: 'error',
    ...overrides,
  };
}

/** Runs `svc <args>` in-process, as main.ts does, capturing stdout and stderr. */
export async function runSvc(args: string[], env: Record<string, string> = testEnv()): Promise<SvcRun> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, {
    env,
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
  });
  return { code, stdout, stderr };
}

/**
 * Runs `svc <args> --json`, expects success, and returns the one JSON object it printed
 * (JSON.parse fails on anything more than one value).
 */
export async function runSvcJson<T = Record<string, unknown>>(args: string[], env?: Record<string, string>): Promise<T> {
  const run = await runSvc([...args, '--json'], env);
  if (run.code !== 0) throw new Error(`svc ${args.join(' ')} exited ${run.code}: ${run.stderr}`);
  expectOneJsonLine(run.stdout);
  return JSON.parse(run.stdout) as T;
}

/** stdout holds exactly one line, and it is a JSON object. */
export function expectOneJsonLine(stdout: string): void {
  const lines = stdout.split('\n');
  if (lines.length !== 2 || lines[1] !== '' || !lines[0]?.startsWith('{')) {
    throw new Error(`expected exactly one JSON object on stdout, got: ${JSON.stringify(stdout)}`);
  }
}

/** The test's own handle on the test database, to check what commands stored. */
export function openTestDb(): Db {
  return createDb(TEST_DATABASE_URL, { poolMax: 2 });
}

export const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
