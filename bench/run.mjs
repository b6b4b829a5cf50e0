// `npm run bench` — measures the real service (the API and the dispatcher started as an operator
// starts them: `node apps/api/dist/src/main.js`, `node apps/dispatcher/dist/src/main.js`, env
// config) against plain baselines measured in the same run on the same machine, and prints the
// ratios. See docs/benchmarks.md.
//
//   node bench/run.mjs [--quick] [--only=api,throughput,…,cli,cluster] [--api-targets=history,…] [--runs=N] [--cpu-prof]
//
// Everything stays on loopback, in the database svc_bench and under a Redis prefix unique to the
// run (deleted at the end). Every wait is bounded; a watchdog ends the run if it overstays. The
// cluster case (2c) starts its own redis-server processes (one Redis and a 3-master cluster) on
// free ports and stops them by pid when it ends.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createDb, createQueues, createRedis } from '@svc/core';
import { createAccount, createSite, createSubscription } from '@svc/core/operator';
import { apiTargets, floodRun, responseSize, runApiCases } from './cases/api.mjs';
import { fanoutRun, latencyRun, neighbourRun, Publisher, retryRun, throughputRun } from './cases/dispatcher.mjs';
import { cliRun, waitForQuietMachine } from './cases/cli.mjs';
import { clusterReport, clusterRun, seedClusterAccounts, startClusterTargets } from './cases/cluster.mjs';
import { measuredCpuMs, scaleoutRun } from './cases/scaleout.mjs';
import { memoryRun } from './cases/memory.mjs';
import { resetDatabase, seed, vacuumAsAutovacuumWould } from './lib/fixtures.mjs';
import { forkHelper, killAllChildren, readMemory, spawnNode, stopChild, tail, waitHttpOk } from './lib/procs.mjs';
import { formatCpu, setOwnDatabase } from './lib/cpu.mjs';
import { buildTable, machineInfo, toMarkdown } from './lib/report.mjs';
import { sleep } from './lib/stats.mjs';
import { summarizeProfile } from './profile-summary.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
// BENCH_API_NODE_ARGS / BENCH_BASE_NODE_ARGS add Node flags to the API / the baseline API for an
// experiment (e.g. "--trace-gc", "--max-semi-space-size=64": docs/adr/0022); a run with them is
// not a measurement of the service as an operator starts it, and is reported as partial.
const API_FLAGS = process.env.BENCH_API_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
const BASE_FLAGS = process.env.BENCH_BASE_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
// BENCH_CLUSTER_SHARDS_ON_ONE=K adds to each run of case 2c a third measurement, one Redis with
// DISPATCHER_QUEUE_SHARDS=K: what sharding costs without a cluster (an experiment: partial).
const CLUSTER_SHARDS_ON_ONE = Number(process.env.BENCH_CLUSTER_SHARDS_ON_ONE ?? 0) || 0;
const BENCH = fileURLToPath(new URL('.', import.meta.url));
const ALL_CASES = ['api', 'throughput', 'scaleout', 'cluster', 'latency', 'retry', 'fanout', 'neighbour', 'memory', 'cli'];

// ---------------------------------------------------------------------------------------------
// Parameters

const args = process.argv.slice(2);
const USAGE = `node bench/run.mjs [--quick] [--only=${ALL_CASES.join(',')}] [--api-targets=history,detail-10k,…] [--runs=N] [--cpu-prof]`;
const flag = (name) => args.includes(`--${name}`);
const option = (name) => args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
for (const a of args) {
  if (!/^--(quick|cpu-prof|only=[a-z,]+|api-targets=[a-z0-9,-]+|runs=\d+|help)$/.test(a)) {
    console.error(`unknown argument ${a}; usage: ${USAGE}`);
    process.exit(2);
  }
}
if (flag('help')) {
  console.log(`usage: ${USAGE}`);
  process.exit(0);
}
const quick = flag('quick');
const only = option('only')?.split(',') ?? ALL_CASES;
for (const c of only) if (!ALL_CASES.includes(c)) throw new Error(`unknown case ${c}`);
const cpuProf = flag('cpu-prof');
// Case 1 measures only these targets (ids as the log prints them, e.g. history or history-100k),
// both sides of each: a quicker loop while profiling one endpoint. Omitted: every target.
const apiTargetIds = option('api-targets')?.split(',');

const FULL = {
  runs: 3,
  apiDurationS: 10,
  // Case 1: each measurement is this many slices of apiDurationS / apiSlices s, round-robin with
  // the other targets of its group (runApiCases).
  apiSlices: 5,
  apiWarmupS: 2,
  connections: 50,
  // Case 1b: the normal load beside an invalid-key flood (the flood uses `connections`).
  floodNormalConnections: 5,
  keysSmall: 6_000,
  keysHundred: 2_000,
  keysLarge: 4_000,
  keysHistory: 4_000,
  largeSites: 10_000,
  tpAccounts: 50,
  throughputN: 5_000,
  throughputWarmupN: 300,
  publishConcurrency: 10,
  // Case 2b: backlogs of this many events drained by 1..scaleoutMaxDispatchers dispatcher processes,
  // the receiver answering after scaleoutDelayMs (dispatcher-bound), and by 1 and 2 with the
  // receiver answering at once (machine-bound, information).
  // 600 = 6 rounds of DISPATCHER_CONCURRENCY attempts with one dispatcher, 3 with 2, 2 with 3.
  scaleoutN: 2_000,
  scaleoutSlowN: 600,
  scaleoutDelayMs: 1_000,
  scaleoutMaxDispatchers: 3,
  // Case 2c: a backlog of clusterEvents events to clusterAccounts accounts with
  // clusterSubsPerAccount subscriptions each (clusterEvents × clusterSubsPerAccount deliveries),
  // drained by one dispatcher on one Redis and on a 3-master Redis Cluster; one pair of
  // measurements per run, the order swapped from run to run. 2,000 subscriptions, so their
  // split over the 3 shards (fixed by each subscription's id) is even within a few per cent.
  clusterAccounts: 200,
  clusterSubsPerAccount: 10,
  clusterEvents: 1_000,
  clusterWarmupEvents: 20,
  clusterIdleMs: 2_000,
  latencyRate: 200,
  latencyDurationS: 30,
  latencyDrainMs: 30_000,
  // Also measured: the same latency at a rate the dispatcher sustains (information, no target).
  latencyLowRate: 50,
  latencyLowDurationS: 10,
  retryCount: 1_000,
  retryLeadMs: 3_000,
  fanoutSubs: 1_000,
  // Reported (no target): one run of the same case at this width.
  fanoutWideSubs: 10_000,
  // Case 9: a noisy account's subscriptions × events attempts to a receiver that never answers,
  // beside a quiet account publishing at neighbourRate for neighbourDurationS.
  neighbourNoisySubs: 30,
  neighbourNoisyEvents: 10,
  neighbourRate: 20,
  neighbourDurationS: 5,
  memoryPending: 100_000,
  // Case 8: `svc` commands (and a bare node) run one after the other, this many times each.
  cliSamples: 15,
  // New runs start only while they fit before budgetMs (each case keeps at least one run);
  // the watchdog is the hard stop. (14 and 15 min before case 2c, which takes about 3 min.)
  budgetMs: 17 * 60_000,
  watchdogMs: 18 * 60_000,
  // One run of each later case, reserved when deciding whether another run fits.
  reserveMs: { throughput: 90_000, scaleout: 50_000, cluster: 90_000, latency: 80_000, retry: 25_000, fanout: 45_000, neighbour: 40_000, memory: 30_000, cli: 30_000 },
};
const QUICK = {
  ...FULL,
  runs: 1,
  apiDurationS: 3,
  apiSlices: 1,
  apiWarmupS: 1,
  keysSmall: 2_000,
  keysHundred: 500,
  keysLarge: 1_000,
  keysHistory: 1_000,
  throughputN: 500,
  throughputWarmupN: 100,
  scaleoutN: 500,
  scaleoutSlowN: 300,
  clusterEvents: 300,
  clusterIdleMs: 1_000,
  latencyDurationS: 5,
  latencyDrainMs: 20_000,
  latencyLowDurationS: 3,
  retryCount: 100,
  retryLeadMs: 2_000,
  fanoutSubs: 100,
  fanoutWideSubs: 1_000,
  neighbourDurationS: 3,
  memoryPending: 5_000,
  cliSamples: 3,
  budgetMs: 3 * 60_000,
  watchdogMs: 4 * 60_000,
  reserveMs: { throughput: 15_000, scaleout: 30_000, cluster: 45_000, latency: 15_000, retry: 5_000, fanout: 3_000, neighbour: 20_000, memory: 3_000, cli: 5_000 },
};
const P = { ...(quick ? QUICK : FULL) };
if (option('runs')) P.runs = Math.max(1, Number(option('runs')));

