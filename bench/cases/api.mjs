// Cases 1 (API vs a minimal Express baseline) and 7 (growth: 10 vs 10,000 sites; 100 vs 100,000
// scans), measured with autocannon, interleaved run by run so that service and baseline share the
// machine's moods.
import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import autocannon from 'autocannon';
import { encodeHistoryCursor } from '../../apps/api/dist/src/scans/history-cursor.js';
import { cpuDelta, cpuSnapshot, machineSnapshot, stealShare } from '../lib/cpu.mjs';
import { KeyPool } from '../lib/fixtures.mjs';
import { Samples } from '../lib/stats.mjs';

/** Tokens for the baseline: never checked, only keyed in Redis, 55 requests each like the real keys. */
class TokenPool {
  constructor(label, uses = 55) {
    this.label = label;
    this.uses = uses;
    this.n = 0;
    this.used = 0;
    this.hot = 0;
  }
  next() {
    if (++this.used > this.uses) {
      this.used = 1;
      this.n++;
    }
    return `${this.label}_${this.n}`;
  }
}

function cycle(items) {
  let i = 0;
  return () => items[i++ % items.length];
}

/** One autocannon run; latencies are kept as floats (autocannon's own histogram rounds to ms). */
export async function load({ base, connections, durationS, nextPath, pool, pids = {}, samples = new Samples(1 << 16), startSamples = new Samples(1024), settleMs = 0 }) {
  const cpu0 = cpuSnapshot(pids);
  const machine0 = machineSnapshot();
  const statusCodes = {};
  const hotBefore = pool.hot;
  const instance = autocannon({
    url: base,
    connections,
    duration: durationS,
    requests: [
      {
        method: 'GET',
        setupRequest: (req) => {
          req.path = nextPath();
          req.headers = { authorization: `Bearer ${pool.next()}` };
          return req;
        },
      },
    ],
  });
  const started = performance.now();
  instance.on('response', (_client, statusCode, _bytes, responseTime) => {
    statusCodes[statusCode] = (statusCodes[statusCode] ?? 0) + 1;
    if (statusCode >= 200 && statusCode < 300) {
      // The answers to a slice's first settleMs, while its connections open, are counted (req/s)
      // but their latencies are kept apart (startSamples), on both sides alike.
      if (performance.now() - started < settleMs) startSamples.push(responseTime);
      else samples.push(responseTime);
    }
  });
  const result = await instance;
  const cpuMs = cpuDelta(cpu0, cpuSnapshot(pids));
  const steal = stealShare(machine0, machineSnapshot(), availableParallelism());
  const latency = samples.describe();
  return {
    reqPerSec: result['2xx'] / result.duration,
    p50: latency.p50,
    p99: latency.p99,
    max: latency.max,
    requests: result.requests.total,
    ok: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    durationS: result.duration,
    statusCodes,
    hotKeys: pool.hot - hotBefore,
    /** The share of the machine's CPU the hypervisor took for other guests meanwhile (0–1). */
    steal,
    /** CPU ms per answered request, per process group (postgres/redis: every backend on the machine). */
    cpuMsPerRequest: Object.fromEntries(Object.entries(cpuMs).filter(([k]) => k !== 'wallMs').map(([k, v]) => [k, v / Math.max(1, result['2xx'])])),
    /** Raw totals, so that slices of one measurement add up (combineSlices). */
    cpuMs,
    samples,
  };
}

/**
 * One measurement made of several slices of the same target (interleaved with other targets'
 * slices by runApiCases): requests, time, CPU and latencies add up, as if measured at once.
 */
