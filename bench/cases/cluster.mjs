// Case 2c: the same delivery load on one Redis and on a Redis Cluster of 3 masters, in one run.
//
// Both Redis setups are private to the case, started on free loopback ports with the same flags
// (`--save '' --appendonly no`), so each node's CPU is its own and comparable:
// - one Redis: a redis-server the bench starts, the dispatcher on REDIS_URL, DISPATCHER_QUEUE_SHARDS=1;
// - a cluster: TestRedisCluster(3) of @svc/core/testing, 3 masters with one replica each, joined by
//   `redis-cli --cluster create … --cluster-replicas 1`, the dispatcher on REDIS_CLUSTER_NODES,
//   DISPATCHER_QUEUE_SHARDS=3 (one shard per master).
// Each measurement starts one dispatcher (`node apps/dispatcher/dist/src/main.js`, the operator's
// environment for that Redis), warms it up, then publishes a backlog through the producer functions
// while every queue is paused, resumes them and times the drain; then it stops that dispatcher, so
// only one dispatcher ever works the bench database (another's sweep would re-queue the backlog on
// its own Redis). The two setups alternate, the order swapped from one run to the next.
// Redis CPU and commands per node come from INFO (used_cpu_sys + used_cpu_user,
// total_commands_processed, commandstats) before the publish, at the resume and after the drain.
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createQueues, createRedis, deliveryQueueName, FANOUT_QUEUE, hashSlot, loadConfig, Redis, shardOf } from '@svc/core';
import { createAccount, createSite } from '@svc/core/operator';
import { freePort, TestRedisCluster } from '@svc/core/testing';
import { cpuDelta, cpuSnapshot, machineDelta, machineSnapshot } from '../lib/cpu.mjs';
import { bulkSubscriptions } from '../lib/fixtures.mjs';
import { spawnNode, spawnProcess, stopChild, tail } from '../lib/procs.mjs';
import { nowMs, sleep, until } from '../lib/stats.mjs';
import { Publisher, waitRecorded } from './dispatcher.mjs';

const MASTERS = 3;

/** `accounts` accounts, each with one site and `perAccount` subscriptions (to every event type) to the receiver's /ok. */
export async function seedClusterAccounts(db, receiverUrl, accounts, perAccount) {
  const out = [];
  for (let i = 0; i < accounts; i++) {
    const account = await createAccount(db, { name: `bench cluster ${i}` });
    const site = await createSite(db, account.id, { domain: `cl-${i}.example.com` });
    const subscriptionIds = await bulkSubscriptions(db, account.id, `${receiverUrl}/ok?cluster`, perAccount);
    out.push({ accountId: account.id, siteId: site.id, subscriptionIds });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The two Redis setups

function adminConnection(port) {
  const redis = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 2, connectTimeout: 2_000 });
  redis.on('error', () => undefined);
  return redis;
}

/** One redis-server of the bench's own, with the cluster nodes' persistence flags. */
async function startSingleRedis({ dir, logDir }) {
  const port = await freePort();
  const child = spawnProcess('redis-single', 'redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { logDir, cwd: dir });
  const admin = adminConnection(port);
  const pong = await until(async () => (child.exitCode === null ? await admin.ping().catch(() => null) : 'exited'), 15_000);
  if (pong !== 'PONG') throw new Error(`the private redis-server did not answer (${pong}):\n${tail(child.logPath)}`);
  return { port, pid: child.pid, child, admin };
}

/** INFO cpu, stats and commandstats of one node: CPU ms, commands processed, and per command calls and µs. */
async function nodeInfo(admin) {
  const text = await admin.call('INFO', 'cpu', 'stats', 'commandstats');
  const field = (name) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(text)?.[1]);
  const commandstats = {};
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) commandstats[m[1]] = { calls: Number(m[2]), usec: Number(m[3]) };
  return { cpuMs: (field('used_cpu_sys') + field('used_cpu_user')) * 1000, commands: field('total_commands_processed'), commandstats };
}

function infoDelta(a, b) {
  const commandstats = {};
  for (const [name, { calls, usec }] of Object.entries(b.commandstats)) {
    const before = a.commandstats[name] ?? { calls: 0, usec: 0 };
    if (calls - before.calls > 0) commandstats[name] = { calls: calls - before.calls, usec: usec - before.usec };
  }
  return { cpuMs: b.cpuMs - a.cpuMs, commands: b.commands - a.commands, commandstats };
}

