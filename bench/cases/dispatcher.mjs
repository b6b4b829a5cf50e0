// Cases 2 (throughput vs a got loop), 3 (latency at a steady rate), 4 (retry punctuality) and
// 5 (fan-out). Events are published through the producer functions of @svc/core, exactly as
// other services publish them; receipts are timed by the receiver process.
import { completeAiMonitorRun, completeScan, deployPowerUp, enqueueDeliveries, newId } from '@svc/core';
import { createAccount, createSite, createSubscription } from '@svc/core/operator';
import { cpuDelta, cpuSnapshot, machineDelta, machineSnapshot } from '../lib/cpu.mjs';
import { describe, nowMs, sleep, until } from '../lib/stats.mjs';

/**
 * A publisher over the throughput accounts: event i goes to account i % accounts, and its kind
 * rotates through the three producers (power_up.deployed, ai_check.completed, scan.completed).
 */
export class Publisher {
  constructor({ db, queues, accounts }) {
    this.deps = { db, queues };
    this.db = db;
    this.accounts = accounts;
    this.scanIds = [];
  }

  /** Starts the running scans that the scan.completed events of the next `n` publishes complete. */
  async prepare(n) {
    this.scanIds = new Array(n);
    const rows = [];
    for (let i = 2; i < n; i += 3) {
      this.scanIds[i] = newId('scan');
      rows.push({ id: this.scanIds[i], site_id: this.accounts[i % this.accounts.length].siteId, status: 'running' });
    }
    for (let k = 0; k < rows.length; k += 1_000) await this.db('scans').insert(rows.slice(k, k + 1_000));
  }

  async publish(i) {
    const account = this.accounts[i % this.accounts.length];
    switch (i % 3) {
      case 0:
        return (await deployPowerUp(this.deps, { siteId: account.siteId, powerUpId: `pu-${i}` })).eventId;
      case 1:
        return (await completeAiMonitorRun(this.deps, { siteId: account.siteId, compositeScore: 40 + (i % 60) })).eventId;
      default:
        return (await completeScan(this.deps, { scanId: this.scanIds[i], score: 50 + (i % 50) })).eventId;
    }
  }
}

/** Committed transactions in the bench database so far (pg_stat_database). */
async function commits(db) {
  await db.raw('SELECT pg_stat_clear_snapshot()');
  const { rows } = await db.raw('SELECT xact_commit::bigint AS n FROM pg_stat_database WHERE datname = current_database()');
  return Number(rows[0].n);
}

/** Waits until every delivery of the events is finished in Postgres; returns counts. */
export async function waitRecorded(db, eventIds, expected, timeoutMs = 60_000) {
  let last;
  await until(async () => {
    const { rows } = await db.raw(
      `SELECT count(*) FILTER (WHERE d.status = 'delivered')::int AS delivered,
              count(*) FILTER (WHERE d.status = 'failed')::int AS failed,
              count(*)::int AS deliveries,
              coalesce(sum(d.attempt_count), 0)::int AS attempts
         FROM deliveries d WHERE d.event_id = ANY(?)`,
      [eventIds],
    );
    last = rows[0];
    return last.delivered + last.failed >= expected;
  }, timeoutMs, 200);
  const { rows } = await db.raw(
    `SELECT count(*)::int AS recorded FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.event_id = ANY(?)`,
    [eventIds],
  );
  return { ...last, recordedAttempts: rows[0].recorded };
}

/**
 * The service's part of case 2: N events published, deliveries/s from the first publish to the
 * last receipt, CPU per process, commits, and the checks (every delivery delivered with one
 * attempt, nothing received twice). `pids` may name several dispatchers (case 2b).
 * With `toLastAnswer` (a receiver that answers late), the time and the CPU run to the receiver's
 * last answer and the last outcome recorded, not to the last receipt: the last attempts' wait
 * for their answer is part of the work.
 */