const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/svc_bench';
setOwnDatabase(new URL(DATABASE_URL).pathname.slice(1));
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const DISPATCHER_CONCURRENCY = 100; // the service's default, also the got loop's concurrency
const runId = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
const PREFIX = `bench-${runId}`;

const started = Date.now();
const log = (message) => console.log(`[${((Date.now() - started) / 1000).toFixed(0).padStart(4)}s] ${message}`);

// ---------------------------------------------------------------------------------------------
// Helpers

async function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function makeCertificate(dir) {
  const certPath = join(dir, 'cert.pem');
  const keyPath = join(dir, 'key.pem');
  execFileSync(
    'openssl',
    [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', keyPath, '-out', certPath, '-days', '2', '-subj', '/CN=localhost',
      '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  return { certPath, keyPath };
}

async function deleteKeys(redis, pattern) {
  let cursor = '0';
  let deleted = 0;
  let rounds = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length) deleted += await redis.unlink(...keys);
  } while (cursor !== '0' && ++rounds < 1_000_000);
  return deleted;
}

// ---------------------------------------------------------------------------------------------
// The run

const tmp = mkdtempSync(join(tmpdir(), 'svc-bench-'));
const logDir = join(tmp, 'logs');
mkdirSync(logDir);
const profDir = cpuProf ? join(BENCH, 'results', 'profiles', runId) : undefined;
if (profDir) mkdirSync(profDir, { recursive: true });

let cleanedUp = false;
let redisAdmin;
async function cleanup() {
  if (cleanedUp) return;
  cleanedUp = true;
  killAllChildren('SIGTERM');
  if (redisAdmin) {
    await sleep(500);
    const deleted = await deleteKeys(redisAdmin, `${PREFIX}:*`).catch(() => 0);
    log(`removed ${deleted} Redis keys of prefix ${PREFIX}`);
    redisAdmin.disconnect();
  }
}

const watchdog = setTimeout(() => {
  console.error(`bench: watchdog: still running after ${P.watchdogMs / 60_000} min; stopping (logs in ${logDir})`);
  killAllChildren('SIGKILL');
  cleanup().finally(() => process.exit(3));
}, P.watchdogMs);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    console.error(`bench: ${signal}; stopping children`);
    cleanup().finally(() => process.exit(130));
  });
}
process.on('exit', () => killAllChildren('SIGKILL'));