/** The `top` commands of a delta by the µs Redis spent in them. */
function topCommands(delta, top = 6) {
  return Object.entries(delta.commandstats)
    .sort((x, y) => y[1].usec - x[1].usec)
    .slice(0, top)
    .map(([name, v]) => ({ name, calls: v.calls, usec: v.usec }));
}

/** Deletes the keys under `prefix` on one node, one UNLINK per key (a cluster node refuses a multi-key UNLINK across slots). */
async function deleteKeysOn(admin, prefix) {
  let cursor = '0';
  let deleted = 0;
  let rounds = 0;
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) {
      const pipeline = admin.pipeline();
      for (const key of keys) pipeline.unlink(key);
      for (const [, n] of await pipeline.exec()) deleted += Number(n ?? 0);
    }
  } while (cursor !== '0' && ++rounds < 100_000);
  return deleted;
}

/**
 * Starts both setups and returns them as targets: for each, the dispatcher's environment, the
 * bench's own queues on that Redis (made from the same environment, as the service makes them) and
 * the nodes whose INFO is read. `serviceEnv(extra)` is the bench's operator environment.
 */
export async function startClusterTargets({ logDir, serviceEnv, prefix, shardedOnOne = 0 }) {
  const dir = mkdtempSync(join(logDir, 'redis-single-'));
  const opened = [];
  let single;
  let cluster;
  const stop = async () => {
    const deleted = {};
    for (const target of opened) {
      await target.queues.close().catch(() => undefined);
      target.connection.disconnect();
      for (const node of target.nodes.filter((x) => x.role !== 'replica')) deleted[`${target.name}:${node.port}`] = await deleteKeysOn(node.admin, target.prefix).catch(() => NaN);
    }
    for (const target of opened) for (const node of target.nodes) node.admin?.disconnect();
    single?.admin.disconnect();
    if (single) await stopChild(single.child, 5_000);
    if (cluster) await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
    return deleted;
  };
  try {
    single = await startSingleRedis({ dir, logDir });
    cluster = new TestRedisCluster(MASTERS); // assigned before start(), so stop() kills whatever it started
    await cluster.start();

    // Which master holds which slots, and so which shard; the replicas of each (from ROLE, once
    // each replica's link to its master is up, so no initial sync falls into a measurement).
    const pidOf = new Map(cluster.nodes.map((node) => [node.port, node.process.pid]));
    const roles = await until(async () => {
      const all = await Promise.all(cluster.nodes.map(async (node) => {
        const admin = adminConnection(node.port);
        try {
          return { port: node.port, role: await admin.role() };
        } finally {
          admin.disconnect();
        }
      }));
      const replicas = all.filter((x) => x.role[0] === 'slave');
      return replicas.length === MASTERS && replicas.every((x) => x.role[3] === 'connected') ? all : false;
    }, 30_000, 200);
    if (!roles) throw new Error(`the cluster's replicas did not all connect to their masters within 30 s`);
    const seed = adminConnection(cluster.nodes[0].port);
    const ranges = await seed.cluster('SLOTS');
    seed.disconnect();
    const masters = new Map();
    for (const [from, to, [, masterPort]] of ranges) {
      const entry = masters.get(masterPort) ?? { port: masterPort, slots: [], replicas: new Set() };
      entry.slots.push([from, to]);
      masters.set(masterPort, entry);
    }
    for (const { port, role } of roles) if (role[0] === 'slave') masters.get(Number(role[2]))?.replicas.add(port);
    const ordered = [...masters.values()].sort((a, b) => a.slots[0][0] - b.slots[0][0]);
    const holder = (key) => ordered.findIndex((m) => m.slots.some(([from, to]) => hashSlot(key) >= from && hashSlot(key) <= to));
    const shardNames = Array.from({ length: MASTERS }, (_, k) => deliveryQueueName(k, MASTERS));
    const registryKey = `${prefix}:queues`;
    const clusterNodes = [
      ...ordered.map((m, i) => ({
        role: 'master',
        label: `master ${i + 1}`,
        port: m.port,
        pid: pidOf.get(m.port),
        slots: m.slots.map(([from, to]) => `${from}–${to}`).join(','),
        shards: shardNames.map((name, k) => (holder(name) === i ? k : -1)).filter((k) => k >= 0),
        holds: [holder(FANOUT_QUEUE) === i ? `the fan-out queue ${FANOUT_QUEUE}` : null, holder(registryKey) === i ? `the queue registry ${registryKey}` : null].filter(Boolean),
      })),
      ...ordered.flatMap((m, i) => [...m.replicas].map((port) => ({ role: 'replica', label: `replica of master ${i + 1}`, port, pid: pidOf.get(port) }))),
    ];
    for (const node of clusterNodes) node.admin = adminConnection(node.port);

    const target = (name, label, env, nodes) => {
      const config = loadConfig(env);
      const connection = createRedis(config, 'bullmq');
      connection.on('error', () => undefined);
      const queues = createQueues(connection, config.queuePrefix, config.queueShards);
      const t = { name, label, env, prefix: config.queuePrefix, shards: config.queueShards, connection, queues, nodes };
      opened.push(t);
      return t;
    };
    const singleEnv = serviceEnv({ REDIS_URL: `redis://127.0.0.1:${single.port}`, DISPATCHER_QUEUE_SHARDS: '1', METRICS_PORT: '0' });
    const clusterEnv = serviceEnv({ REDIS_CLUSTER_NODES: cluster.seeds, DISPATCHER_QUEUE_SHARDS: String(MASTERS), METRICS_PORT: '0' });
    delete clusterEnv.REDIS_URL; // a cluster and REDIS_URL together are refused
    const singleNodes = [{ role: 'single', label: 'one Redis', port: single.port, pid: single.pid, admin: single.admin, shards: [0] }];
    const targets = {
      single: target('single', 'one Redis', singleEnv, singleNodes),
      cluster: target('cluster', `Redis Cluster, ${MASTERS} masters`, clusterEnv, clusterNodes),
    };
    // Experiment (BENCH_CLUSTER_SHARDS_ON_ONE): the same one Redis with the delivery queue in
    // shards, under a prefix of its own: what sharding costs without a cluster.
    if (shardedOnOne > 0) {
      const shardedEnv = serviceEnv({ REDIS_URL: `redis://127.0.0.1:${single.port}`, DISPATCHER_QUEUE_SHARDS: String(shardedOnOne), METRICS_PORT: '0', QUEUE_PREFIX: `${prefix}-sharded` });
      targets.sharded = target('sharded', `one Redis, ${shardedOnOne} shards`, shardedEnv, [{ ...singleNodes[0], shards: Array.from({ length: shardedOnOne }, (_, k) => k) }]);
    }
    const redisVersion = /redis_version:(\S+)/.exec(await single.admin.info('server'))?.[1];
    const layout = {
      redisVersion,
      singlePort: single.port,
      masters: clusterNodes.filter((n) => n.role === 'master').map(({ label, port, pid, slots, shards, holds }) => ({ label, port, pid, slots, shards, holds })),
      replicas: clusterNodes.filter((n) => n.role === 'replica').map(({ label, port, pid }) => ({ label, port, pid })),
      shardQueues: shardNames,
    };
    return { targets, layout, stop };
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------
// One measurement

async function pauseAll(queues) {
  await Promise.all([queues.fanout.pause(), ...queues.deliveries.map((q) => q.pause())]);
}
async function resumeAll(queues) {
  await Promise.all([queues.fanout.resume(), ...queues.deliveries.map((q) => q.resume())]);
}
const snapshotNodes = (nodes) => Promise.all(nodes.map((node) => nodeInfo(node.admin)));

/** Starts a dispatcher on the target's Redis and waits until its workers are registered on every queue. */
async function startDispatcherOn(target, { root, logDir, cpuProfDir, tag }) {
  const child = spawnNode(`dispatcher-${target.name}-${tag}`, 'apps/dispatcher/dist/src/main.js', { cwd: root, logDir, cpuProfDir, env: target.env });
  const registered = await until(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return 'exited';
    const counts = await Promise.all([target.queues.fanout, ...target.queues.deliveries].map((q) => q.getWorkersCount()));
    return counts.every((c) => c >= 1) ? 'ok' : false;
  }, 30_000, 200);
  if (registered !== 'ok') {
    await stopChild(child, 5_000);
    throw new Error(`dispatcher on ${target.label} ${registered === 'exited' ? 'exited' : 'did not register its workers within 30 s'}:\n${tail(child.logPath)}`);
  }
  return child;
}

/**
 * One dispatcher on one target: started, warmed up (a few events end to end), its idle Redis
 * cost measured for `idleMs`, then a backlog of `n` events (× `perEvent` subscriptions each)
 * published while the queues are paused and drained; the dispatcher is stopped afterwards.
 */
async function measureOn(target, { db, receiver, accounts, perEvent, n, warmupEvents, idleMs, publishConcurrency, pids, spawn }) {
  const child = await startDispatcherOn(target, spawn);
  try {
    const publisher = new Publisher({ db, queues: target.queues, accounts });
    // Warm-up: connections to Postgres, Redis and the receiver opened, code paths compiled.
    await publisher.prepare(warmupEvents);
    await receiver.rpc('reset');
    for (let i = 0; i < warmupEvents; i++) await publisher.publish(i);
    const warm = await receiver.rpc('wait', { count: warmupEvents * perEvent, unique: true, timeoutMs: 60_000 });
    if (!warm.reached) throw new Error(`cluster case warm-up on ${target.label}: ${warm.count} of ${warmupEvents * perEvent} received`);
    await until(async () => {
      const counts = await Promise.all(target.queues.deliveries.map((q) => q.getJobCounts('active', 'waiting', 'delayed')));
      return counts.every((c) => c.active + c.waiting + c.delayed === 0);
    }, 30_000, 200);

    // Idle: what each node spends while the dispatcher waits for work (information).
    const idle0 = await snapshotNodes(target.nodes);
    const idleT0 = nowMs();
    await sleep(idleMs);
    const idle1 = await snapshotNodes(target.nodes);
    const idleWallMs = nowMs() - idleT0;

    // The backlog.
    await publisher.prepare(n);
    await receiver.rpc('reset');
    const named = { ...pids, dispatcher: child.pid, ...Object.fromEntries(target.nodes.map((node) => [`redis ${node.label}`, node.pid])) };
    await pauseAll(target.queues);
    const s0 = await snapshotNodes(target.nodes);
    const tPublish = nowMs();
    const eventIds = new Array(n);
    let next = 0;
    await Promise.all(
      Array.from({ length: publishConcurrency }, async () => {
        while (next < n) {
          const i = next++;
          eventIds[i] = await publisher.publish(i);
        }
      }),
    );
    const s1 = await snapshotNodes(target.nodes);
    const cpu1 = cpuSnapshot(named);
    const machine1 = machineSnapshot();
    const t0 = nowMs();
    await resumeAll(target.queues);
    const expected = n * perEvent;
    const got = await receiver.rpc('wait', { count: expected, unique: true, timeoutMs: 180_000 });
    if (!got.reached) throw new Error(`cluster case on ${target.label}: only ${got.count} of ${expected} deliveries received`);
    const recorded = await waitRecorded(db, eventIds, expected);
    // The drain's Redis work ends when its last jobs are completed (and removed) on every shard.
    const emptied = await until(async () => {
      const counts = await Promise.all(target.queues.deliveries.map((q) => q.getJobCounts('active', 'waiting', 'delayed', 'prioritized')));
      return counts.every((c) => c.active + c.waiting + c.delayed + c.prioritized === 0);
    }, 30_000, 100);
    const s2 = await snapshotNodes(target.nodes);
    const cpu = cpuDelta(cpu1, cpuSnapshot(named));
    const machine = machineDelta(machine1, machineSnapshot());
    const { count: received, unique } = await receiver.rpc('count');

    // Deliveries per shard of this target (and, for comparison, per shard of a 3-way split).
    const { rows } = await db.raw('SELECT subscription_id, count(*)::int AS n FROM deliveries WHERE event_id = ANY(?) GROUP BY 1', [eventIds]);
    const perShard = new Array(target.shards).fill(0);
    for (const row of rows) perShard[shardOf(row.subscription_id, target.shards)] += row.n;

    const nodes = target.nodes.map((node, i) => {
      const total = infoDelta(s0[i], s2[i]);
      const drain = infoDelta(s1[i], s2[i]);
      const idle = infoDelta(idle0[i], idle1[i]);
      return {
        role: node.role,
        label: node.label,
        port: node.port,
        shards: node.shards,
        total: { cpuMs: total.cpuMs, commands: total.commands, top: topCommands(total), commandstats: total.commandstats },
        drain: { cpuMs: drain.cpuMs, commands: drain.commands },
        idle: { cpuMsPerS: (idle.cpuMs / idleWallMs) * 1000, commandsPerS: (idle.commands / idleWallMs) * 1000 },
        procCpuMs: cpu[`redis ${node.label}`] ?? NaN,
      };
    });
    return {
      target: target.name,
      deliveries: expected,
      perSec: (expected / (got.lastAt - t0)) * 1000,
      elapsedMs: got.lastAt - t0,
      publishMs: t0 - tPublish,
      received,
      unique,
      duplicates: received - expected,
      recorded,
      emptied: Boolean(emptied),
      perShard,
      nodes,
      dispatcherCpuMs: cpu.dispatcher ?? NaN,
      cpuMs: cpu,
      machine,
      valid: recorded.delivered === expected && recorded.recordedAttempts === expected && received === expected && unique === expected && Boolean(emptied),
    };
  } finally {
    await stopChild(child);
  }
}

/**
 * One run of case 2c: the load on each target, in `order`. `beforeEach(i)` runs before the i-th
 * measurement (the bench's VACUUM when Postgres runs without autovacuum).
 */
export async function clusterRun({ targets, order, beforeEach, tag, ...common }) {
  const out = { order };
  for (const [i, name] of order.entries()) {
    await beforeEach?.(i);
    out[name] = await measureOn(targets[name], { ...common, spawn: { ...common.spawn, tag: `${tag}-${name}` } });
  }
  out.ratio = out.cluster.perSec / out.single.perSec;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Figures

/** Per-run figures of one measurement: Redis CPU and commands of the single Redis or of each master, per delivery and as shares. */
export function clusterFigures(m) {
  const masters = m.nodes.filter((n) => n.role === 'master' || n.role === 'single');
  const replicas = m.nodes.filter((n) => n.role === 'replica');
  const sum = (list, f) => list.reduce((s, n) => s + f(n), 0);
  const cpuTotal = sum(masters, (n) => n.total.cpuMs);
  const cmdTotal = sum(masters, (n) => n.total.commands);
  const drainTotal = sum(masters, (n) => n.drain.cpuMs);
  return {
    mastersCpuMsPerDelivery: cpuTotal / m.deliveries,
    replicasCpuMsPerDelivery: replicas.length ? sum(replicas, (n) => n.total.cpuMs) / m.deliveries : NaN,
    commandsPerDelivery: cmdTotal / m.deliveries,
    masters: masters.map((n) => ({
      label: n.label,
      port: n.port,
      shards: n.shards,
      cpuMsPerDelivery: n.total.cpuMs / m.deliveries,
      cpuShare: n.total.cpuMs / cpuTotal,
      drainCpuShare: n.drain.cpuMs / drainTotal,
      commandShare: n.total.commands / cmdTotal,
    })),
    deliveryShares: m.perShard.map((d) => d / m.deliveries),
    dispatcherCpuMsPerDelivery: m.dispatcherCpuMs / m.deliveries,
    // Every job a worker takes leaves the active list with one LREM, in BullMQ's moveToFinished
    // (done) or moveToDelayed (the dispatcher's slots and waiting room are full: sent back to its
    // queue, to be taken again later). LREM calls − deliveries = the times jobs were sent back.
    sentBackPerDelivery: (sum(masters, (n) => n.total.commandstats.lrem?.calls ?? 0) - m.deliveries) / m.deliveries,
    evalshaPerDelivery: sum(masters, (n) => n.total.commandstats.evalsha?.calls ?? 0) / m.deliveries,
    sentBackPerShardDelivery: masters.map((n) => {
      const deliveries = n.shards.reduce((s, k) => s + (m.perShard[k] ?? 0), 0);
      return ((n.total.commandstats.lrem?.calls ?? 0) - deliveries) / deliveries;
    }),
  };
}

/** The table rows and notes of case 2c. `runs` are clusterRun results; P the parameters. */
export function clusterReport(runs, { P, layout, nproc }) {
  const rows = [];
  const notes = [];
  let invalid = false;
  const per = (fn) => runs.map(fn);
  const f = runs.map((r) => ({ single: clusterFigures(r.single), cluster: clusterFigures(r.cluster) }));
  const n = P.clusterEvents;
  const S = P.clusterSubsPerAccount;
  const lo = (1 / MASTERS) * 0.85;
  const hi = (1 / MASTERS) * 1.15;
  rows.push({
    case: '2c',
    figure: `deliveries/s on a Redis Cluster of ${MASTERS} masters (+ ${MASTERS} replicas), DISPATCHER_QUEUE_SHARDS=${MASTERS} (baseline: one Redis, 1 shard, same run); backlog of ${n} events × ${S} subscriptions, one dispatcher, receiver answering at once`,
    format: 'rps',
    unit: '/s',
    svc: per((r) => r.cluster.perSec),
    baseline: per((r) => r.single.perSec),
    ratio: per((r) => r.ratio),
    target: '≥ 0.75× one Redis',
    met: ({ ratio }) => ratio.median >= 0.75,
  });
  rows.push({ case: '2c', figure: `Redis CPU ms per delivery (publish and drain), the ${MASTERS} masters together (baseline: the one Redis)`, unit: 'ms', format: 'ms3', svc: per((_, i) => f[i].cluster.mastersCpuMsPerDelivery), baseline: per((_, i) => f[i].single.mastersCpuMsPerDelivery), ratio: per((_, i) => f[i].cluster.mastersCpuMsPerDelivery / f[i].single.mastersCpuMsPerDelivery), target: 'info' });
  for (let k = 0; k < MASTERS; k++) {
    const m = layout.masters[k];
    const label = `master ${k + 1} (shard ${m.shards.join(', ') || 'none'})`;
    rows.push({ case: '2c', figure: `  ${label}: Redis CPU ms per delivery`, unit: 'ms', format: 'ms3', svc: per((_, i) => f[i].cluster.masters[k].cpuMsPerDelivery), target: 'info' });
    rows.push({ case: '2c', figure: `  ${label}: share of the masters' Redis CPU`, unit: '', format: 'pct', svc: per((_, i) => f[i].cluster.masters[k].cpuShare), target: `33.3 % ± 15 % (${(lo * 100).toFixed(1)}–${(hi * 100).toFixed(1)} %)`, met: ({ svc }) => svc.median >= lo && svc.median <= hi });
    rows.push({ case: '2c', figure: `  ${label}: share of the masters' commands`, unit: '', format: 'pct', svc: per((_, i) => f[i].cluster.masters[k].commandShare), target: 'info' });
  }
  rows.push({ case: '2c', figure: `Redis CPU ms per delivery, the ${MASTERS} replicas together`, unit: 'ms', format: 'ms3', svc: per((_, i) => f[i].cluster.replicasCpuMsPerDelivery), target: 'info' });
  rows.push({ case: '2c', figure: 'Redis commands per delivery, the masters together (baseline: the one Redis)', unit: '', format: 'number', svc: per((_, i) => f[i].cluster.commandsPerDelivery), baseline: per((_, i) => f[i].single.commandsPerDelivery), ratio: per((_, i) => f[i].cluster.commandsPerDelivery / f[i].single.commandsPerDelivery), target: 'info' });
  rows.push({ case: '2c', figure: "times a delivery's job was sent back to its queue (the dispatcher's slots and waiting room full: BullMQ moveToDelayed, taken again later), per delivery, on the cluster (baseline: on one Redis)", unit: '', format: 'number', svc: per((_, i) => f[i].cluster.sentBackPerDelivery), baseline: per((_, i) => f[i].single.sentBackPerDelivery), ratio: per((_, i) => f[i].cluster.sentBackPerDelivery / f[i].single.sentBackPerDelivery), target: 'info' });
  rows.push({ case: '2c', figure: 'dispatcher CPU ms per delivery during the drain, on the cluster (baseline: on one Redis)', unit: 'ms', format: 'ms', svc: per((_, i) => f[i].cluster.dispatcherCpuMsPerDelivery), baseline: per((_, i) => f[i].single.dispatcherCpuMsPerDelivery), ratio: per((_, i) => f[i].cluster.dispatcherCpuMsPerDelivery / f[i].single.dispatcherCpuMsPerDelivery), target: 'info' });
  const sharded = runs.every((r) => r.sharded);
  if (sharded) {
    const g = runs.map((r) => clusterFigures(r.sharded));
    const k = runs[0].sharded.perShard.length;
    rows.push({ case: '2c', figure: `experiment: deliveries/s on one Redis with DISPATCHER_QUEUE_SHARDS=${k} (baseline: one Redis, 1 shard, same run)`, format: 'rps', unit: '/s', svc: per((r) => r.sharded.perSec), baseline: per((r) => r.single.perSec), ratio: per((r) => r.sharded.perSec / r.single.perSec), target: 'info' });
    rows.push({ case: '2c', figure: `  same, Redis CPU ms per delivery (baseline: 1 shard)`, unit: 'ms', format: 'ms3', svc: per((_, i) => g[i].mastersCpuMsPerDelivery), baseline: per((_, i) => f[i].single.mastersCpuMsPerDelivery), ratio: per((_, i) => g[i].mastersCpuMsPerDelivery / f[i].single.mastersCpuMsPerDelivery), target: 'info' });
    rows.push({ case: '2c', figure: `  same, jobs sent back to their queue per delivery (baseline: 1 shard)`, unit: '', format: 'number', svc: per((_, i) => g[i].sentBackPerDelivery), baseline: per((_, i) => f[i].single.sentBackPerDelivery), ratio: per((_, i) => g[i].sentBackPerDelivery / f[i].single.sentBackPerDelivery), target: 'info' });
    rows.push({ case: '2c', figure: `  same, dispatcher CPU ms per delivery (baseline: 1 shard)`, unit: 'ms', format: 'ms', svc: per((_, i) => g[i].dispatcherCpuMsPerDelivery), baseline: per((_, i) => f[i].single.dispatcherCpuMsPerDelivery), ratio: per((_, i) => g[i].dispatcherCpuMsPerDelivery / f[i].single.dispatcherCpuMsPerDelivery), target: 'info' });
  }
  const all = runs.flatMap((r) => [r.single, r.cluster, ...(r.sharded ? [r.sharded] : [])]);
  rows.push({ case: '2c', figure: `deliveries received twice, ${sharded ? 'every setup' : 'both setups'}`, unit: '', format: 'count', svc: per((r) => r.single.duplicates + r.cluster.duplicates + (r.sharded?.duplicates ?? 0)), target: '0', met: () => all.every((m) => m.duplicates === 0) });
  for (const m of all) if (!m.valid) {
    invalid = true;
    notes.push(`INVALID cluster-case measurement (${m.target}): ${JSON.stringify({ deliveries: m.deliveries, received: m.received, unique: m.unique, recorded: m.recorded, emptied: m.emptied })}`);
  }

  const pct = (v) => `${(v * 100).toFixed(1)} %`;
  const mastersLine = layout.masters
    .map((m) => `${m.label} :${m.port} (slots ${m.slots}; shard ${m.shards.join(', ') || 'none'} = ${m.shards.map((k) => layout.shardQueues[k]).join(', ')}${m.holds.length ? `; also ${m.holds.join(' and ')}` : ''})`)
    .join('; ');
  notes.push(
    `Case 2c: both Redis setups are private to the case, on free loopback ports, redis-server ${layout.redisVersion} with --save '' --appendonly no: one Redis (:${layout.singlePort}, DISPATCHER_QUEUE_SHARDS=1) and a cluster of ${MASTERS} masters with one replica each (TestRedisCluster of @svc/core/testing: --cluster-enabled yes, --cluster-node-timeout 1000, joined by redis-cli --cluster create --cluster-replicas 1; DISPATCHER_QUEUE_SHARDS=${MASTERS}, REDIS_CLUSTER_NODES = all ${2 * MASTERS} nodes). ${mastersLine}. ` +
      `Each measurement starts one dispatcher (apps/dispatcher/dist/src/main.js, the bench's environment with that Redis, METRICS_PORT=0; the bench's own dispatcher is stopped meanwhile, so no other sweep works the database), sends ${P.clusterWarmupEvents} events end to end, measures ${P.clusterIdleMs / 1000} s idle, then publishes ${n} events (deployPowerUp / completeAiMonitorRun / completeScan in turn, ${P.publishConcurrency} at a time, through queues the bench makes from the same environment) to ${P.clusterAccounts} accounts with ${S} subscriptions each (${P.clusterAccounts * S} subscriptions; each producer statement fans its event out and queues the ${S} first attempts itself) while every queue is paused, resumes them, and stops the dispatcher once all ${n * S} are delivered. ` +
      `Deliveries/s = deliveries ÷ (last receipt − resume). Redis CPU = INFO used_cpu_sys + used_cpu_user of each node, from before the publish until every shard is empty after the drain (so it includes the producers' enqueueing, the drain, and whatever each node does meanwhile by itself: cron, the cluster bus, replication to its replica — the one Redis has no replica); commands = INFO total_commands_processed over the same window. Order of the two setups per run: ${runs.map((r) => r.order.join(' → ')).join('; ')}.`,
  );
  notes.push(
    `Case 2c, per run (one Redis vs cluster): deliveries/s ${runs.map((r) => `${r.single.perSec.toFixed(0)} vs ${r.cluster.perSec.toFixed(0)} (${r.ratio.toFixed(2)}×)`).join('; ')}; ` +
      `masters' shares of Redis CPU (publish and drain) ${f.map((x) => x.cluster.masters.map((m) => pct(m.cpuShare)).join(' / ')).join('; ')}; during the drain alone ${f.map((x) => x.cluster.masters.map((m) => pct(m.drainCpuShare)).join(' / ')).join('; ')}; ` +
      `shares of commands ${f.map((x) => x.cluster.masters.map((m) => pct(m.commandShare)).join(' / ')).join('; ')}; ` +
      `deliveries per shard (the subscriptions' split, shard 0 / 1 / 2) ${f.map((x) => x.cluster.deliveryShares.map(pct).join(' / ')).join('; ')}; ` +
      `jobs sent back to their queue per delivery, by master's shard ${f.map((x) => x.cluster.sentBackPerShardDelivery.map((v) => v.toFixed(2)).join(' / ')).join('; ')} (one Redis: ${f.map((x) => x.single.sentBackPerDelivery.toFixed(2)).join('; ')}); ` +
      `EVALSHA per delivery, cluster vs one Redis, ${f.map((x) => `${x.cluster.evalshaPerDelivery.toFixed(1)} vs ${x.single.evalshaPerDelivery.toFixed(1)}`).join('; ')}.`,
  );
  const first = runs[0];
  const idleLine = (m) => m.nodes.map((x) => `${x.label} ${x.idle.cpuMsPerS.toFixed(1)} ms/s, ${x.idle.commandsPerS.toFixed(0)} commands/s`).join('; ');
  const topLine = (m) => m.nodes.filter((x) => x.role !== 'replica').map((x) => `${x.label}: ${x.total.top.map((c) => `${c.name} ${c.calls}× ${(c.usec / 1000).toFixed(0)} ms`).join(', ')}`).join(' — ');
  notes.push(
    `Case 2c, run 1: Redis CPU while the dispatcher waits idle (CPU ms per second, commands per second) — one Redis: ${idleLine(first.single)}; cluster: ${idleLine(first.cluster)}. ` +
      `Where the Redis time went (INFO commandstats over the window, calls and µs spent in the command) — one Redis: ${topLine(first.single)}; cluster: ${topLine(first.cluster)}.`,
  );
  notes.push(
    `Case 2c, the machine (${nproc} cores) during each drain, busy cores (everything on it, other sessions' tests included) one Redis vs cluster: ${runs.map((r) => `${r.single.machine.busyCores.toFixed(2)} vs ${r.cluster.machine.busyCores.toFixed(2)}`).join('; ')}; of which other sessions' Redis and Postgres (CPU ms per delivery, redis-server processes not the case's and Postgres backends of other databases): ${runs.map((r) => `${(((r.single.cpuMs.redis ?? 0) + (r.single.cpuMs['postgres-other'] ?? 0)) / r.single.deliveries).toFixed(2)} vs ${(((r.cluster.cpuMs.redis ?? 0) + (r.cluster.cpuMs['postgres-other'] ?? 0)) / r.cluster.deliveries).toFixed(2)}`).join('; ')}. Publishing took ${runs.map((r) => `${(r.single.publishMs / 1000).toFixed(1)} vs ${(r.cluster.publishMs / 1000).toFixed(1)}`).join('; ')} s.`,
  );
  return { rows, notes, invalid };
}