export async function serviceThroughput({ db, receiver, publisher, n, publishConcurrency, pids, backlogQueues, toLastAnswer = false }) {
  await publisher.prepare(n);
  await receiver.rpc('reset');
  const eventIds = new Array(n);
  let next = 0;
  // Backlog mode (case 2b): the queues are paused while the events are published, then resumed,
  // so the rate is the dispatchers' own (from the resume to the last receipt), not the publisher's.
  if (backlogQueues) await Promise.all([backlogQueues.fanout.pause(), backlogQueues.deliveries[0].pause()]);
  let cpu0 = cpuSnapshot(pids);
  let machine0 = machineSnapshot();
  let xact0 = await commits(db);
  let t0 = nowMs();
  await Promise.all(
    Array.from({ length: publishConcurrency }, async () => {
      while (next < n) {
        const i = next++;
        eventIds[i] = await publisher.publish(i);
      }
    }),
  );
  const publishedAt = nowMs();
  if (backlogQueues) {
    cpu0 = cpuSnapshot(pids);
    machine0 = machineSnapshot();
    xact0 = await commits(db);
    t0 = nowMs();
    await Promise.all([backlogQueues.fanout.resume(), backlogQueues.deliveries[0].resume()]);
  }
  const got = await receiver.rpc('wait', { count: n, unique: true, timeoutMs: 180_000 });
  if (!got.reached) throw new Error(`throughput: only ${got.count} of ${n} deliveries received`);
  let cpu = cpuDelta(cpu0, cpuSnapshot(pids));
  let machine = machineDelta(machine0, machineSnapshot());
  let endAt = got.lastAt;
  let recorded;
  if (toLastAnswer) {
    recorded = await waitRecorded(db, eventIds, n);
    cpu = cpuDelta(cpu0, cpuSnapshot(pids));
    machine = machineDelta(machine0, machineSnapshot());
    endAt = (await receiver.rpc('count')).lastAnsweredAt;
  }
  const svc = { perSec: (n / (endAt - t0)) * 1000, elapsedMs: endAt - t0, publishMs: publishedAt - t0 };
  const { count: received, connections } = await receiver.rpc('count');
  recorded ??= await waitRecorded(db, eventIds, n);
  await sleep(1_000); // backends report their transaction counts within a second or so
  svc.pgCommitsPerDelivery = ((await commits(db)) - xact0) / n;
  svc.duplicates = received - n;
  svc.connections = connections;
  svc.cpuMs = cpu;
  svc.machine = machine;
  // Every process but the receiver (which stands for the customer's server) and Postgres backends of other databases.
  svc.cpuMsPerDelivery = Object.entries(cpu).filter(([k]) => k !== 'wallMs' && k !== 'receiver' && k !== 'postgres-other').reduce((sum, [, v]) => sum + v, 0) / n;
  svc.recorded = recorded;
  svc.valid = recorded.delivered === n && recorded.recordedAttempts === n && received === n;
  return { svc, eventIds };
}

/** Case 2, one run: N events, deliveries/s from the first publish to the last receipt; then the got loop. */
export async function throughputRun({ db, receiver, publisher, gotChild, receiverUrl, n, publishConcurrency, sendConcurrency, secret, run, pids }) {
  const { svc, eventIds } = await serviceThroughput({ db, receiver, publisher, n, publishConcurrency, pids });

  // Baseline: the same bytes, same receiver, same concurrency as the dispatcher.
  const { rows } = await db.raw('SELECT type, body FROM events WHERE id = ANY(?) ORDER BY created_at, id', [eventIds]);
  await receiver.rpc('reset');
  const baseCpu0 = cpuSnapshot({ ...pids, got: gotChild.pid });
  const base = await gotChild.rpc('run', { url: `${receiverUrl}/ok`, items: rows, secret, concurrency: sendConcurrency, idPrefix: `base-${run}-` });
  const baseGot = await receiver.rpc('wait', { count: n, unique: true, timeoutMs: 120_000 });
  if (!baseGot.reached) throw new Error(`throughput baseline: only ${baseGot.count} of ${n} requests received`);
  const baseCpu = cpuDelta(baseCpu0, cpuSnapshot({ ...pids, got: gotChild.pid }));
  const { connections: baseConnections } = await receiver.rpc('count');
  const baseline = { perSec: (n / (baseGot.lastAt - base.startedAt)) * 1000, elapsedMs: baseGot.lastAt - base.startedAt, errors: base.errors, statuses: base.statuses, connections: baseConnections, cpuMs: baseCpu };

  // The same loop with Node's own https, in the same process: what got costs per POST.
  await receiver.rpc('reset');
  const httpsCpu0 = cpuSnapshot({ got: gotChild.pid });
  const https = await gotChild.rpc('run', { url: `${receiverUrl}/ok`, items: rows, secret, concurrency: sendConcurrency, idPrefix: `https-${run}-`, client: 'https' });
  const httpsGot = await receiver.rpc('wait', { count: n, unique: true, timeoutMs: 120_000 });
  if (!httpsGot.reached) throw new Error(`https baseline: only ${httpsGot.count} of ${n} requests received`);
  const httpsCpu = cpuDelta(httpsCpu0, cpuSnapshot({ got: gotChild.pid }));
  baseline.senderCpuMsPerPost = { got: baseCpu.got / n, https: httpsCpu.got / n, httpsPerSec: (n / (httpsGot.lastAt - https.startedAt)) * 1000, httpsErrors: https.errors };
  return { svc, baseline, ratio: svc.perSec / baseline.perSec };
}

