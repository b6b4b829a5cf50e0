import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { createLogger, startMetricsServer, type MetricsServer } from '@svc/core';
import { freePort, httpGet, scrapeSample, seedAccount, seedSite } from '@svc/core/testing';
import { ApiMetrics } from '../src/app.js';
import { bearer, createTestApi, createUnreachableRedis, waitForIdlePool, whenRedisReady, type TestApi } from './support.js';

const LIMIT = 4;
let api: TestApi;
let metrics: ApiMetrics;
let server: MetricsServer;

beforeAll(async () => {
  metrics = new ApiMetrics();
  api = createTestApi({ RATE_LIMIT_PER_MINUTE: String(LIMIT) }, { metrics });
  await whenRedisReady(api.redis);
  server = await startMetricsServer({ port: await freePort(), host: '127.0.0.1', registry: metrics.registry, logger: createLogger('error', { silent: true }) });
});
afterAll(async () => {
  await server.close();
  await api.close();
});

async function scrape(): Promise<string> {
  const res = await httpGet(`http://127.0.0.1:${server.port}/metrics`);
  expect(res.status).toBe(200);
  return res.text;
}

describe('the API’s /metrics', () => {
  it('counts and times real requests under their route template and status, refusals by code, and names no account, key, id or secret', async () => {
    const reader = await seedAccount(api.db, ['read:sites']);
    const site = await seedSite(api.db, reader.accountId);
    const limited = await seedAccount(api.db, ['read:sites']);
    const missingSite = 'site_0000000000000000000000';

    expect((await request(api.app).get('/api/v1/sites').set(bearer(reader.key))).status).toBe(200);
    expect((await request(api.app).get(`/api/v1/sites/${site.id}`).set(bearer(reader.key))).status).toBe(200);
    expect((await request(api.app).get(`/api/v1/sites/${missingSite}?x=1`).set(bearer(reader.key))).status).toBe(404);
    expect((await request(api.app).get('/api/v1/webhooks').set(bearer(reader.key))).status).toBe(403);
    expect((await request(api.app).get('/api/v1/sites')).status).toBe(401);
    expect((await request(api.app).get(`/api/v1/sites/${site.id}`).set(bearer('sk_live_not_a_real_key'))).status).toBe(401);
    for (let i = 0; i < LIMIT; i++) expect((await request(api.app).get('/api/v1/sites').set(bearer(limited.key))).status).toBe(200);
    expect((await request(api.app).get('/api/v1/sites').set(bearer(limited.key))).status).toBe(429);
    expect((await request(api.app).get('/wp-admin/setup.php')).status).toBe(404);
    expect((await request(api.app).get('/healthz')).status).toBe(200);

    const text = await scrape();
    const requests = (route: string, status: string) => scrapeSample(text, 'svc_api_requests_total', { method: 'GET', route, status });
    expect(requests('/api/v1/sites', '200')).toBe(1 + LIMIT);
    expect(requests('/api/v1/sites/:siteId', '200')).toBe(1);
    expect(requests('/api/v1/sites/:siteId', '404')).toBe(1);
    expect(requests('/api/v1/webhooks', '403')).toBe(1);
    expect(requests('/api/v1/sites', '401')).toBe(1);
    expect(requests('/api/v1/sites/:siteId', '401')).toBe(1);
    expect(requests('/api/v1/sites', '429')).toBe(1);
    expect(requests('unmatched', '404')).toBe(1);
    expect(requests('/healthz', '200')).toBe(1);
    expect(scrapeSample(text, 'svc_api_request_duration_seconds_count', { method: 'GET', route: '/api/v1/sites' })).toBe(1 + LIMIT + 2);
    expect(scrapeSample(text, 'svc_api_request_duration_seconds_bucket', { method: 'GET', route: '/api/v1/sites', le: '+Inf' })).toBe(1 + LIMIT + 2);
    expect(scrapeSample(text, 'svc_api_rate_limited_requests_total')).toBe(1);
    expect(scrapeSample(text, 'svc_api_auth_failures_total', { code: 'unauthorized' })).toBe(1);
    expect(scrapeSample(text, 'svc_api_auth_failures_total', { code: 'invalid_key' })).toBe(1);
    expect(scrapeSample(text, 'svc_api_auth_failures_total', { code: 'insufficient_scope' })).toBe(1);
    expect(scrapeSample(text, 'svc_api_rate_limiter_fallback')).toBe(0);
    expect(text).toContain('process_resident_memory_bytes');
    for (const secret of [reader.accountId, reader.keyId, reader.key, limited.keyId, limited.key, site.id, site.domain, missingSite, 'sk_live_not_a_real_key', 'wp-admin']) {
      expect(text).not.toContain(secret);
    }
  });

  it('is never served on the public API port', async () => {
    const res = await request(api.app).get('/metrics');

    expect(res.status).toBe(404);
    expect(res.text).not.toContain('svc_api_requests_total');
  });

  it('shows the rate limiter’s per-process fallback while Redis does not answer', async () => {
    const fallbackMetrics = new ApiMetrics();
    const unreachable = createUnreachableRedis();
    const degraded = createTestApi({}, { db: api.db, redis: unreachable, metrics: fallbackMetrics });
    try {
      const { key } = await seedAccount(degraded.db, ['read:sites']);
      expect(scrapeSample(await fallbackMetrics.registry.metrics(), 'svc_api_rate_limiter_fallback')).toBe(0);

      expect((await request(degraded.app).get('/api/v1/sites').set(bearer(key))).status).toBe(200);

      expect(scrapeSample(await fallbackMetrics.registry.metrics(), 'svc_api_rate_limiter_fallback')).toBe(1);
      await waitForIdlePool(api.db);
    } finally {
      await degraded.close();
      unreachable.disconnect();
    }
  });
});
