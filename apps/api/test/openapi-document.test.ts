import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { Validator } from '@seriousme/openapi-schema-validator';
import { seedAccount } from '@svc/core/testing';
import { validatorAt } from '../src/http/openapi-validators.js';
import { openApiDocument } from '../src/openapi/document.js';
import type { OpenApiOperation, OpenApiPathItem } from '../src/openapi/openapi-types.js';
import { contractProblems } from './openapi-contract.js';
import { bearer, createTestApi, type TestApi } from './support.js';

let api: TestApi;

beforeAll(() => {
  api = createTestApi({ RATE_LIMIT_PER_MINUTE: '2' });
});
afterAll(async () => {
  await api.close();
});

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;
const operations = Object.entries(openApiDocument.paths as Record<string, OpenApiPathItem>).flatMap(([path, item]) =>
  METHODS.flatMap((method) => (item[method] ? [{ path, method, operation: item[method] as OpenApiOperation }] : [])),
);

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document whose every $ref resolves, by a maintained validator', async () => {
    const validator = new Validator();

    const result = await validator.validate(JSON.parse(JSON.stringify(openApiDocument)));

    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    expect(() => validator.resolveRefs()).not.toThrow();
  });

  it('describes the endpoints of the spec, of the score history, of the delivery log and of webhook self-service, and the three webhook events', () => {
    const api = operations.filter(({ path }) => path.startsWith('/api/v1/')).map(({ method, path }) => `${method.toUpperCase()} ${path}`);

    expect(api.sort()).toEqual(
      [
        'GET /api/v1/sites',
        'GET /api/v1/sites/{siteId}',
        'POST /api/v1/webhooks',
        'GET /api/v1/webhooks',
        'DELETE /api/v1/webhooks/{subscriptionId}',
        'GET /api/v1/sites/{siteId}/scans',
        'GET /api/v1/scans/{scanId}',
        'GET /api/v1/sites/{siteId}/ai-monitor/latest',
        'GET /api/v1/webhooks/{subscriptionId}/deliveries',
        'GET /api/v1/webhooks/{subscriptionId}/deliveries/{deliveryId}',
        'POST /api/v1/webhooks/{subscriptionId}/deliveries/{deliveryId}/redeliver',
        'PATCH /api/v1/webhooks/{subscriptionId}',
        'POST /api/v1/webhooks/{subscriptionId}/rotate-secret',
        'POST /api/v1/webhooks/{subscriptionId}/recover',
      ].sort(),
    );
    expect(Object.keys(openApiDocument.webhooks).sort()).toEqual(['ai_check.completed', 'power_up.deployed', 'scan.completed']);
  });

  it('gives every /api/v1 operation a unique id, one scope, and its 401, 403, 429 and 5xx answers', () => {
    const ids = operations.map(({ operation }) => operation.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { path, operation } of operations.filter((o) => o.path.startsWith('/api/v1/'))) {
      expect({ path, scopes: Object.values(operation.security?.[0] ?? {})[0]?.length }).toEqual({ path, scopes: 1 });
      expect({ path, statuses: ['401', '403', '429', '500'].filter((s) => !Object.hasOwn(operation.responses, s)) }).toEqual({ path, statuses: [] });
    }
  });

  it('gives every JSON answer it shows an example that its own schema accepts, and every error example a code that answer documents', () => {
    const seg = (s: string) => s.replaceAll('~', '~0').replaceAll('/', '~1');
    const checked: string[] = [];
    const problems: string[] = [];
    const inspect = (response: unknown, pointer: string) => {
      const media = (response as { content?: Record<string, { schema?: unknown; example?: unknown }> }).content?.['application/json'];
      if (!media || media.example === undefined) return;
      checked.push(pointer);
      const validate = validatorAt(`${pointer}/content/application~1json/schema`);
      if (!validate(media.example)) problems.push(`${pointer}: ${JSON.stringify(validate.errors?.slice(0, 2))}`);
      const code = (media.example as { error?: { code?: string } }).error?.code;
      const allowed = JSON.stringify(media.schema).match(/"enum":\[([^\]]*)\]/g)?.pop();
      if (code !== undefined && allowed !== undefined && !allowed.includes(`"${code}"`)) problems.push(`${pointer}: example code ${code} is not among ${allowed}`);
    };
    for (const [name, response] of Object.entries(openApiDocument.components.responses)) inspect(response, `/components/responses/${seg(name)}`);
    for (const { path, method, operation } of operations) {
      for (const [status, response] of Object.entries(operation.responses)) inspect(response, `/paths/${seg(path)}/${method}/responses/${status}`);
    }

    expect(problems).toEqual([]);
    // Every error answer of the API carries one (the 4xx of each operation and the shared ones).
    expect(checked.length).toBeGreaterThan(20);
    expect(operations.filter((o) => o.path.startsWith('/api/v1/')).every(({ operation }) => Object.entries(operation.responses).filter(([status]) => /^4/.test(status)).every(([, response]) => '$ref' in (response as object) || (response as { content?: Record<string, { example?: unknown }> }).content?.['application/json']?.example !== undefined))).toBe(true);
  });

  it('writes every parameter out where it is used, so that the reference can fill path parameters (no $ref, which Swagger UI shows as a nameless row)', () => {
    const refs = Object.entries(openApiDocument.paths as Record<string, Record<string, unknown>>).flatMap(([path, item]) =>
      [item.parameters, ...METHODS.map((method) => (item[method] as { parameters?: unknown } | undefined)?.parameters)]
        .flatMap((list) => (Array.isArray(list) ? list : []))
        .filter((parameter: { $ref?: string; name?: string }) => parameter.$ref !== undefined || typeof parameter.name !== 'string')
        .map(() => path),
    );
    expect(refs).toEqual([]);
    const detail = (openApiDocument.paths as Record<string, { parameters?: Array<{ name: string; in: string }> }>)['/api/v1/sites/{siteId}'];
    expect(detail?.parameters?.map((p) => [p.name, p.in])).toEqual([['siteId', 'path']]);
  });

  it('points a reader at nothing they cannot follow: no spec section numbers, no internal issue numbers', () => {
    const text = JSON.stringify(openApiDocument);

    expect(text.match(/.{0,40}(§|\b[Ii]ssue \d+).{0,20}/g) ?? []).toEqual([]);
  });

  it('describes no endpoint the API does not serve', async () => {
    for (const { path, method } of operations.filter((o) => o.path.startsWith('/api/v1/'))) {
      // A key per request: the limit of 2 must not answer in the route's place.
      const { key } = await seedAccount(api.db);
      const url = path.replace(/\{[^}]+\}/g, 'x_unknown');
      const res = await request(api.app)[method](url).set(bearer(key));
      expect({ url, method, status: res.status }).toEqual({ url, method, status: expect.any(Number) });
      expect([200, 201, 400, 404]).toContain(res.status);
      expect(res.body.error?.message ?? '').not.toMatch(/^No endpoint/);
    }
  });
});