/**
 * Case 3, one run: `rate` events/s for `durationS`, open loop; publish → first attempt received.
 * If the dispatcher cannot keep up, receipts are awaited `drainMs` after the last publish; the
 * events still missing then count with the time waited (a lower bound) and the backlog is
 * purged so that the next run starts clean.
 */
export async function latencyRun({ db, receiver, publisher, queues, rate, durationS, drainMs }) {
  const n = Math.round(rate * durationS);
  await publisher.prepare(n);
  await receiver.rpc('reset');
  const startedAt = new Float64Array(n);
  const eventIds = new Array(n);
  const pending = [];
  let errors = 0;
  const interval = 1000 / rate;
  const t0 = nowMs() + 20;
  let i = 0;
  const lag = [];
  while (i < n) {
    const now = nowMs();
    while (i < n && t0 + i * interval <= now) {
      const k = i++;
      startedAt[k] = nowMs();
      lag.push(startedAt[k] - (t0 + k * interval));
      pending.push(
        publisher.publish(k).then(
          (id) => (eventIds[k] = id),
          () => errors++,
        ),
      );
    }
    if (i < n) await sleep(Math.max(0, t0 + i * interval - nowMs()));
  }
  await Promise.all(pending);
  const published = eventIds.filter(Boolean);
  const got = await receiver.rpc('wait', { count: published.length, unique: true, timeoutMs: drainMs });
  const waitedUntil = nowMs();
  const { records } = await receiver.rpc('dump');
  const firstReceipt = new Map();
  for (const [id, at, nth] of records) if (nth === 1) firstReceipt.set(id, at);
  const { rows } = await db.raw('SELECT id, event_id FROM deliveries WHERE event_id = ANY(?)', [published]);
  const deliveryOf = new Map(rows.map((row) => [row.event_id, row.id]));
  const latencies = [];
  let missing = 0;
  for (let k = 0; k < n; k++) {
    if (!eventIds[k]) continue;
    const at = firstReceipt.get(deliveryOf.get(eventIds[k]));
    if (at === undefined) {
      missing++;
      latencies.push(waitedUntil - startedAt[k]);
    } else latencies.push(at - startedAt[k]);
  }
  let purged = 0;
  if (missing > 0) purged = await purgeBacklog(db, queues, published);
  else await waitRecorded(db, published, published.length);
  const achievedRate = ((n - 1) / (startedAt[n - 1] - startedAt[0])) * 1000;
  return {
    ...describe(latencies),
    missing,
    purged,
    lowerBound: missing > 0,
    errors,
    achievedRate,
    scheduleLagP99: describe(lag).p99,
    valid: errors === 0 && published.length === n,
  };
}

/** Drops the queued work of these events: queued jobs removed, pending deliveries failed, events marked fanned out. */
async function purgeBacklog(db, queues, eventIds) {
  await queues.fanout.drain(true);
  await queues.deliveries[0].drain(true);
  await db('events').whereIn('id', eventIds).whereNull('fanned_out_at').update({ fanned_out_at: db.fn.now() });
  const purged = await db('deliveries')
    .whereIn('event_id', eventIds)
    .where({ status: 'pending' })
    .update({ status: 'failed', next_attempt_at: null, failure_reason: 'bench: backlog purged' });
  await sleep(2_000); // attempts already on the wire finish and find their delivery closed
  return purged;
}

