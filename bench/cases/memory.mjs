// Case 6: Redis bytes per pending delayed delivery. P deliveries are inserted as pending retries
// due in an hour and their attempt-2 jobs queued with enqueueDeliveries (the dispatcher's own
// function), with the dispatcher running; INFO memory's used_memory before and after, over P.
// Cross-check: the sum of MEMORY USAGE over the bench prefix's delivery-queue keys.
import { enqueueDeliveries, newId } from '@svc/core';
import { sleep } from '../lib/stats.mjs';

async function usedMemory(redis) {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)[1]);
}

/** Sum of MEMORY USAGE of every key matching pattern, and the key count. */
async function keyBytes(redis, pattern) {
  let cursor = '0';
  let bytes = 0;
  let keys = 0;
  let rounds = 0;
  do {
    const [nextCursor, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = nextCursor;
    if (batch.length) {
      const pipeline = redis.pipeline();
      for (const key of batch) pipeline.memory('USAGE', key, 'SAMPLES', '0');
      for (const [, value] of await pipeline.exec()) bytes += Number(value ?? 0);
      keys += batch.length;
    }
  } while (cursor !== '0' && ++rounds < 1_000_000);
  return { bytes, keys };
}

export async function memoryRun({ db, redis, queues, prefix, fan, pending }) {
  const perEvent = fan.subscriptions.length;
  const eventCount = Math.ceil(pending / perEvent);
  // Events already fanned out, so the sweep leaves them alone; the deliveries are the retries.
  const events = Array.from({ length: eventCount }, (_, i) => ({
    id: newId('evt'),
    account_id: fan.accountId,
    type: 'power_up.deployed',
    body: JSON.stringify({ event: 'power_up.deployed', timestamp: new Date().toISOString(), data: { deploymentId: `dep_mem_${i}`, siteId: fan.siteId, powerUpId: 'bench-memory' } }),
    fanned_out_at: new Date(),
  }));
  for (let k = 0; k < events.length; k += 1_000) await db('events').insert(events.slice(k, k + 1_000));
  const eventIds = events.map((e) => e.id);
  try {
    const { rows } = await db.raw(
      `INSERT INTO deliveries (id, event_id, subscription_id, status, attempt_count, next_attempt_at)
       SELECT 'dlv_' || replace(gen_random_uuid()::text, '-', ''), e.id, s.id, 'pending', 1, clock_timestamp() + interval '1 hour'
         FROM unnest(?::text[]) AS e(id) CROSS JOIN unnest(?::text[]) AS s(id)
        LIMIT ?
       RETURNING id, subscription_id`,
      [eventIds, fan.subscriptions, pending],
    );
    await sleep(300);
    const delayedBefore = await queues.deliveries[0].getDelayedCount();
    const before = await usedMemory(redis);
    const keysBefore = await keyBytes(redis, `${prefix}:deliver:*`);
    for (let k = 0; k < rows.length; k += 1_000) {
      await enqueueDeliveries(
        queues,
        rows.slice(k, k + 1_000).map((row) => ({ deliveryId: row.id, subscriptionId: row.subscription_id, attempt: 2, delayMs: 3_600_000 })),
      );
    }
    await sleep(300);
    const after = await usedMemory(redis);
    const keysAfter = await keyBytes(redis, `${prefix}:deliver:*`);
    const delayed = (await queues.deliveries[0].getDelayedCount()) - delayedBefore;
    return {
      pending: rows.length,
      delayedJobs: delayed,
      bytesPerPending: (after - before) / rows.length,
      keyBytesPerPending: (keysAfter.bytes - keysBefore.bytes) / rows.length,
      usedMemoryBefore: before,
      usedMemoryAfter: after,
      valid: delayed === rows.length,
    };
  } finally {
    await queues.deliveries[0].drain(true);
    await db('events').whereIn('id', eventIds).del();
  }
}
