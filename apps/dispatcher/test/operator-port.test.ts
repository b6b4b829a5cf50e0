import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createLogger, newId, OPERATOR_POOL_MAX, type Db, type MetricsServer } from '@svc/core';
import { insertEvent } from '@svc/core/dispatcher';
import { freePort, holdConnections, httpGet, nonLoopbackAddress, scrapeSample, testConfig, tryConnect, uniqueTag, waitFor, watchPool } from '@svc/core/testing';
import { createDispatcher, type Dispatcher } from '../src/dispatcher.js';
import { createDispatcherDb } from '../src/dispatcher-db.js';
import { DISPATCHER_OPERATOR_APPLICATION_NAME, createOperatorSide, serveOperatorPort, type OperatorSide } from '../src/operator-port.js';
import { spawnDispatcher } from './support/child-dispatcher.js';
import { createHarness, seedTenant, type Harness } from './support/harness.js';

const PROBES = 200;
const DELIVERY_POOL_MAX = 2;

interface ReadyzBody {
  status: string;
  checks: { postgres: string; redis: string; workers: string };
}

const outside = nonLoopbackAddress();
if (!outside) console.warn('operator-port.test: skipped the interface tests: this machine has no non-loopback IPv4 address');
const withAnInterface = outside ? it : it.skip;

describe('a dispatcher process’s operator port (/metrics, /healthz, /readyz), which has no authentication', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  /** A real dispatcher process on a free METRICS_PORT, ready on loopback; stopped with SIGTERM. */
  async function withDispatcher(env: Record<string, string>, run: (port: number) => Promise<void>): Promise<void> {
    const port = await freePort();
    const child = spawnDispatcher(h, { METRICS_PORT: String(port), ...env });
    try {
      await waitFor(async () => (await httpGet(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, 20_000, 'the child dispatcher to be ready');
      await run(port);
    } finally {
      child.child.kill('SIGTERM');
      await child.exited;
    }
  }

  withAnInterface('listens on loopback only by default: refused on the machine’s other address, ready on 127.0.0.1', async () => {
    await withDispatcher({}, async (port) => {
      const fromOutside = await tryConnect(outside!, port);
      const ready = await httpGet(`http://127.0.0.1:${port}/readyz`);

      expect(fromOutside).toBe('ECONNREFUSED');
      expect(JSON.parse(ready.text)).toMatchObject({ status: 'ready', checks: { postgres: 'ok', redis: 'ok', workers: 'running' } });
    });
  });

  withAnInterface('answers on the machine’s other address once METRICS_HOST=0.0.0.0 opens it', async () => {
    await withDispatcher({ METRICS_HOST: '0.0.0.0' }, async (port) => {
      const ready = await httpGet(`http://${outside!}:${port}/readyz`);
      const metrics = await httpGet(`http://${outside!}:${port}/metrics`);

      expect(ready.status).toBe(200);
      expect(metrics.status).toBe(200);
      expect(metrics.text).toContain('svc_dispatcher_pending_deliveries');
    });
  });
});

describe('probes and scrapes of a dispatcher whose delivery pool is busy to its last connection', () => {
  let h: Harness;
  let deliveryDb: Db;
  let operator: OperatorSide;
  let dispatcher: Dispatcher;
  let server: MetricsServer;
  const pendingSeeded = 3;

  beforeAll(async () => {
    h = await createHarness();
    // Wired as main.ts wires it: a delivery pool, the operator side, the dispatcher, its port.
    deliveryDb = createDispatcherDb(h.config.databaseUrl, DELIVERY_POOL_MAX);
    operator = createOperatorSide(h.config.databaseUrl);
    dispatcher = createDispatcher({
      config: testConfig({ DATABASE_URL: h.config.databaseUrl, QUEUE_PREFIX: h.config.queuePrefix, DISPATCHER_SWEEP_INTERVAL_MS: '3600000' }),
      db: deliveryDb,
      logger: createLogger('error', { silent: true }),
      metrics: operator.metrics,
      operatorDb: operator.operatorDb,
    });
    dispatcher.start();
    server = await serveOperatorPort(dispatcher, { port: await freePort(), host: '127.0.0.1', logger: createLogger('error', { silent: true }) });

    // Deliveries pending an hour from now: no dispatcher touches them during the test.
    const tenant = await seedTenant(h);
    const sub = await tenant.subscribe(`/ok/operator-${uniqueTag()}`, ['scan.completed']);
    const scan = await tenant.newScan();
    await h.db.transaction(async (tx) => {
      // One delivery per event and subscription: an event each.
      for (let i = 0; i < pendingSeeded; i++) {
        const event = await insertEvent(tx, tenant.accountId, 'scan.completed', { scanId: scan.id, siteId: tenant.site.id, domain: tenant.site.domain, score: i });
        await tx('events').where({ id: event.id }).update({ fanned_out_at: tx.fn.now(3) });
        await tx('deliveries').insert({ id: newId('dlv'), event_id: event.id, subscription_id: sub.id, next_attempt_at: tx.raw(`clock_timestamp() + interval '1 hour'`) });
      }
    });
    await waitFor(async () => (await httpGet(`http://127.0.0.1:${server.port}/readyz`)).status === 200, 20_000, 'the dispatcher to be ready');
  });
  afterAll(async () => {
    await server.close();
    await dispatcher.stop();
    await operator.close();
    await deliveryDb.destroy();
    await h.close();
  });

  it(`answers ${PROBES} probes and ${PROBES} scrapes at once, ready and with the pending count, through the operator pool alone`, async () => {
    const held = await holdConnections(deliveryDb, DELIVERY_POOL_MAX);
    const deliveryPool = watchPool(deliveryDb);
    const operatorPool = watchPool(operator.operatorDb);
    try {
      const [probes, scrapes] = await Promise.all([
        Promise.all(
          Array.from({ length: PROBES }, async () => {
            const res = await httpGet(`http://127.0.0.1:${server.port}/readyz`);
            return { status: res.status, body: JSON.parse(res.text) as ReadyzBody };
          }),
        ),
        Promise.all(Array.from({ length: PROBES }, () => httpGet(`http://127.0.0.1:${server.port}/metrics`))),
      ]);
      const backends = await h.db.raw<{ rows: Array<{ n: number }> }>(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = ?',
        [DISPATCHER_OPERATOR_APPLICATION_NAME],
      );

      expect(probes.filter((probe) => probe.status === 200 && probe.body.checks.postgres === 'ok')).toHaveLength(PROBES);
      expect(scrapes.map((scrape) => scrape.status)).toEqual(Array.from({ length: PROBES }, () => 200));
      expect(scrapes.map((scrape) => scrapeSample(scrape.text, 'svc_dispatcher_pending_deliveries'))).toEqual(Array.from({ length: PROBES }, () => pendingSeeded));
      // Every Postgres read went through the operator pool (at most one per request: requests that
      // arrive together share one), whose connections stay within its bound.
      expect(operatorPool.acquiresAsked).toBeGreaterThanOrEqual(1);
      expect(operatorPool.acquiresAsked).toBeLessThanOrEqual(2 * PROBES);
      expect(backends.rows[0]!.n).toBeLessThanOrEqual(OPERATOR_POOL_MAX);
      // The delivery pool is left as the test holds it: every connection in use by the test.
      expect(deliveryPool.used).toBe(DELIVERY_POOL_MAX);
    } finally {
      deliveryPool.stop();
      operatorPool.stop();
      held.release();
    }
  });
});