async function main() {
  const experiment = API_FLAGS.length > 0 || BASE_FLAGS.length > 0 || (CLUSTER_SHARDS_ON_ONE > 0 && only.includes('cluster'));
  const mode = quick ? 'quick' : only.length === ALL_CASES.length && !apiTargetIds && !experiment ? 'full' : `partial: ${only.join(',')}${apiTargetIds ? ` (case 1: ${apiTargetIds.join(',')})` : ''}`;
  log(`bench ${mode}: prefix ${PREFIX}, database ${DATABASE_URL}, logs ${logDir}`);
  if (experiment) log(`experiment: node flags of the api ${API_FLAGS.join(' ') || '(none)'}, of the baseline api ${BASE_FLAGS.join(' ') || '(none)'}${CLUSTER_SHARDS_ON_ONE ? `; case 2c also on one Redis with ${CLUSTER_SHARDS_ON_ONE} shards` : ''}`);
  const cert = makeCertificate(tmp);

  log('resetting the bench database and migrating');
  await resetDatabase(DATABASE_URL);
  const db = createDb(DATABASE_URL, { poolMax: 10 });
  redisAdmin = createRedis(REDIS_URL);
  const queues = createQueues(createRedis(REDIS_URL, 'bullmq'), PREFIX, 1);
  const machine = await machineInfo({ db, redis: redisAdmin, root: ROOT });

  const receiverHelper = await forkHelper('receiver', join(BENCH, 'receiver.mjs'), {
    cwd: ROOT,
    logDir,
    env: { ...process.env, BENCH_CERT: cert.certPath, BENCH_KEY: cert.keyPath },
  });
  const receiver = receiverHelper.child;
  const receiverUrl = `https://127.0.0.1:${receiverHelper.info.port}`;

  log('seeding');
  const fx = await seed(db, receiverUrl, P);

  // The service, configured through its environment only: the settings below, everything else
  // at its default (a value inherited from the shell for another setting is dropped).
  const apiPort = await freePort();
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) => !/^(DATABASE_URL|REDIS_.*|PORT|LOG_LEVEL|RATE_LIMIT_PER_MINUTE|WEBHOOK_.*|QUEUE_PREFIX|DISPATCHER_.*|DB_POOL_MAX|NODE_OPTIONS)$/.test(name),
    ),
  );
  const serviceEnv = (extra = {}) => ({
    ...inherited,
    DATABASE_URL,
    REDIS_URL,
    QUEUE_PREFIX: PREFIX,
    LOG_LEVEL: 'warn',
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    NODE_EXTRA_CA_CERTS: cert.certPath,
    ...extra,
  });
  const api = spawnNode('api', 'apps/api/dist/src/main.js', { cwd: ROOT, logDir, cpuProfDir: profDir, nodeArgs: API_FLAGS, env: serviceEnv({ PORT: String(apiPort) }) });
  const apiBase = `http://127.0.0.1:${apiPort}`;

  let dispatcher;
  const startDispatcher = async () => {
    dispatcher = spawnNode('dispatcher', 'apps/dispatcher/dist/src/main.js', { cwd: ROOT, logDir, cpuProfDir: profDir, env: serviceEnv() });
    const deadline = Date.now() + 30_000;
    while ((await queues.deliveries[0].getWorkersCount()) === 0 || (await queues.fanout.getWorkersCount()) === 0) {
      if (dispatcher.exitCode !== null) throw new Error(`dispatcher exited (${dispatcher.exitCode}):\n${tail(dispatcher.logPath)}`);
      if (Date.now() > deadline) throw new Error('dispatcher workers did not register within 30 s');
      await sleep(100);
    }
    // One event end to end, so the first measurement does not pay for connections.
    await receiver.rpc('reset');
    const warm = new Publisher({ db, queues, accounts: fx.tp });
    await warm.prepare(3);
    for (let i = 0; i < 3; i++) await warm.publish(i);
    const got = await receiver.rpc('wait', { count: 3, unique: true, timeoutMs: 30_000 });
    if (!got.reached) throw new Error(`dispatcher warm-up: ${got.count} of 3 deliveries received`);
  };
  await waitHttpOk(`${apiBase}/readyz`, { child: api });
  await startDispatcher();
  log(`api (pid ${api.pid}, port ${apiPort}) ready; dispatcher (pid ${dispatcher.pid}) ready`);

  // Postgres here may run without autovacuum (a shared machine's setting); a customer's does
  // not. Between runs the bench then does what autovacuum would have done by then.
  const autovacuumOff = (await db.raw('SHOW autovacuum')).rows[0].autovacuum === 'off';
  const results = { vacuums: [], api: null, retry: [], throughput: [], scaleout: [], cluster: [], latency: [], latencyLow: [], fanout: [], neighbour: [], memory: [], cli: null, rss: {}, budget: [] };

  // Runs of a case: P.runs of them, or fewer when the next would not fit in the time budget
  // together with one run of every case still to come.
  const budgetEnd = started + P.budgetMs;
  const reserveAfter = (name) =>
    ALL_CASES.slice(ALL_CASES.indexOf(name) + 1)
      .filter((c) => only.includes(c))
      .reduce((sum, c) => sum + (P.reserveMs[c] ?? 0), 0);
  const fits = (name, lastRunMs) => Date.now() + lastRunMs * 1.1 + reserveAfter(name) < budgetEnd;
  // `label` names the measurement in the notes when one case makes two (the latency at two rates).
  const repeat = async (name, fn, label = name) => {
    const out = [];
    let lastRunMs = 0;
    for (let r = 0; r < P.runs; r++) {
      if (r > 0 && !fits(name, lastRunMs)) {
        results.budget.push(`${label}: ${r} of ${P.runs} runs fitted in the ${P.budgetMs / 60_000} min budget`);
        log(`  ${label}: stopping after ${r} runs to stay within the time budget`);
        break;
      }
      if (autovacuumOff) {
        const s = Date.now();
        await vacuumAsAutovacuumWould(db);
        results.vacuums.push(Date.now() - s);
      }
      const t = Date.now();
      out.push(await fn(r));
      lastRunMs = Date.now() - t;
    }
    return out;
  };

  // Cases 1 and 7.
  if (only.includes('api')) {
    const key = fx.small.keys[0];
    const sizes = {
      detail: await responseSize(apiBase, `/api/v1/sites/${fx.small.sites[0]}`, key),
      list: await responseSize(apiBase, '/api/v1/sites', key),
      webhooks: await responseSize(apiBase, '/api/v1/webhooks', key),
      history: await responseSize(apiBase, `/api/v1/sites/${fx.history.sites.s10k}/scans`, fx.history.keys[0]),
    };
    const basePort = await freePort();
    const baselineApi = spawnNode('baseline-api', join(BENCH, 'baseline-api.mjs'), {
      nodeArgs: BASE_FLAGS,
      cwd: ROOT,
      logDir,
      cpuProfDir: profDir,
      env: {
        ...process.env,
        PORT: String(basePort),
        DATABASE_URL,
        REDIS_URL,
        BASE_KEY_PREFIX: `${PREFIX}:base`,
        BASE_SITE_ID: fx.small.sites[0],
        BASE_SIZES: JSON.stringify(sizes),
        DB_POOL_MAX: '20',
      },
    });
    const baseBase = `http://127.0.0.1:${basePort}`;
    await waitHttpOk(`${baseBase}/readyz`, { child: baselineApi });
    const baseSizes = {
      detail: await responseSize(baseBase, `/api/v1/sites/${fx.small.sites[0]}`, 'tok'),
      list: await responseSize(baseBase, '/api/v1/sites', 'tok'),
      webhooks: await responseSize(baseBase, '/api/v1/webhooks', 'tok'),
      history: await responseSize(baseBase, `/api/v1/sites/${fx.history.sites.s10k}/scans`, 'tok'),
    };
    log(`api: response bytes service ${JSON.stringify(sizes)}, baseline ${JSON.stringify(baseSizes)}`);
    const { targets: allTargets, pools } = apiTargets(fx, apiBase, baseBase, { api: api.pid, baseline: baselineApi.pid });
    const targets = apiTargetIds ? allTargets.filter((t) => apiTargetIds.includes(t.id)) : allTargets;
    if (targets.length === 0) throw new Error(`--api-targets=${apiTargetIds} names no target of case 1 (${[...new Set(allTargets.map((t) => t.id))]})`);
    results.api = await runApiCases({ targets, runs: P.runs, durationS: P.apiDurationS, slices: P.apiSlices, warmupS: P.apiWarmupS, connections: P.connections, log, fits: (lastRunMs) => fits('api', lastRunMs), budget: results.budget });
    results.apiFlood = [];
    for (let r = 0; r < P.runs; r++) {
      const m = await floodRun({
        base: apiBase,
        nextPath: () => `/api/v1/sites/${fx.small.sites[0]}`,
        pool: pools.small,
        durationS: P.apiDurationS,
        normalConnections: P.floodNormalConnections,
        floodConnections: P.connections,
        pids: { server: api.pid, loadgen: process.pid },
      });
      results.apiFlood.push(m);
      log(
        `  api flood run ${r + 1}/${P.runs}: normal p99 ${m.alone.p99.toFixed(2)} ms alone, ${m.during.p99.toFixed(2)} ms during ${m.flood.reqPerSec.toFixed(0)} invalid req/s (${JSON.stringify(m.flood.statusCodes)}); normal ${JSON.stringify(m.during.statusCodes)}`,
      );
      if (!fits('api', 2 * P.apiDurationS * 1000)) break;
    }
    results.apiSizes = { service: sizes, baseline: baseSizes };
    results.apiHotKeys = Object.fromEntries(Object.entries(pools).map(([k, pool]) => [k, pool.hot]));
    results.rss.baselineApi = readMemory(baselineApi.pid);
    await stopChild(baselineApi);
  }

  const publisher = new Publisher({ db, queues, accounts: fx.tp });

  // Case 2.
  if (only.includes('throughput')) {
    const gotHelper = await forkHelper('baseline-got', join(BENCH, 'baseline-got.mjs'), {
      cwd: ROOT,
      logDir,
      env: { ...process.env, NODE_EXTRA_CA_CERTS: cert.certPath },
    });
    const pids = { dispatcher: dispatcher.pid, api: api.pid, receiver: receiver.pid, publisher: process.pid };
    const common = { pids, db, receiver, publisher, gotChild: gotHelper.child, receiverUrl, publishConcurrency: P.publishConcurrency, sendConcurrency: DISPATCHER_CONCURRENCY, secret: fx.tp[0].secret };
    await throughputRun({ ...common, n: P.throughputWarmupN, run: 'warm' });
    results.throughput = await repeat('throughput', async (r) => {
      const m = await throughputRun({ ...common, n: P.throughputN, run: r });
      log(`    CPU ms per delivery — service: ${formatCpu(m.svc.cpuMs, P.throughputN)}; got loop: ${formatCpu(m.baseline.cpuMs, P.throughputN)}`);
      log(`  throughput run ${r + 1}/${P.runs}: service ${m.svc.perSec.toFixed(0)}/s (publishing took ${m.svc.publishMs.toFixed(0)} ms), got loop ${m.baseline.perSec.toFixed(0)}/s, ratio ${m.ratio.toFixed(2)}; TLS connections opened: service ${m.svc.connections}, got loop ${m.baseline.connections}${m.svc.valid ? '' : ` INVALID ${JSON.stringify(m.svc)}`}`);
      return m;
    });
    await stopChild(gotHelper.child);
  }

  // Case 2b: backlogs published while the queues are paused, then drained by M dispatcher
  // processes (the others started with the same settings): the dispatchers' own rate, publisher
  // aside. Dispatcher-bound (the receiver answers late) with M = 1..3; machine-bound with M = 1, 2.
  if (only.includes('scaleout')) {
    const publishers = { instant: publisher, slow: new Publisher({ db, queues, accounts: fx.tpSlow }) };
    // METRICS_PORT=0: the first dispatcher holds the default metrics port on this host.
    const startDispatcher = async (k) => {
      const child = spawnNode(`dispatcher-${k}`, 'apps/dispatcher/dist/src/main.js', { cwd: ROOT, logDir, cpuProfDir: profDir, env: serviceEnv({ METRICS_PORT: '0' }) });
      const deadline = Date.now() + 30_000;
      while ((await queues.deliveries[0].getWorkersCount()) < k || (await queues.fanout.getWorkersCount()) < k) {
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`dispatcher ${k} did not start:\n${tail(child.logPath)}`);
        await sleep(100);
      }
      return child;
    };
    results.scaleout = await repeat('scaleout', async (r) => {
      const m = await scaleoutRun({
        db,
        receiver,
        queues,
        publishers,
        n: P.scaleoutN,
        slowN: P.scaleoutSlowN,
        publishConcurrency: P.publishConcurrency,
        maxDispatchers: P.scaleoutMaxDispatchers,
        pids: { dispatcher: dispatcher.pid, receiver: receiver.pid, publisher: process.pid },
        startDispatcher,
        stopDispatcher: stopChild,
      });
      const rates = (regime) => Object.entries(regime).map(([k, x]) => `${k}: ${x.perSec.toFixed(0)}/s, ${x.cpuMsPerDelivery.toFixed(2)} ms CPU, ${x.machine.busyCores.toFixed(2)} cores busy, ${x.duplicates} twice${x.valid ? '' : ' INVALID'}`).join('; ');
      log(`  scale-out run ${r + 1}/${P.runs}: receiver at ${P.scaleoutDelayMs} ms — ${rates(m.slow)} (2 ÷ 1 = ${m.ratio.toFixed(2)}); receiver at once — ${rates(m.instant)} (2 ÷ 1 = ${m.instantRatio.toFixed(2)})`);
      return m;
    });
  }

  // Case 2c: the same backlog drained by one dispatcher on one Redis and on a Redis Cluster of 3
  // masters (each private to the case), alternating. The bench's own dispatcher is stopped
  // meanwhile: only one dispatcher may work the database at a time (another's sweep would queue
  // the backlog again on its own Redis).
  if (only.includes('cluster')) {
    log(`cluster: seeding ${P.clusterAccounts} accounts × ${P.clusterSubsPerAccount} subscriptions; starting a private Redis and a Redis Cluster of 3 masters + 3 replicas`);
    const caseStarted = Date.now();
    const accounts = await seedClusterAccounts(db, receiverUrl, P.clusterAccounts, P.clusterSubsPerAccount);
    await stopChild(dispatcher);
    const setup = await startClusterTargets({ logDir, serviceEnv, prefix: PREFIX, shardedOnOne: CLUSTER_SHARDS_ON_ONE });
    results.clusterLayout = setup.layout;
    log(`  one Redis on :${setup.layout.singlePort}; cluster masters ${setup.layout.masters.map((m) => `:${m.port} (pid ${m.pid}, slots ${m.slots}, shard ${m.shards.join(',')}${m.holds.length ? `, ${m.holds.join(', ')}` : ''})`).join('; ')}; replicas ${setup.layout.replicas.map((m) => `:${m.port} (pid ${m.pid})`).join(', ')}`);
    const vacuum = async () => {
      const s = Date.now();
      await vacuumAsAutovacuumWould(db);
      results.vacuums.push(Date.now() - s);
    };
    try {
      results.cluster = await repeat('cluster', async (r) => {
        const m = await clusterRun({
          targets: setup.targets,
          order: [...(r % 2 === 0 ? ['single', 'cluster'] : ['cluster', 'single']), ...(setup.targets.sharded ? ['sharded'] : [])],
          tag: r + 1,
          // repeat() vacuums before the run; the second measurement of the pair gets the same.
          beforeEach: (i) => (i > 0 && autovacuumOff ? vacuum() : undefined),
          db,
          receiver,
          accounts,
          perEvent: P.clusterSubsPerAccount,
          n: P.clusterEvents,
          warmupEvents: P.clusterWarmupEvents,
          idleMs: P.clusterIdleMs,
          publishConcurrency: P.publishConcurrency,
          pids: { receiver: receiver.pid, publisher: process.pid },
          spawn: { root: ROOT, logDir, cpuProfDir: profDir },
        });
        const shares = (x) => x.nodes.filter((y) => y.role === 'master').map((y) => `${((y.total.cpuMs / x.nodes.filter((z) => z.role === 'master').reduce((s, z) => s + z.total.cpuMs, 0)) * 100).toFixed(1)} %`).join(' / ');
        const cmdShares = (x) => x.nodes.filter((y) => y.role === 'master').map((y) => `${((y.total.commands / x.nodes.filter((z) => z.role === 'master').reduce((s, z) => s + z.total.commands, 0)) * 100).toFixed(1)} %`).join(' / ');
        const redisMs = (x) => (x.nodes.filter((y) => y.role !== 'replica').reduce((s, y) => s + y.total.cpuMs, 0) / x.deliveries).toFixed(3);
        log(
          `  cluster run ${r + 1}/${P.runs} (${m.order.join(' → ')}): one Redis ${m.single.perSec.toFixed(0)}/s, cluster ${m.cluster.perSec.toFixed(0)}/s (${m.ratio.toFixed(2)}×); Redis CPU ms per delivery ${redisMs(m.single)} vs masters ${redisMs(m.cluster)}; masters' CPU shares ${shares(m.cluster)}, command shares ${cmdShares(m.cluster)}; dispatcher CPU ms per delivery ${(m.single.dispatcherCpuMs / m.single.deliveries).toFixed(2)} vs ${(m.cluster.dispatcherCpuMs / m.cluster.deliveries).toFixed(2)}; ${m.single.machine.busyCores.toFixed(2)} vs ${m.cluster.machine.busyCores.toFixed(2)} cores busy${m.single.valid && m.cluster.valid ? '' : ` INVALID ${JSON.stringify({ single: m.single.recorded, cluster: m.cluster.recorded })}`}`,
        );
        if (m.sharded) log(`    experiment: one Redis with ${CLUSTER_SHARDS_ON_ONE} shards ${m.sharded.perSec.toFixed(0)}/s, Redis CPU ms per delivery ${redisMs(m.sharded)}, dispatcher CPU ms per delivery ${(m.sharded.dispatcherCpuMs / m.sharded.deliveries).toFixed(2)}${m.sharded.valid ? '' : ' INVALID'}`);
        return m;
      });
    } finally {
      const deleted = await setup.stop();
      log(`  cluster: the private Redis and the cluster stopped (by pid); keys of ${PREFIX} removed first: ${JSON.stringify(deleted)}`);
    }
    await startDispatcher();
    results.clusterCaseMs = Date.now() - caseStarted;
    log(`  cluster: case took ${(results.clusterCaseMs / 1000).toFixed(0)} s; the bench's dispatcher (pid ${dispatcher.pid}) running again`);
  }

  // Case 3.
  if (only.includes('latency')) {
    results.latency = await repeat('latency', async (r) => {
      const m = await latencyRun({ db, receiver, publisher, queues, rate: P.latencyRate, durationS: P.latencyDurationS, drainMs: P.latencyDrainMs });
      log(`  latency run ${r + 1}/${P.runs}: p50 ${m.p50.toFixed(1)} p99 ${m.p99.toFixed(1)} max ${m.max.toFixed(1)} ms over ${m.count} events at ${m.achievedRate.toFixed(0)}/s${m.missing ? `; ${m.missing} not received ${P.latencyDrainMs / 1000} s after the last publish (counted as that wait, a lower bound; ${m.purged} purged)` : ''}${m.valid ? '' : ` INVALID errors ${m.errors}`}`);
      return m;
    });
    // The same measurement below the dispatcher's capacity: the pipeline's own latency.
    results.latencyLow = await repeat('latency', async (r) => {
      const m = await latencyRun({ db, receiver, publisher, queues, rate: P.latencyLowRate, durationS: P.latencyLowDurationS, drainMs: P.latencyDrainMs });
      log(`  latency at ${P.latencyLowRate}/s run ${r + 1}/${P.runs}: p50 ${m.p50.toFixed(1)} p99 ${m.p99.toFixed(1)} max ${m.max.toFixed(1)} ms over ${m.count} events${m.missing ? `; ${m.missing} not received in time` : ''}`);
      return m;
    }, `latency at ${P.latencyLowRate}/s`);
  }

  // Case 4.
  if (only.includes('retry')) {
    if (P.retryCount > fx.fan.subscriptions.length) throw new Error('retryCount exceeds the fan-out subscriptions');
    results.retry = await repeat('retry', async (r) => {
      const m = await retryRun({ db, receiver, queues, fan: fx.fan, m: P.retryCount, leadMs: P.retryLeadMs });
      log(`  retry run ${r + 1}/${P.runs}: lateness min ${m.min.toFixed(1)} p50 ${m.p50.toFixed(1)} p99 ${m.p99.toFixed(1)} max ${m.max.toFixed(1)} ms, early ${m.early} (jobs queued ${m.queuedBeforeDueMs.toFixed(0)} ms before the first due time)${m.valid ? '' : ` INVALID ${JSON.stringify(m)}`}`);
      return m;
    });
  }

  // Case 5.
  if (only.includes('fanout')) {
    results.fanout = await repeat('fanout', async (r) => {
      const m = await fanoutRun({ db, receiver, queues, siteId: fx.fan.siteId, m: P.fanoutSubs });
      log(`  fan-out run ${r + 1}/${P.runs}: ${P.fanoutSubs} received after ${m.ms.toFixed(0)} ms${m.valid ? '' : ` INVALID ${JSON.stringify(m.recorded)}`}`);
      return m;
    });
    const wide = await fanoutRun({ db, receiver, queues, siteId: fx.wide.siteId, m: P.fanoutWideSubs });
    log(`  fan-out to ${P.fanoutWideSubs}: received after ${wide.ms.toFixed(0)} ms${wide.valid ? '' : ` INVALID ${JSON.stringify(wide.recorded)}`}`);
    results.fanoutWide = [wide];
  }

  // Case 9.
  if (only.includes('neighbour')) {
    results.neighbour = await repeat('neighbour', async (r) => {
      const m = await neighbourRun({ db, receiver, queues, receiverUrl, noisySubs: P.neighbourNoisySubs, noisyEvents: P.neighbourNoisyEvents, rate: P.neighbourRate, durationS: P.neighbourDurationS, drainMs: P.latencyDrainMs });
      log(`  neighbour run ${r + 1}/${P.runs}: quiet account p50/p99 ${m.alone.p50.toFixed(1)}/${m.alone.p99.toFixed(1)} ms alone, ${m.beside.p50.toFixed(1)}/${m.beside.p99.toFixed(1)} ms beside ${m.noisyOnTheWire.atStart}..${m.noisyOnTheWire.atEnd} hanging attempts of the noisy one${m.valid ? '' : ` INVALID (missing ${m.alone.missing} alone, ${m.beside.missing} beside)`}`);
      return m;
    });
  }

  // Case 6.
  if (only.includes('memory')) {
    results.memory = await repeat('memory', async (r) => {
      const m = await memoryRun({ db, redis: redisAdmin, queues, prefix: PREFIX, fan: fx.fan, pending: P.memoryPending });
      log(`  memory run ${r + 1}/${P.runs}: ${m.bytesPerPending.toFixed(0)} B per pending delayed delivery (INFO), ${m.keyBytesPerPending.toFixed(0)} B (MEMORY USAGE of the keys)${m.valid ? '' : ` INVALID ${JSON.stringify(m)}`}`);
      return m;
    });
  }

  // Case 8.
  if (only.includes('cli')) {
    const cliAccount = await createAccount(db, { name: 'bench cli' });
    const cliSite = await createSite(db, cliAccount.id, { domain: 'cli.example.com' });
    // One subscription, so each deploy queues a first attempt in Redis (an event no subscription
    // wants needs no Redis at all, which would leave BullMQ out of the measure).
    await createSubscription(db, cliAccount.id, { url: `${receiverUrl}/ok?sub=cli`, events: ['power_up.deployed'] });
    const quiet = await waitForQuietMachine();
    log(`  cli: ${quiet.quiet ? 'the machine was quiet' : 'the machine was still busy'} after ${(quiet.waitedMs / 1000).toFixed(1)} s (${quiet.busyCores.toFixed(2)} cores busy in the last second)`);
    results.cli = { ...cliRun({ root: ROOT, env: serviceEnv(), siteId: cliSite.id, samples: P.cliSamples }), quiet };
    const med = (v) => [...v].sort((x, y) => x - y)[Math.floor(v.length / 2)].toFixed(3);
    log(`  cli: CPU s per process (median of ${P.cliSamples}): node -e 0 ${med(results.cli.node)}, svc accounts create ${med(results.cli.dbCommand)}, svc power-ups deploy ${med(results.cli.redisCommand)}, accounts create through the unbundled entry ${med(results.cli.unbundled)}`);
  }

  results.rss.api = readMemory(api.pid);
  results.rss.dispatcher = readMemory(dispatcher.pid);
  log(`rss: api ${(results.rss.api.rss / 2 ** 20).toFixed(1)} MiB, dispatcher ${(results.rss.dispatcher.rss / 2 ** 20).toFixed(1)} MiB`);

  // Stop the service gracefully (CPU profiles are written on exit).
  const codes = { api: await stopChild(api), dispatcher: await stopChild(dispatcher) };
  await receiver.rpc('close').catch(() => undefined);
  await stopChild(receiver);
  await queues.close();
  await db.destroy();

  results.logs = scanLogs(logDir);
  const report = buildReport(results, machine, mode);
  const base = quick ? 'latest-quick' : mode === 'full' ? 'latest' : 'latest-partial';
  mkdirSync(join(BENCH, 'results'), { recursive: true });
  writeFileSync(join(BENCH, 'results', `${base}.md`), report.markdown);
  writeFileSync(join(BENCH, 'results', `${base}.json`), `${JSON.stringify({ machine, mode, params: P, prefix: PREFIX, table: report.table, raw: results, exitCodes: codes }, null, 2)}\n`);
  console.log(`\n${report.markdown}`);
  log(`written to bench/results/${base}.md and bench/results/${base}.json`);

  if (profDir) {
    for (const file of readdirSync(profDir).filter((f) => f.endsWith('.cpuprofile'))) {
      console.log(`\n${summarizeProfile(join(profDir, file), 20)}`);
    }
    log(`CPU profiles in ${profDir}`);
  }
  return report.invalid ? 1 : 0;
}

