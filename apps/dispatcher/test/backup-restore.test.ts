import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { completeAiMonitorRun, createDb, type Db } from '@svc/core';
import { requireSystemCommand, TEST_DATABASE_URL, uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';
import { producerOf, type AttemptRow, type DeliveryRow } from './support/delivery-probe.js';

const EVENTS = 6;
/** Long enough that every retry is still ahead when the dump is taken and restored, even on a loaded machine. */
const RETRY_DELAY_MS = 15_000;
/**
 * How late a retry may go out once due: with Redis empty the sweep queues a delivery once it is
 * 2 s overdue (OVERDUE_AFTER_MS), checking every 250 ms here, and a loaded machine adds its pauses.
 */
const SWEEP_LATENESS_BOUND_MS = 2_000 + 250 + 5_000;

describe('a database restored from pg_dump beside a Redis that holds none of its queues', () => {
  let h: Harness;
  let restored: Db;
  let restoredUrl: string;
  const dir = mkdtempSync(join(tmpdir(), 'svc-backup-'));

  beforeAll(async () => {
    requireSystemCommand('pg_dump', 'postgresql-client', 'the backup and restore story dumps a database');
    requireSystemCommand('pg_restore', 'postgresql-client', 'the backup and restore story restores a database');
    h = await createHarness({ WEBHOOK_RETRY_DELAYS_MS: Array(6).fill(RETRY_DELAY_MS).join(',') });
    const url = new URL(TEST_DATABASE_URL);
    url.pathname = `/${url.pathname.slice(1)}_restored_${uniqueTag()}`;
    restoredUrl = url.toString();
  });

  afterAll(async () => {
    await h.close();
    await restored?.destroy();
    const admin = createDb(TEST_DATABASE_URL, { poolMax: 1 });
    await admin.raw(`DROP DATABASE IF EXISTS "${new URL(restoredUrl).pathname.slice(1)}" WITH (FORCE)`);
    await admin.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  it('attempts every pending delivery on its schedule, and none twice beyond its delivery id', async () => {
    // Before the backup: each delivery's first attempt failed (503), its retry is due in 6 s.
    const tenant = await seedTenant(h);
    const path = `/restore-${uniqueTag()}`;
    h.receiver.answerWith(path, 503);
    const subscription = await tenant.subscribe(path);
    const dispatcher = h.startDispatcher();
    for (let i = 0; i < EVENTS; i += 1) await completeAiMonitorRun(producerOf(h), { siteId: tenant.site.id, compositeScore: i });
    const pending = await waitFor(async () => {
      const rows = await h.db('deliveries').where({ subscription_id: subscription.id }).select<DeliveryRow[]>('*');
      return rows.length === EVENTS && rows.every((row) => row.attempt_count === 1 && row.status === 'pending') ? rows : undefined;
    }, 20_000, 'every first attempt failed and its retry scheduled');
    await dispatcher.stop();

    // The backup, and the restore into an empty database.
    const dump = join(dir, 'svc.dump');
    execFileSync('pg_dump', ['--format=custom', `--file=${dump}`, '--dbname', h.config.databaseUrl], { stdio: 'pipe' });
    await h.db.raw(`CREATE DATABASE "${new URL(restoredUrl).pathname.slice(1)}"`);
    execFileSync('pg_restore', ['--exit-on-error', '--no-owner', '--dbname', restoredUrl, dump], { stdio: 'pipe' });
    restored = createDb(restoredUrl, { poolMax: 5 });

    // Redis has lost everything: no queue of the service's is left.
    const keys = await h.queueKeys();
    if (keys.length > 0) await h.redis.del(...keys);
    expect(await h.queueKeys()).toEqual([]);

    // The receiver is back; a dispatcher runs on the restored database alone.
    h.receiver.answerWith(path, 200);
    const arrivedBefore = h.receiver.to(path).length;
    const restartedAt = Date.now();
    expect(Math.min(...pending.map((row) => row.next_attempt_at!.getTime()))).toBeGreaterThan(restartedAt);
    h.startDispatcher({ DATABASE_URL: restoredUrl }, { db: restored });
    const delivered = await waitFor(async () => {
      const rows = await restored('deliveries').where({ subscription_id: subscription.id }).select<DeliveryRow[]>('*');
      return rows.every((row) => row.status === 'delivered') ? rows : undefined;
    }, 60_000, 'every restored delivery delivered');

    // Each retry went out once, on its schedule: not before it was due, and within the sweep's reach of it.
    const dueAt = new Map(pending.map((row) => [row.id, row.next_attempt_at!.getTime()]));
    const retries = await restored('delivery_attempts').whereIn('delivery_id', [...dueAt.keys()]).where({ n: 2 }).select<AttemptRow[]>('*');
    expect(retries).toHaveLength(EVENTS);
    for (const retry of retries) {
      const lateMs = retry.at.getTime() - dueAt.get(retry.delivery_id)!;
      expect({ id: retry.delivery_id, notEarly: lateMs >= 0, inReach: lateMs <= SWEEP_LATENESS_BOUND_MS || lateMs }).toEqual({ id: retry.delivery_id, notEarly: true, inReach: true });
      expect(retry.status_code).toBe(200);
    }
    expect(delivered.map((row) => row.attempt_count)).toEqual(Array(EVENTS).fill(2));
    const afterRestore = h.receiver.to(path).slice(arrivedBefore);
    const perDelivery = new Map<string, number>();
    for (const request of afterRestore) {
      const id = String(request.headers['x-service-delivery-id']);
      perDelivery.set(id, (perDelivery.get(id) ?? 0) + 1);
    }
    expect([...perDelivery.entries()].sort()).toEqual([...dueAt.keys()].map((id) => [id, 1]).sort());
  }, 120_000);
});