/**
 * Case 4, one run: M retries falling due within the same second. Each delivery is left exactly
 * as the dispatcher leaves one after a failed first attempt — pending, attempt_count 1, a failed
 * attempt 1 recorded, next_attempt_at set — and its attempt-2 job is queued with
 * enqueueDeliveries (the dispatcher's own function), delayed until next_attempt_at. The due
 * times are spread evenly over one second starting `leadMs` from now.
 * Lateness = receipt of attempt 2 − next_attempt_at (negative would be early).
 */
export async function retryRun({ db, receiver, queues, fan, m, leadMs }) {
  await receiver.rpc('reset');
  const subs = fan.subscriptions.slice(0, m);
  const eventId = newId('evt');
  await db('events').insert({
    id: eventId,
    account_id: fan.accountId,
    type: 'power_up.deployed',
    body: JSON.stringify({ event: 'power_up.deployed', timestamp: new Date().toISOString(), data: { deploymentId: newId('dep'), siteId: fan.siteId, powerUpId: 'bench-retry' } }),
    fanned_out_at: new Date(),
  });
  const first = Math.ceil(Date.now() + leadMs);
  const rows = subs.map((subscriptionId, i) => ({
    id: newId('dlv'),
    event_id: eventId,
    subscription_id: subscriptionId,
    status: 'pending',
    attempt_count: 1,
    next_attempt_at: new Date(first + Math.floor((i * 1000) / subs.length)),
  }));
  for (let k = 0; k < rows.length; k += 1_000) {
    const chunk = rows.slice(k, k + 1_000);
    await db('deliveries').insert(chunk);
    await db('delivery_attempts').insert(chunk.map((row) => ({ delivery_id: row.id, n: 1, at: new Date(), status_code: 503, error: 'HTTP 503', duration_ms: 1 })));
  }
  for (let k = 0; k < rows.length; k += 1_000) {
    await enqueueDeliveries(
      queues,
      rows.slice(k, k + 1_000).map((row) => ({ deliveryId: row.id, subscriptionId: row.subscription_id, attempt: 2, delayMs: row.next_attempt_at.getTime() - Date.now() })),
    );
  }
  const queuedBy = Date.now();
  const got = await receiver.rpc('wait', { count: m, unique: true, timeoutMs: leadMs + 180_000 });
  const { records } = await receiver.rpc('dump');
  const due = new Map(rows.map((row) => [row.id, row.next_attempt_at.getTime()]));
  const lateness = [];
  let early = 0;
  for (const [id, at, nth] of records) {
    if (nth !== 1 || !due.has(id)) continue;
    lateness.push(at - due.get(id));
    if (at < due.get(id)) early++;
  }
  const recorded = await waitRecorded(db, [eventId], m);
  return {
    ...describe(lateness),
    early,
    queuedBeforeDueMs: first - queuedBy,
    received: lateness.length,
    recorded,
    valid: got.reached && lateness.length === m && recorded.delivered === m && first > queuedBy,
  };
}

/** Case 5, one run: one event to M subscriptions; time from the publish until all are received. */
export async function fanoutRun({ db, receiver, queues, siteId, m }) {
  await receiver.rpc('reset');
  const t0 = nowMs();
  const { eventId } = await deployPowerUp({ db, queues }, { siteId, powerUpId: 'bench-fanout' });
  const got = await receiver.rpc('wait', { count: m, unique: true, timeoutMs: 120_000 });
  if (!got.reached) throw new Error(`fan-out: only ${got.count} of ${m} deliveries received`);
  const recorded = await waitRecorded(db, [eventId], m);
  return { ms: got.lastAt - t0, recorded, valid: recorded.delivered === m };
}

/**
 * Case 9, a noisy neighbour: account A's `noisySubs` subscriptions go to a receiver that never
 * answers, and `noisyEvents` events make noisySubs × noisyEvents attempts due at once; meanwhile
 * account B publishes at `rate` for `durationS` to one healthy subscription. B's publish → receipt
 * latency is measured with A's attempts on the wire, and alone just before, in the same run.
 */
