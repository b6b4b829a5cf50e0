import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createDb, newId, type Db } from '@svc/core';
import { redeliverSubscriptionDelivery } from '@svc/core/operator';
import { insertEvent, purgeExpiredHistory } from '@svc/core/dispatcher';
import { uniqueTag, waitFor } from '@svc/core/testing';
import { createHarness, seedTenant, type Harness } from './support/harness.js';

/**
 * A purge statement takes its snapshot when it starts and locks its rows as its scan reaches them;
 * on a large table that is a while. A redelivery committed in between is invisible to the purge's
 * "no redelivery points at it" check, yet leaves the original unlocked: the purge could delete the
 * original and, by ON DELETE CASCADE, the redelivery just answered 202.
 *
 * PostgreSQL has no hook inside one statement, so the test widens that moment itself: the purge
 * runs on a connection whose search_path puts a schema of this test before pg_catalog, where
 * `now()` (the purge's cutoff) first waits for an advisory lock the test holds. Declared volatile,
 * so that the planner never calls it (it would pause before the snapshot) and the scan calls it for
 * each row it reads: the purge stops after its snapshot and before its first row lock, exactly
 * where a long scan would be, until the test lets it go.
 */
const PAUSE_LOCK_KEY = 7_311_043_926_150_777;
const RETENTION = { retentionDays: 30, batchSize: 500, maxBatches: 100 };

let h: Harness;
let pausableDb: Db;
let pauseSchema: string;

beforeAll(async () => {
  h = await createHarness();
  pauseSchema = `purge_pause_${uniqueTag()}`;
  await h.db.raw(`CREATE SCHEMA ${pauseSchema}`);
  await h.db.raw(
    `CREATE FUNCTION ${pauseSchema}.now() RETURNS timestamptz LANGUAGE plpgsql VOLATILE AS $$
     BEGIN
       PERFORM pg_advisory_lock_shared(${PAUSE_LOCK_KEY});
       PERFORM pg_advisory_unlock_shared(${PAUSE_LOCK_KEY});
       RETURN pg_catalog.now();
     END $$`,
  );
  const url = new URL(h.config.databaseUrl);
  url.searchParams.set('options', `-c search_path=${pauseSchema},pg_catalog,public`);
  pausableDb = createDb(url.toString(), { poolMax: 1 });
});
afterAll(async () => {
  await pausableDb.destroy();
  await h.close();
});

const ago = (days: number) => h.db.raw(`clock_timestamp() - make_interval(days => ?)`, [days]);

/** A delivery that failed for good 40 days ago (7 attempts), of a 40-day-old event, to a receiver now fixed. */
async function expiredFailedDelivery() {
  const tenant = await seedTenant(h);
  const path = `/ok/fixed-${uniqueTag()}`;
  const sub = await tenant.subscribe(path);
  const event = await insertEvent(h.db, tenant.accountId, 'scan.completed', { scanId: 'scan_old', siteId: tenant.site.id, domain: tenant.site.domain, score: 12 });
  await h.db('events').where({ id: event.id }).update({ created_at: ago(40), fanned_out_at: ago(40) });
  const original = newId('dlv');
  await h.db('deliveries').insert({
    id: original,
    event_id: event.id,
    subscription_id: sub.id,
    status: 'failed',
    attempt_count: 7,
    created_at: ago(40),
    finished_at: ago(40),
    failure_reason: 'attempts exhausted',
  });
  for (let n = 1; n <= 7; n += 1) {
    await h.db('delivery_attempts').insert({ delivery_id: original, n, at: ago(40), status_code: 500, duration_ms: 5 });
  }
  return { tenant, sub, path, eventId: event.id, original };
}

/** The purge's backend, waiting on the test's advisory lock inside its delivery statement. */
async function purgePausedMidScan(): Promise<boolean> {
  const { rows } = await h.db.raw(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'
        AND query LIKE '%FOR UPDATE SKIP LOCKED%'`,
  );
  return (rows as Array<{ n: number }>)[0]!.n > 0;
}

describe('a redelivery accepted while the retention purge is scanning', () => {
  it('survives the purge as a pending delivery, keeps its original, and is delivered', async () => {
    const { tenant, sub, path, eventId, original } = await expiredFailedDelivery();
    const pause = await h.db.transaction();
    let purging: ReturnType<typeof purgeExpiredHistory> | undefined;
    try {
      await pause.raw('SELECT pg_advisory_xact_lock(?::bigint)', [String(PAUSE_LOCK_KEY)]);
      purging = purgeExpiredHistory(pausableDb, RETENTION);
      // Keep an early failure of the purge from surfacing as an unhandled rejection before it is awaited.
      purging.catch(() => undefined);
      await waitFor(purgePausedMidScan, 10_000, 'the purge to stop after its snapshot, before its row locks');

      // The API's call (POST …/redeliver answers 202 with this): stored and committed now.
      const accepted = await redeliverSubscriptionDelivery({ db: h.db, queues: h.queues }, tenant.accountId, sub.id, original);
      expect(accepted.delivery).toMatchObject({ status: 'pending', redeliveryOf: original, eventId });
    } finally {
      await pause.commit();
    }
    const purged = await purging;

    const rows: Array<{ id: string; status: string; redelivery_of: string | null }> = await h.db('deliveries')
      .where({ event_id: eventId })
      .orderBy('created_at')
      .select('id', 'status', 'redelivery_of');
    expect(purged).toMatchObject({ ran: true, deliveries: 0, events: 0 });
    expect(rows).toEqual([
      { id: original, status: 'failed', redelivery_of: null },
      { id: expect.stringMatching(/^dlv_/), status: 'pending', redelivery_of: original },
    ]);
    expect(await h.db('events').where({ id: eventId }).first('id')).toEqual({ id: eventId });

    const redelivery = rows[1]!.id;
    h.startDispatcher();
    await waitFor(
      async () => (await h.db('deliveries').where({ id: redelivery }).first('status'))?.status === 'delivered',
      20_000,
      'the redelivery to be delivered',
    );
    expect(h.receiver.to(path).map((request) => request.headers['x-service-delivery-id'])).toEqual([redelivery]);
  });
});
