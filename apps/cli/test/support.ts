import { createDb, type Db } from '@svc/core';
import { createSubscription } from '@svc/core/operator';
import { seedAccount, seedSite, TEST_DATABASE_URL, TEST_REDIS_URL, uniqueTag } from '@svc/core/testing';
import { createHarness, waitForDelivery, type DeliveryRow, type Harness } from '@svc/dispatcher/test-support';
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

/**
 * A running dispatcher on a database of its own, with an HTTPS receiver (the dispatcher's test
 * harness), and the environment `svc` runs with against it. Its sweep runs once at start and then
 * only every minute: a delivery that arrives within seconds of a command was queued by the
 * command itself (its job in Redis), never by the sweep.
 */
export async function openDeliveryStage(): Promise<{ harness: Harness; env: Record<string, string> }> {
  const harness = await createHarness({ DISPATCHER_SWEEP_INTERVAL_MS: '60000' });
  harness.startDispatcher();
  return { harness, env: testEnv({ DATABASE_URL: harness.config.databaseUrl, QUEUE_PREFIX: harness.config.queuePrefix }) };
}

/**
 * A first attempt is "prompt" when it is received well before the sweep would even consider it
 * lost (2 s overdue): it came from the job the command queued.
 */
export const PROMPT_DELIVERY_MS = 2_000;

/** Polls until the event's delivery to the subscription is delivered (or the wait times out), then returns its row. */
export async function deliveredRow(harness: Harness, eventId: string, subscriptionId: string): Promise<DeliveryRow> {
  return waitForDelivery(harness, eventId, subscriptionId, (row) => row.status !== 'pending', 'the first attempt to be made', 10_000);
}