export async function neighbourRun({ db, receiver, queues, receiverUrl, noisySubs, noisyEvents, rate, durationS, drainMs }) {
  const tag = newId('nb').slice(3, 11);
  const tenant = async (name) => {
    const account = await createAccount(db, { name: `bench neighbour ${name} ${tag}` });
    const site = await createSite(db, account.id, { domain: `${name}-${tag}.example.com` });
    return { accountId: account.id, siteId: site.id };
  };
  const quiet = await tenant('quiet');
  await createSubscription(db, quiet.accountId, { url: `${receiverUrl}/ok?neighbour=quiet`, events: ['ai_check.completed'] });
  const noisy = await tenant('noisy');
  for (let i = 0; i < noisySubs; i++) await createSubscription(db, noisy.accountId, { url: `${receiverUrl}/hang?sub=${i}`, events: ['ai_check.completed'] });

  await receiver.rpc('reset');
  const alone = await quietLatency({ db, receiver, siteId: quiet.siteId, rate, durationS, drainMs, queues });

  const noisyEventIds = [];
  for (let i = 0; i < noisyEvents; i++) noisyEventIds.push((await completeAiMonitorRun({ db, queues }, { siteId: noisy.siteId, compositeScore: i })).eventId);
  // B starts once A holds every slot it may: its attempts end only at WEBHOOK_TIMEOUT_MS.
  const held = await until(async () => {
    const answer = await receiver.rpc('hanging');
    return answer.hanging >= 50 ? answer : false;
  }, 30_000);
  const beside = await quietLatency({ db, receiver, siteId: quiet.siteId, rate, durationS, drainMs, queues });
  const { hanging } = await receiver.rpc('hanging');

  // A's backlog is dropped (so later cases do not meet it) and its held requests answered.
  await db('deliveries').whereIn('event_id', noisyEventIds).where({ status: 'pending' }).update({ status: 'failed', next_attempt_at: null, failure_reason: 'bench: neighbour dropped' });
  await receiver.rpc('release');
  await until(async () => {
    const counts = await queues.deliveries[0].getJobCounts('active', 'waiting', 'delayed');
    return counts.active + counts.waiting + counts.delayed === 0;
  }, 30_000, 200);
  return { alone, beside, noisyOnTheWire: { atStart: held ? held.hanging : 0, atEnd: hanging }, valid: alone.missing === 0 && beside.missing === 0 };
}

/** B's part of case 9: events at `rate` for `durationS`, each timed from its publish to its first receipt. */
async function quietLatency({ db, receiver, queues, siteId, rate, durationS, drainMs }) {
  const n = Math.max(2, Math.round(rate * durationS));
  const startedAt = new Float64Array(n);
  const pending = [];
  const interval = 1000 / rate;
  const t0 = nowMs() + 20;
  for (let i = 0; i < n; i++) {
    await sleep(Math.max(0, t0 + i * interval - nowMs()));
    startedAt[i] = nowMs();
    pending.push(completeAiMonitorRun({ db, queues }, { siteId, compositeScore: i % 100 }).then((p) => p.eventId));
  }
  const eventIds = await Promise.all(pending);
  const { rows } = await db.raw('SELECT id, event_id FROM deliveries WHERE event_id = ANY(?)', [eventIds]);
  const deliveryOf = new Map(rows.map((row) => [row.event_id, row.id]));
  const wanted = new Set(deliveryOf.values());
  const firstReceipt = new Map();
  const deadline = nowMs() + drainMs;
  while (firstReceipt.size < wanted.size && nowMs() < deadline) {
    const { records } = await receiver.rpc('dump');
    for (const [id, at, nth] of records) if (nth === 1 && wanted.has(id) && !firstReceipt.has(id)) firstReceipt.set(id, at);
    if (firstReceipt.size < wanted.size) await sleep(100);
  }
  const waitedUntil = nowMs();
  let missing = 0;
  const latencies = eventIds.map((eventId, k) => {
    const at = firstReceipt.get(deliveryOf.get(eventId));
    if (at === undefined) missing++;
    return (at ?? waitedUntil) - startedAt[k];
  });
  return { ...describe(latencies), missing };
}