/** Warnings and errors the service logged during the run (LOG_LEVEL=warn), counted by message. */
function scanLogs(dir) {
  const out = {};
  for (const file of readdirSync(dir).filter((f) => /^(api|dispatcher)/.test(f))) {
    const counts = {};
    for (const line of readFileSync(join(dir, file), 'utf8').split('\n')) {
      if (!line.trim()) continue;
      let key;
      try {
        const entry = JSON.parse(line);
        key = `${entry.level}: ${entry.message}${entry.error ? ` (${String(entry.error).slice(0, 120)})` : ''}`;
      } catch {
        key = `(not JSON) ${line.slice(0, 160)}`;
      }
      counts[key] = (counts[key] ?? 0) + 1;
    }
    if (Object.keys(counts).length) out[file.replace(/\.log$/, '')] = counts;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The table

function buildReport(results, machine, mode) {
  const rows = [];
  const notes = [];
  let invalid = false;
  const per = (arr, fn) => arr.map(fn);
  const atLeast = (x) => ({ ratio }) => ratio.median >= x;
  if (API_FLAGS.length || BASE_FLAGS.length) {
    notes.push(`Experiment: the API ran with the extra Node flags ${API_FLAGS.join(' ') || '(none)'}, the baseline API with ${BASE_FLAGS.join(' ') || '(none)'} (BENCH_API_NODE_ARGS, BENCH_BASE_NODE_ARGS).`);
  }

  if (results.api) {
    const a = results.api;
    const runsOf = (key) => a[key] ?? [];
    const pair = (id, label, extra = {}) => {
      const svc = runsOf(`${id}:svc`);
      const base = runsOf(`${id}:base`);
      if (!svc.length || !base.length) return; // not measured (--api-targets)
      const ratio = (f) => svc.map((m, i) => m[f] / base[i][f]);
      rows.push({ case: '1', figure: `${label} req/s`, format: 'rps', svc: per(svc, (m) => m.reqPerSec), baseline: per(base, (m) => m.reqPerSec), ratio: ratio('reqPerSec'), ...(extra.rps ?? {}) });
      rows.push({ case: '1', figure: `${label} p50`, unit: 'ms', format: 'ms', svc: per(svc, (m) => m.p50), baseline: per(base, (m) => m.p50), ratio: ratio('p50') });
      rows.push({ case: '1', figure: `${label} p99`, unit: 'ms', format: 'ms', svc: per(svc, (m) => m.p99), baseline: per(base, (m) => m.p99), ratio: ratio('p99'), ...(extra.p99 ?? {}) });
    };
    pair('detail', 'GET /api/v1/sites/{id}', {
      rps: { target: '≥ 0.80× baseline', met: atLeast(0.8) },
      p99: { target: '≤ 1.25× baseline', met: ({ ratio }) => ratio.median <= 1.25 },
    });
    // Issue 13's table asks ≥ 0.8× of the baseline for the detail, the list and the webhooks list each.
    pair('list', 'GET /api/v1/sites', { rps: { target: '≥ 0.80× baseline', met: atLeast(0.8) } });
    pair('webhooks', 'GET /api/v1/webhooks', { rps: { target: '≥ 0.80× baseline', met: atLeast(0.8) } });
    pair('history', 'GET /api/v1/sites/{id}/scans, pages of 100 of 10,000 scans', { rps: { target: '≥ 0.80× baseline', met: atLeast(0.8) } });
    for (const [key, list] of Object.entries(a)) {
      for (const m of list) {
        if (m.non2xx || m.errors) {
          invalid = true;
          notes.push(`INVALID: ${key} had ${m.non2xx} non-2xx answers and ${m.errors} errors (${JSON.stringify(m.statusCodes)}).`);
        }
      }
    }
    const cpuLine = (list) => {
      const sum = {};
      for (const m of list) for (const [k, v] of Object.entries(m.cpuMsPerRequest ?? {})) sum[k] = (sum[k] ?? 0) + v / list.length;
      return Object.entries(sum).sort((x, y) => y[1] - x[1]).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ');
    };
    // On a shared VM the hypervisor's steal moves from one 10 s measurement to the next; a ratio
    // whose two sides saw different steal measured the neighbours as much as the service.
    const stealOf = (list) => list.map((m) => (m.steal === undefined ? '?' : `${Math.round(m.steal * 100)} %`)).join(' / ');
    const stealLine = ['detail', 'list', 'webhooks', 'history']
      .filter((id) => runsOf(`${id}:svc`).length)
      .map((id) => `${id} ${stealOf(runsOf(`${id}:svc`))} (service) against ${stealOf(runsOf(`${id}:base`))} (baseline)`)
      .join('; ');
    if (stealLine) notes.push(`Case 1: CPU stolen by the hypervisor during each measurement (share of the machine's cores, runs in order): ${stealLine}.`);
    for (const id of ['detail', 'list', 'webhooks', 'history']) {
      if (runsOf(`${id}:svc`).length && runsOf(`${id}:svc`)[0].cpuMsPerRequest) {
        notes.push(`Case 1, ${id}: CPU ms per request (mean over runs; "server" is the API or the baseline process, "loadgen" is autocannon; postgres and redis count every backend on the machine) — service: ${cpuLine(runsOf(`${id}:svc`))}; baseline: ${cpuLine(runsOf(`${id}:base`))}.`);
      }
    }
    const hot = Object.entries(results.apiHotKeys).filter(([, n]) => n > 0);
    if (hot.length) notes.push(`Warning: keys were reused within 61 s (${JSON.stringify(Object.fromEntries(hot))}); a 429 would show as non-2xx above.`);
    notes.push(
      `Case 1: autocannon, ${P.connections} connections, ${P.apiDurationS} s per measurement (${P.apiSlices} slices of ${P.apiDurationS / P.apiSlices} s, round-robin with the other targets of the endpoint: baseline, service, growth cases; ${P.apiSlices > 1 ? "p50/p99 leave out each slice's first 300 ms, while its connections open, on both sides alike, and the log gives those apart" : 'one block'}) after a ${P.apiWarmupS} s warm-up; every key serves at most 55 requests per minute (keys: ${P.keysSmall} + ${P.keysHundred} + ${P.keysLarge} + ${P.keysHistory}), so the 60/min limit (default RATE_LIMIT_PER_MINUTE) never triggers. Response bytes, service vs baseline: ${JSON.stringify(results.apiSizes.service)} vs ${JSON.stringify(results.apiSizes.baseline)}.`,
    );
    // Case 1b (issue 8).
    if (results.apiFlood?.length) {
      const f = results.apiFlood;
      rows.push({ case: '1b', figure: `normal GET /api/v1/sites/{id} p99 during an invalid-key flood (${P.connections} connections) vs without`, unit: 'ms', format: 'ms', svc: per(f, (m) => m.during.p99), baseline: per(f, (m) => m.alone.p99), ratio: per(f, (m) => m.p99Ratio), target: 'info' });
      rows.push({ case: '1b', figure: 'invalid keys refused per second during the flood', format: 'rps', unit: 'req/s', svc: per(f, (m) => m.flood.reqPerSec), target: 'info' });
      for (const m of f) {
        const bad = Object.keys(m.during.statusCodes).filter((code) => !code.startsWith('2'));
        const floodBad = Object.keys(m.flood.statusCodes).filter((code) => code !== '401');
        if (bad.length || m.during.errors || floodBad.length) {
          invalid = true;
          notes.push(`INVALID: during the flood, normal requests answered ${JSON.stringify(m.during.statusCodes)} (${m.during.errors} errors); flood answered ${JSON.stringify(m.flood.statusCodes)}.`);
        }
      }
      notes.push(`Case 1b: ${P.floodNormalConnections} connections of normal requests (real keys), measured alone and then beside a flood of invalid keys (half random well-formed, half malformed) on ${P.connections} connections, ${P.apiDurationS} s each; the load generator shares the machine, so the ratio includes CPU contention.`);
    }
    // Case 7.
    const growth = (figure, small, large, note) => {
      const s = runsOf(`${small}:svc`);
      const l = runsOf(`${large}:svc`);
      if (!s.length || !l.length) return; // not measured (--api-targets)
      rows.push({ case: '7', figure, format: 'rps', unit: 'req/s', svc: per(l, (m) => m.reqPerSec), baseline: per(s, (m) => m.reqPerSec), ratio: l.map((m, i) => m.reqPerSec / s[i].reqPerSec), target: note ?? '≈ 1 (≥ 0.90×)', met: note ? null : atLeast(0.9) });
    };
    growth('GET /api/v1/sites/{id}, 10,000 sites (baseline: 10 sites)', 'detail', 'detail-10k');
    growth('GET /api/v1/sites, 10,000 sites (baseline: 10 sites)', 'list', 'list-10k');
    growth('GET /api/v1/sites, 10,000 sites (baseline: 100 sites, same payload)', 'list-100', 'list-10k', 'info');
    growth('GET /api/v1/sites/{id}/scans, pages of 100 of 100,000 scans (baseline: 100 scans)', 'history-100', 'history-100k');
  }

  if (results.throughput.length) {
    const t = results.throughput;
    rows.push({ case: '2', figure: `dispatcher deliveries/s, N=${P.throughputN}`, format: 'rps', unit: '/s', svc: per(t, (m) => m.svc.perSec), baseline: per(t, (m) => m.baseline.perSec), ratio: per(t, (m) => m.ratio), target: '≥ 0.50× got loop', met: atLeast(0.5) });
    for (const m of t) if (!m.svc.valid) {
      invalid = true;
      notes.push(`INVALID throughput run: ${JSON.stringify(m.svc)}`);
    }
    notes.push(
      `Case 2: ${P.throughputN} events through deployPowerUp / completeAiMonitorRun / completeScan (${P.publishConcurrency} at a time) spread over ${P.tpAccounts} accounts with one subscription each (so the per-subscription cap of 10 never binds); DISPATCHER_CONCURRENCY=${DISPATCHER_CONCURRENCY} (default); the got loop posts the same bodies, signed, ${DISPATCHER_CONCURRENCY} at a time over a keep-alive agent. Publishing took ${t.map((m) => (m.svc.publishMs / 1000).toFixed(1)).join(' / ')} s of the service's ${t.map((m) => (m.svc.elapsedMs / 1000).toFixed(1)).join(' / ')} s.`,
      `Case 2, CPU ms per delivery (run 1, from /proc; postgres = the bench database's backends and Postgres's background processes, other databases apart as postgres-other; redis is one process shared with the machine) — service: ${formatCpu(t[0].svc.cpuMs, P.throughputN)}; got loop: ${formatCpu(t[0].baseline.cpuMs, P.throughputN)}. Postgres transactions committed per delivery (publisher + dispatcher): ${t.map((m) => m.svc.pgCommitsPerDelivery.toFixed(2)).join(' / ')}. Cores stolen by the hypervisor meanwhile (of ${machine.nproc}): ${t.map((m) => m.svc.machine.stealCores.toFixed(2)).join(' / ')}.`,
    );
  }

  if (results.throughput.length) {
    const t = results.throughput;
    rows.push({ case: '2', figure: 'CPU ms per delivery, every process but the receiver (dispatcher + postgres + publisher + redis + api)', unit: 'ms', format: 'ms', svc: per(t, (m) => m.svc.cpuMsPerDelivery), baseline: per(t, (m) => m.baseline.cpuMs.got / P.throughputN), target: '≤ 2.0 ms', met: ({ svc }) => svc.median <= 2.0, note: 'baseline: the got loop\'s own CPU per POST' });
    for (const group of ['dispatcher', 'postgres', 'publisher', 'redis']) {
      rows.push({ case: '2', figure: `  of which ${group}`, unit: 'ms', format: 'ms', svc: per(t, (m) => (m.svc.cpuMs[group] ?? 0) / P.throughputN), target: 'info' });
    }
    rows.push({ case: '2', figure: 'sender CPU per POST: got (baseline: node:https, same process, same run)', unit: 'ms', format: 'ms', svc: per(t, (m) => m.baseline.senderCpuMsPerPost.got), baseline: per(t, (m) => m.baseline.senderCpuMsPerPost.https), ratio: per(t, (m) => m.baseline.senderCpuMsPerPost.got / m.baseline.senderCpuMsPerPost.https), target: 'info' });
    rows.push({ case: '2', figure: 'Postgres commits per delivery (publisher + dispatcher)', unit: '', format: 'number', svc: per(t, (m) => m.svc.pgCommitsPerDelivery), target: '≤ 1.5', met: ({ svc }) => svc.median <= 1.5 });
  }
  if (results.scaleout.length) {
    const so = results.scaleout;
    const ceiling = (DISPATCHER_CONCURRENCY / P.scaleoutDelayMs) * 1000;
    const ms = Object.keys(so[0].slow).map(Number);
    const slowLabel = `dispatcher-bound: receiver answers after ${P.scaleoutDelayMs} ms (1 dispatcher's ceiling ${DISPATCHER_CONCURRENCY} in flight ÷ ${P.scaleoutDelayMs} ms = ${ceiling.toFixed(0)}/s), backlog of ${P.scaleoutSlowN}`;
    rows.push({ case: '2b', figure: `${slowLabel}, deliveries/s with 2 dispatcher processes (baseline: 1, same run)`, format: 'rps', unit: '/s', svc: per(so, (m) => m.slow[2].perSec), baseline: per(so, (m) => m.slow[1].perSec), ratio: per(so, (m) => m.ratio), target: '> 1.00× (grows with M; ≈ 2× expected)', met: ({ ratio }) => ratio.median > 1 });
    for (const m of ms.filter((k) => k > 2)) {
      rows.push({ case: '2b', figure: `same, ${m} dispatcher processes (baseline: 1)`, format: 'rps', unit: '/s', svc: per(so, (x) => x.slow[m].perSec), baseline: per(so, (x) => x.slow[1].perSec), ratio: per(so, (x) => x.slow[m].perSec / x.slow[1].perSec), target: 'info' });
    }
    for (const m of ms) {
      rows.push({ case: '2b', figure: `  CPU ms per delivery, all but the receiver, ${m} dispatcher${m > 1 ? 's' : ''} (dispatcher-bound)`, unit: 'ms', format: 'ms', svc: per(so, (x) => x.slow[m].cpuMsPerDelivery), target: 'info', note: `machine-wide ${so.map((x) => x.slow[m].machine.busyCores.toFixed(2)).join(' / ')} of ${machine.nproc} cores busy` });
    }
    rows.push({ case: '2b', figure: `machine-bound: receiver answers at once, backlog of ${P.scaleoutN}, deliveries/s with 2 dispatcher processes (baseline: 1, same run)`, format: 'rps', unit: '/s', svc: per(so, (m) => m.instant[2].perSec), baseline: per(so, (m) => m.instant[1].perSec), ratio: per(so, (m) => m.instantRatio), target: `info (cannot grow on ${machine.nproc} cores, see note)` });
    for (const m of [1, 2]) {
      rows.push({ case: '2b', figure: `  CPU ms per delivery, all but the receiver, ${m} dispatcher${m > 1 ? 's' : ''} (machine-bound)`, unit: 'ms', format: 'ms', svc: per(so, (x) => x.instant[m].cpuMsPerDelivery), target: 'info', note: `machine-wide ${so.map((x) => x.instant[m].machine.busyCores.toFixed(2)).join(' / ')} of ${machine.nproc} cores busy` });
    }
    const all = so.flatMap((x) => [...Object.values(x.slow), ...Object.values(x.instant)]);
    rows.push({ case: '2b', figure: 'deliveries received twice, every M, both regimes', unit: '', format: 'count', svc: per(so, (x) => [...Object.values(x.slow), ...Object.values(x.instant)].reduce((sum, y) => sum + y.duplicates, 0)), target: '0', met: () => all.every((y) => y.duplicates === 0) });
    for (const x of so) {
      for (const [regime, byM] of Object.entries({ slow: x.slow, instant: x.instant })) {
        for (const [m, y] of Object.entries(byM)) if (!y.valid) {
          invalid = true;
          notes.push(`INVALID scale-out run (${regime}, ${m} dispatchers): ${JSON.stringify(y.recorded)}, received ${y.duplicates + (regime === 'slow' ? P.scaleoutSlowN : P.scaleoutN)}`);
        }
      }
    }
    const one = so[0].instant[1];
    notes.push(
      `Case 2b, dispatcher-bound: ${P.tpAccounts} accounts with one subscription each to /slow/${P.scaleoutDelayMs}, events spread evenly, so each dispatcher holds about ${(DISPATCHER_CONCURRENCY / P.tpAccounts).toFixed(0)} attempts per subscription and the per-subscription cap (10 per dispatcher) never binds; every dispatcher at its defaults (DISPATCHER_CONCURRENCY=${DISPATCHER_CONCURRENCY}), the extra ones with METRICS_PORT=0. Time and CPU run from the resume to the receiver's last answer (the last outcome recorded). CPU ms per delivery by process (run 1): ${ms.map((m) => `${m}: ${formatCpu(so[0].slow[m].cpuMs, P.scaleoutSlowN)}`).join(' — ')}. Postgres commits per delivery (runs) ${ms.map((m) => `with ${m}: ${so.map((x) => x.slow[m].pgCommitsPerDelivery.toFixed(2)).join(' / ')}`).join('; ')}.`,
      `Case 2b, machine-bound (information): one dispatcher drains at ${one.perSec.toFixed(0)}/s while the processes measured (dispatcher, Postgres, Redis, the receiver) spend ${(measuredCpuMs(one) / P.scaleoutN).toFixed(2)} ms of CPU per delivery, × ${one.perSec.toFixed(0)}/s = ${((measuredCpuMs(one) / P.scaleoutN) * one.perSec / 1000).toFixed(2)} cores, and the machine as a whole (other sessions included) had ${one.machine.busyCores.toFixed(2)} of its ${machine.nproc} cores busy (run 1; runs: ${so.map((x) => `${x.instant[1].machine.busyCores.toFixed(2)} → ${x.instant[2].machine.busyCores.toFixed(2)}`).join(', ')} cores busy with 1 → 2 dispatchers): a second dispatcher process adds no core, only its own CPU per delivery, so the rate cannot grow here. CPU ms per delivery by process (run 1): ${[1, 2].map((m) => `${m}: ${formatCpu(so[0].instant[m].cpuMs, P.scaleoutN)}`).join(' — ')}; commits per delivery with 2: ${so.map((x) => x.instant[2].pgCommitsPerDelivery.toFixed(2)).join(' / ')}.`,
    );
  }

  if (results.cluster?.length) {
    const c = clusterReport(results.cluster, { P, layout: results.clusterLayout, nproc: machine.nproc });
    rows.push(...c.rows);
    notes.push(...c.notes, `Case 2c took ${(results.clusterCaseMs / 1000).toFixed(0)} s in all (seed, both Redis setups started and stopped, ${results.cluster.length} run${results.cluster.length > 1 ? 's' : ''} of 2 measurements).`);
    if (c.invalid) invalid = true;
  }

  if (results.latency.length) {
    const l = results.latency;
    const lb = l.some((m) => m.lowerBound) ? 'lower bound: some events not received in time' : undefined;
    rows.push({ case: '3', figure: `publish → first attempt received, p50 (${P.latencyRate}/s for ${P.latencyDurationS} s)`, unit: 'ms', format: 'ms', svc: per(l, (m) => m.p50), note: lb });
    rows.push({ case: '3', figure: 'publish → first attempt received, p99', unit: 'ms', format: 'ms', svc: per(l, (m) => m.p99), target: '≤ 100 ms', met: ({ svc }) => svc.median <= 100 });
    rows.push({ case: '3', figure: 'publish → first attempt received, max', unit: 'ms', format: 'ms', svc: per(l, (m) => m.max) });
    if (results.latencyLow?.length) {
      const low = results.latencyLow;
      rows.push({ case: '3', figure: `same at ${P.latencyLowRate}/s for ${P.latencyLowDurationS} s (below capacity), p50`, unit: 'ms', format: 'ms', svc: per(low, (m) => m.p50), target: 'info' });
      rows.push({ case: '3', figure: `same at ${P.latencyLowRate}/s, p99`, unit: 'ms', format: 'ms', svc: per(low, (m) => m.p99), target: 'info' });
    }
    for (const m of l) if (!m.valid) {
      invalid = true;
      notes.push(`INVALID latency run: ${m.errors} publish errors`);
    }
    notes.push(
      `Case 3: achieved publish rate ${l.map((m) => m.achievedRate.toFixed(0)).join(' / ')} events/s; the publisher's own schedule lag p99 ${l.map((m) => m.scheduleLagP99.toFixed(1)).join(' / ')} ms` +
        (lb ? `; events not received ${P.latencyDrainMs / 1000} s after the last publish: ${l.map((m) => m.missing).join(' / ')} (counted with the time waited, so the figures are lower bounds; the backlog was then purged).` : '.'),
    );
  }

  if (results.retry.length) {
    const r = results.retry;
    rows.push({ case: '4', figure: `retry lateness, earliest (${P.retryCount} retries due within one second)`, unit: 'ms', format: 'ms', svc: per(r, (m) => m.min), target: '≥ 0 (never early)', met: () => r.every((m) => m.early === 0) });
    rows.push({ case: '4', figure: 'retry lateness p50', unit: 'ms', format: 'ms', svc: per(r, (m) => m.p50) });
    rows.push({ case: '4', figure: 'retry lateness p99', unit: 'ms', format: 'ms', svc: per(r, (m) => m.p99), target: '≤ 1000 ms', met: ({ svc }) => svc.median <= 1000 });
    rows.push({ case: '4', figure: 'retry lateness max', unit: 'ms', format: 'ms', svc: per(r, (m) => m.max) });
    for (const m of r) if (!m.valid) {
      invalid = true;
      notes.push(`INVALID retry run: ${JSON.stringify({ ...m, recorded: m.recorded })}`);
    }
    notes.push(`Case 4: ${P.retryCount} deliveries left as after a failed attempt 1 (next_attempt_at spread evenly over one second, ${P.retryLeadMs / 1000} s ahead) with their attempt-2 jobs queued by enqueueDeliveries; lateness = receipt − next_attempt_at; early arrivals: ${r.map((m) => m.early).join(' / ')}.`);
  }

  if (results.fanout.length) {
    const f = results.fanout;
    rows.push({ case: '5', figure: `fan-out: one event to ${P.fanoutSubs} subscriptions, all received`, unit: 'ms', format: 'ms', svc: per(f, (m) => m.ms), target: '≤ 2000 ms', met: ({ svc }) => svc.median <= 2000 });
    if (results.fanoutWide?.length) {
      const w = results.fanoutWide;
      rows.push({ case: '5', figure: `fan-out: one event to ${P.fanoutWideSubs} subscriptions, all received (one run)`, unit: 'ms', format: 'ms', svc: per(w, (m) => m.ms), target: 'info' });
      for (const m of w) if (!m.valid) {
        invalid = true;
        notes.push(`INVALID wide fan-out run: ${JSON.stringify(m.recorded)}`);
      }
    }
    for (const m of f) if (!m.valid) {
      invalid = true;
      notes.push(`INVALID fan-out run: ${JSON.stringify(m.recorded)}`);
    }
  }

  if (results.neighbour.length) {
    const nb = results.neighbour;
    rows.push({ case: '9', figure: `quiet account, publish → receipt p50 beside ${P.neighbourNoisySubs * P.neighbourNoisyEvents} attempts of another account to receivers that never answer (baseline: alone)`, unit: 'ms', format: 'ms', svc: per(nb, (m) => m.beside.p50), baseline: per(nb, (m) => m.alone.p50), target: 'info' });
    rows.push({ case: '9', figure: 'quiet account, publish → receipt p99 beside them (baseline: alone)', unit: 'ms', format: 'ms', svc: per(nb, (m) => m.beside.p99), baseline: per(nb, (m) => m.alone.p99), target: '≤ 2× alone + 50 ms', met: ({ svc, baseline }) => svc.median <= 2 * baseline.median + 50 });
    for (const m of nb) if (!m.valid) {
      invalid = true;
      notes.push(`INVALID neighbour run: ${JSON.stringify({ alone: m.alone, beside: m.beside })}`);
    }
    notes.push(`Case 9: the noisy account has ${P.neighbourNoisySubs} subscriptions to a receiver that never answers (until the case ends) and publishes ${P.neighbourNoisyEvents} events at once; the quiet account (one subscription) publishes ${P.neighbourRate}/s for ${P.neighbourDurationS} s, first alone, then once at least 50 of the noisy attempts are on the wire; noisy attempts on the wire at the start and the end of that measurement: ${nb.map((m) => `${m.noisyOnTheWire.atStart}..${m.noisyOnTheWire.atEnd}`).join(' / ')}. Every dispatcher setting at its default (DISPATCHER_CONCURRENCY=${DISPATCHER_CONCURRENCY}, WEBHOOK_TIMEOUT_MS 10 s).`);
  }

  if (results.cli) {
    const c = results.cli;
    const vs = (list) => list.map((v, i) => v / c.node[i]);
    rows.push({ case: '8', figure: 'one `svc` command, CPU s (accounts create: Postgres only; baseline: node -e 0)', unit: 's', format: 's', svc: c.dbCommand, baseline: c.node, ratio: vs(c.dbCommand), target: '≤ 0.3 s', met: ({ svc }) => svc.median <= 0.3 });
    rows.push({ case: '8', figure: 'one `svc` command, CPU s (power-ups deploy: Postgres, then its first attempt queued in Redis)', unit: 's', format: 's', svc: c.redisCommand, baseline: c.node, ratio: vs(c.redisCommand), target: '≤ 0.3 s', met: ({ svc }) => svc.median <= 0.3 });
    rows.push({ case: '8', figure: 'accounts create through the unbundled entry (dist/src/main.js: what the bundle spares)', unit: 's', format: 's', svc: c.unbundled, baseline: c.node, ratio: vs(c.unbundled), target: 'info' });
    notes.push(`Case 8: each command run ${P.cliSamples} times, interleaved with a bare \`node -e 0\`; CPU = user + system time of the child (its rusage, read through bash's \`times\`, 1 ms steps), start-up included. Figures in seconds; min/max are over the samples. Before the samples, the case waits (up to 30 s) for a second in which the whole machine keeps at most 0.25 of a core busy, since work on the other core makes each command's own CPU time dearer: ${c.quiet ? `${c.quiet.quiet ? 'quiet' : 'still busy'} after ${(c.quiet.waitedMs / 1000).toFixed(1)} s (${c.quiet.busyCores.toFixed(2)} cores busy)` : 'not recorded'}; while the commands ran, the rest of the machine (the dispatcher sending the deploys' first attempts, Postgres, anyone else) kept ${c.othersBusyCores?.toFixed(2) ?? '?'} of a core busy.`);
  }

  if (results.memory.length) {
    const m = results.memory;
    rows.push({ case: '6', figure: `Redis bytes per pending delayed delivery (INFO used_memory, ${P.memoryPending} pending)`, unit: 'B', format: 'bytes', svc: per(m, (x) => x.bytesPerPending), target: '≤ 1024 B', met: ({ svc }) => svc.median <= 1024 });
    rows.push({ case: '6', figure: 'same, from MEMORY USAGE of the queue keys (cross-check)', unit: 'B', format: 'bytes', svc: per(m, (x) => x.keyBytesPerPending) });
    for (const x of m) if (!x.valid) {
      invalid = true;
      notes.push(`INVALID memory run: ${JSON.stringify(x)}`);
    }
  }
  if (results.rss.api) {
    rows.push({ case: '6', figure: 'API RSS at the end of the run', unit: 'MiB', format: 'mib', svc: [results.rss.api.rss], note: `peak ${(results.rss.api.hwm / 2 ** 20).toFixed(1)} MiB` });
    rows.push({ case: '6', figure: 'dispatcher RSS at the end of the run', unit: 'MiB', format: 'mib', svc: [results.rss.dispatcher.rss], note: `peak ${(results.rss.dispatcher.hwm / 2 ** 20).toFixed(1)} MiB` });
  }

  for (const line of results.budget) notes.push(`Time budget: ${line}.`);
  if (results.vacuums.length) {
    notes.push(
      `Postgres runs here with autovacuum = off: before each run of a case the bench ran VACUUM (ANALYZE) on the delivery-path tables, as autovacuum would have by then (${results.vacuums.length} times, median ${results.vacuums.sort((a, b) => a - b)[Math.floor(results.vacuums.length / 2)]} ms, not timed in any case).`,
    );
  }
  for (const [name, counts] of Object.entries(results.logs ?? {})) {
    const top = Object.entries(counts).sort((x, y) => y[1] - x[1]).slice(0, 5);
    notes.push(`The ${name} process logged (LOG_LEVEL=warn): ${top.map(([k, n]) => `${n}× ${k}`).join('; ')}.`);
  }
  const table = buildTable(rows);
  const markdown = toMarkdown(table, { machine, params: P, mode, notes });
  return { table, markdown, invalid };
}

// ---------------------------------------------------------------------------------------------

let exitCode = 1;
try {
  exitCode = await main();
} catch (error) {
  console.error(`bench failed: ${error.stack ?? error}`);
  console.error(`logs kept in ${logDir}`);
} finally {
  await cleanup();
  clearTimeout(watchdog);
  if (exitCode === 0) rmSync(tmp, { recursive: true, force: true });
  log(`done in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}
process.exit(exitCode);
