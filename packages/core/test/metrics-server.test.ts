import { afterEach, describe, expect, it } from '@jest/globals';
import { Counter } from 'prom-client';
import { createProcessRegistry, startMetricsServer, type MetricsServer } from '../src/index.js';
import { createCapturingLogger, freePort, holdPort, httpGet } from '../src/testing/index.js';

const opened: MetricsServer[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((server) => server.close()));
});

describe('the metrics port', () => {
  it('serves the registry in Prometheus text format, with Node’s process metrics, and the routes it is given', async () => {
    const registry = createProcessRegistry();
    new Counter({ name: 'svc_test_things_total', help: 'things', registers: [registry] }).inc(3);
    const { logger } = createCapturingLogger();
    const server = await startMetricsServer({
      port: await freePort(),
      host: '127.0.0.1',
      registry,
      logger,
      routes: { '/healthz': () => ({ status: 200, body: { status: 'ok' } }) },
    });
    opened.push(server);

    const metrics = await httpGet(`http://127.0.0.1:${server.port}/metrics`);
    const text = metrics.text;
    expect(metrics.status).toBe(200);
    expect(metrics.contentType).toContain('text/plain');
    expect(text).toContain('svc_test_things_total 3');
    expect(text).toContain('process_cpu_user_seconds_total');
    expect(text).toContain('nodejs_eventloop_lag_seconds');
    const health = await httpGet(`http://127.0.0.1:${server.port}/healthz`);
    expect(health.status).toBe(200);
    expect(JSON.parse(health.text)).toEqual({ status: 'ok' });
    expect((await httpGet(`http://127.0.0.1:${server.port}/nothing`)).status).toBe(404);
    expect((await httpGet(`http://127.0.0.1:${server.port}/metrics`, 'POST')).status).toBe(405);
  });

  it('logs one warning naming METRICS_PORT when the port is taken, and leaves the port’s owner alone', async () => {
    const held = await holdPort();
    const { logger, entries } = createCapturingLogger();
    try {
      const server = await startMetricsServer({ port: held.port, registry: createProcessRegistry(), logger });

      expect(server.port).toBeUndefined();
      const warnings = entries.filter((entry) => entry.level === 'warn');
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ variable: 'METRICS_PORT', port: held.port, error: 'EADDRINUSE' });
      expect(warnings[0]!.message).toContain('METRICS_PORT');
      await server.close();
    } finally {
      await held.release();
    }
  });

  it('binds nothing when METRICS_PORT is 0', async () => {
    const { logger, entries } = createCapturingLogger();
    const server = await startMetricsServer({ port: 0, registry: createProcessRegistry(), logger });

    expect(server.port).toBeUndefined();
    expect(entries).toHaveLength(0);
  });
});