describe('the contract check every test response goes through', () => {
  const ok = {
    method: 'GET',
    path: '/api/v1/sites',
    status: 200,
    headers: {
      'request-id': '7f0c3f9e-0b7c-4c1e-9d35-2f0b1a8e4d11',
      'x-ratelimit-limit': '60',
      'x-ratelimit-remaining': '59',
      'x-ratelimit-reset': '1790000000',
      'content-type': 'application/json; charset=utf-8',
    },
    body: Buffer.from(JSON.stringify({ data: { sites: [] } })),
  };

  it('passes a conforming response', () => {
    expect(contractProblems(ok)).toEqual([]);
  });

  it('catches a body that drifts, a missing header, an undocumented status and an envelope on a 5xx', () => {
    const driftedBody = { ...ok, body: Buffer.from(JSON.stringify({ data: { sites: [{ id: 's', domain: 'a.example' }] } })) };
    const noRateHeaders = { ...ok, headers: { 'request-id': ok.headers['request-id'], 'content-type': 'application/json' } };
    const teapot = { ...ok, status: 418 };
    const envelopedError = { ...ok, status: 500, body: Buffer.from('{"error":{"code":"x","message":"y"}}') };

    expect(contractProblems(driftedBody).join()).toMatch(/body .* does not match/);
    expect(contractProblems(noRateHeaders)).toEqual(expect.arrayContaining(['header X-RateLimit-Limit is missing']));
    expect(contractProblems(teapot)).toEqual(['status 418 is not documented']);
    expect(contractProblems(envelopedError).join()).toMatch(/content type "application\/json" is not one of text\/plain/);
  });
});

describe('GET /openapi.json', () => {
  it('serves the document without a key and without counting against any limit', async () => {
    const { key } = await seedAccount(api.db, ['read:sites']);
    for (let i = 0; i < 4; i += 1) {
      const res = await request(api.app).get('/openapi.json').set(bearer(key));
      expect(res.status).toBe(200);
      expect(res.body).toEqual(JSON.parse(JSON.stringify(openApiDocument)));
      expect(res.headers['x-ratelimit-limit']).toBeUndefined();
    }
    const anonymous = await request(api.app).get('/openapi.json');

    const counted = await request(api.app).get('/api/v1/sites').set(bearer(key));

    expect(anonymous.status).toBe(200);
    expect(anonymous.body.openapi).toBe('3.1.0');
    expect(counted.status).toBe(200);
    expect(counted.headers['x-ratelimit-remaining']).toBe('1');
  });

  it('is not under /api/v1, which always needs a key', async () => {
    const res = await request(api.app).get('/api/v1/openapi.json');

    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('unauthorized');
  });
});