export function combineSlices(slices) {
  const ok = slices.reduce((n, m) => n + m.ok, 0);
  const durationS = slices.reduce((n, m) => n + m.durationS, 0);
  const cpuMs = {};
  for (const m of slices) for (const [k, v] of Object.entries(m.cpuMs)) if (k !== 'wallMs') cpuMs[k] = (cpuMs[k] ?? 0) + v;
  const statusCodes = {};
  for (const m of slices) for (const [code, n] of Object.entries(m.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + n;
  const latency = slices[0].samples.describe(); // every slice pushed into the same Samples
  const sum = (f) => slices.reduce((n, m) => n + m[f], 0);
  return {
    reqPerSec: ok / durationS,
    p50: latency.p50,
    p99: latency.p99,
    max: latency.max,
    requests: sum('requests'),
    ok,
    non2xx: sum('non2xx'),
    errors: sum('errors'),
    timeouts: sum('timeouts'),
    durationS,
    statusCodes,
    hotKeys: sum('hotKeys'),
    steal: slices.reduce((n, m) => n + m.steal * m.durationS, 0) / durationS,
    cpuMsPerRequest: Object.fromEntries(Object.entries(cpuMs).map(([k, v]) => [k, v / Math.max(1, ok)])),
    slices: slices.length,
  };
}

/** GETs a path once with a key and returns the body's byte length (to size the baseline's answers). */
export async function responseSize(base, path, key) {
  const response = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key}` } });
  const body = Buffer.from(await response.arrayBuffer());
  if (response.status !== 200) throw new Error(`GET ${path} answered ${response.status}: ${body.toString('utf8').slice(0, 200)}`);
  return body.length;
}

/**
 * The targets, in the order each run measures them. `svc` targets hit the API with real keys;
 * `base` targets hit the baseline with tokens; both get the same paths.
 */
export function apiTargets(fx, apiBase, baseBase, pids = {}) {
  const pools = {
    small: new KeyPool(fx.small.keys),
    hundred: new KeyPool(fx.hundred.keys),
    large: new KeyPool(fx.large.keys),
    history: new KeyPool(fx.history.keys),
  };
  const basePool = new TokenPool('base');
  const detailSmall = cycle(fx.small.sites.map((id) => `/api/v1/sites/${id}`));
  const detailSmallBase = cycle(fx.small.sites.map((id) => `/api/v1/sites/${id}`));
  const detailLarge = cycle(fx.large.sites.map((id) => `/api/v1/sites/${id}`));
  // History pages of 100 spread over the site's history: its first page and pages after cursors.
  const historyPaths = (siteId, positions) => [
    `/api/v1/sites/${siteId}/scans`,
    ...positions.map((position) => `/api/v1/sites/${siteId}/scans?cursor=${encodeHistoryCursor(position)}`),
  ];
  const history10k = cycle(historyPaths(fx.history.sites.s10k, fx.history.pages.s10k));
  const history10kBase = cycle(historyPaths(fx.history.sites.s10k, fx.history.pages.s10k));
  const history100 = cycle(historyPaths(fx.history.sites.s100, []));
  const history100k = cycle(historyPaths(fx.history.sites.s100k, fx.history.pages.s100k));
  const list = () => '/api/v1/sites';
  const webhooks = () => '/api/v1/webhooks';
  const svcPids = { server: pids.api, loadgen: process.pid };
  const basePids = { server: pids.baseline, loadgen: process.pid };
  return {
    pools,
    basePool,
    // Each group's targets are measured in interleaved slices (runApiCases): every ratio the report
    // prints compares two targets of one group (service and baseline; a growth case and its small
    // account), whose slices alternate a few seconds apart, so that a drift of the VM, which moved
    // req/s by 20-30 % within a run, does not enter it.
    targets: [
      { id: 'detail', group: 'detail', side: 'base', base: baseBase, nextPath: detailSmallBase, pool: basePool, pids: basePids },
      { id: 'detail', group: 'detail', side: 'svc', base: apiBase, nextPath: detailSmall, pool: pools.small, pids: svcPids },
      { id: 'detail-10k', group: 'detail', side: 'svc', base: apiBase, nextPath: detailLarge, pool: pools.large, pids: svcPids },
      { id: 'list', group: 'list', side: 'base', base: baseBase, nextPath: list, pool: basePool, pids: basePids },
      { id: 'list', group: 'list', side: 'svc', base: apiBase, nextPath: list, pool: pools.small, pids: svcPids },
      { id: 'list-10k', group: 'list', side: 'svc', base: apiBase, nextPath: list, pool: pools.large, pids: svcPids },
      { id: 'list-100', group: 'list', side: 'svc', base: apiBase, nextPath: list, pool: pools.hundred, pids: svcPids },
      { id: 'webhooks', group: 'webhooks', side: 'svc', base: apiBase, nextPath: webhooks, pool: pools.small, pids: svcPids },
      { id: 'webhooks', group: 'webhooks', side: 'base', base: baseBase, nextPath: webhooks, pool: basePool, pids: basePids },
      { id: 'history', group: 'history', side: 'base', base: baseBase, nextPath: history10kBase, pool: basePool, pids: basePids },
      { id: 'history', group: 'history', side: 'svc', base: apiBase, nextPath: history10k, pool: pools.history, pids: svcPids },
      { id: 'history-100', group: 'history', side: 'svc', base: apiBase, nextPath: history100, pool: pools.history, pids: svcPids },
      { id: 'history-100k', group: 'history', side: 'svc', base: apiBase, nextPath: history100k, pool: pools.history, pids: svcPids },
    ],
  };
}

/**
 * A slice opens its 50 connections at once: the latencies of its first 300 ms measure that burst
 * (connects, the first requests queued behind them) more than the endpoint, and slices repeat it
 * five times per measurement where one 10 s block had it once. They are kept apart from p50/p99,
 * on both sides alike, and reported on their own; their answers count in req/s.
 */
const SLICE_SETTLE_MS = 300;

/**
 * Warms every target up once, then measures them all `runs` times. Within a run, the targets of
 * one group (an endpoint's baseline, service and growth cases) are measured in `slices` slices of
 * durationS / slices seconds each, round-robin (base, svc, growth, base, svc, growth, …), and each
 * target's slices add up to its measurement: this VM's speed drifts by 20-30 % over tens of
 * seconds, and slices a few seconds apart see the same drift on both sides of every ratio.
 */
export async function runApiCases({ targets, runs, durationS, slices = 1, warmupS, connections, log, fits = () => true, budget = [] }) {
  for (const t of targets) {
    await load({ ...t, connections, durationS: warmupS });
  }
  const groups = [];
  for (const t of targets) {
    const group = groups.find((g) => g.id === t.group);
    if (group) group.targets.push(t);
    else groups.push({ id: t.group, targets: [t] });
  }
  const sliceS = Math.max(1, Math.round(durationS / slices));
  const results = {};
  let lastRunMs = 0;
  for (let r = 0; r < runs; r++) {
    if (r > 0 && !fits(lastRunMs)) {
      budget.push(`api: ${r} of ${runs} runs fitted in the time budget`);
      break;
    }
    const runStarted = Date.now();
    for (const group of groups) {
      const measured = group.targets.map(() => ({ slices: [], samples: new Samples(1 << 16), startSamples: new Samples(1 << 12) }));
      for (let s = 0; s < slices; s++) {
        for (const [i, t] of group.targets.entries()) {
          measured[i].slices.push(await load({ ...t, connections, durationS: sliceS, samples: measured[i].samples, startSamples: measured[i].startSamples, settleMs: slices > 1 ? SLICE_SETTLE_MS : 0 }));
        }
      }
      for (const [i, t] of group.targets.entries()) {
        const m = combineSlices(measured[i].slices);
        const key = `${t.id}:${t.side}`;
        (results[key] ??= []).push(m);
        const start = measured[i].startSamples.describe();
        m.sliceStart = { count: start.count, p99: start.p99 };
        log(
          `  api run ${r + 1}/${runs} ${key.padEnd(14)} ${m.reqPerSec.toFixed(0).padStart(6)} req/s  p50 ${m.p50.toFixed(2)} ms  p99 ${m.p99.toFixed(2)} ms` +
            (start.count ? `  (slice starts: ${start.count} answers, p99 ${start.p99.toFixed(1)} ms)` : '') +
            (m.cpuMsPerRequest?.server === undefined ? '' : `  server ${m.cpuMsPerRequest.server.toFixed(3)} ms CPU/req`) +
            (m.non2xx || m.errors ? `  non2xx ${m.non2xx} errors ${m.errors} ${JSON.stringify(m.statusCodes)}` : ''),
        );
      }
    }
    lastRunMs = Date.now() - runStarted;
  }
  return results;
}

/** Half random well-formed keys (each a Postgres lookup, never repeated), half tokens that cannot be keys. */
function invalidToken(i) {
  if (i % 2 === 0) return `svc_live_${randomBytes(24).toString('base64url')}`;
  return randomBytes(8 + (i % 40)).toString('base64');
}

/**
 * Normal requests during an invalid-key flood (issue 8): the same normal load (real keys, a
 * few connections, not saturating) measured alone and then beside a flood of invalid keys on
 * many connections, interleaved run by run. The figure is the normal requests' p99 with the
 * flood over their p99 without it; every normal request must still get a 2xx.
 */
export async function floodRun({ base, nextPath, pool, durationS, normalConnections, floodConnections, pids = {} }) {
  const alone = await load({ base, connections: normalConnections, durationS, nextPath, pool, pids });
  let i = 0;
  const floodStatus = {};
  const flood = autocannon({
    url: base,
    connections: floodConnections,
    duration: durationS,
    requests: [
      {
        method: 'GET',
        setupRequest: (req) => {
          req.path = '/api/v1/sites';
          req.headers = { authorization: `Bearer ${invalidToken(i++)}` };
          return req;
        },
      },
    ],
  });
  flood.on('response', (_client, statusCode) => {
    floodStatus[statusCode] = (floodStatus[statusCode] ?? 0) + 1;
  });
  const [during, floodResult] = await Promise.all([load({ base, connections: normalConnections, durationS, nextPath, pool, pids }), flood]);
  return {
    alone,
    during,
    flood: { reqPerSec: floodResult.requests.total / floodResult.duration, statusCodes: floodStatus, errors: floodResult.errors },
    p99Ratio: during.p99 / alone.p99,
  };
}
