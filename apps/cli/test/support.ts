import { createDb, createSubscription, type Db, type Queues } from '@svc/core';
import { seedAccount, seedSite, TEST_DATABASE_URL, TEST_REDIS_URL, uniqueTag } from '@svc/core/testing';
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

/** A site of a new account. */
export async function newSite(db: Db): Promise<{ accountId: string; siteId: string; domain: string }> {
  const { accountId } = await seedAccount(db);
  const site = await seedSite(db, accountId);
  return { accountId, siteId: site.id, domain: site.domain };
}

/** A site whose account has one subscription to every event: its events have a first attempt to queue. */
export async function newSubscribedSite(db: Db): Promise<{ accountId: string; siteId: string; domain: string; subscriptionId: string }> {
  const site = await newSite(db);
  const subscription = await createSubscription(db, site.accountId, { url: `https://receiver.example.com/${uniqueTag()}`, events: ['*'] });
  return { ...site, subscriptionId: subscription.id };
}

/** The data of the first-attempt job a producer queued for the event's one delivery (ADR 13). */
export async function queuedFirstAttempt(db: Db, queues: Pick<Queues, 'delivery'>, eventId: string): Promise<unknown> {
  const delivery = await db('deliveries').where({ event_id: eventId }).first('id');
  return delivery ? (await queues.delivery.getJob(`${delivery.id as string}-1`))?.data : undefined;
}
