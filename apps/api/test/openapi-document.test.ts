import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { Validator } from '@seriousme/openapi-schema-validator';
import { createApiKey, createSite, createSubscription, startScan } from '@svc/core/operator';
import { ALL_SCOPES, seedAccount, uniqueTag } from '@svc/core/testing';
import { validatorAt } from '../src/http/openapi-validators.js';
import { completeOpenApiDocument, openApiDocument } from '../src/openapi/document.js';
import type { OpenApiOperation, OpenApiParameter, OpenApiPathItem } from '../src/openapi/openapi-types.js';
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
  it('is a valid OpenAPI 3.1 document whose every $ref resolves, by a maintained validator (and so is the complete one, with the operator-only operations)', async () => {
    for (const document of [openApiDocument, completeOpenApiDocument]) {
      const validator = new Validator();

      const result = await validator.validate(JSON.parse(JSON.stringify(document)));

      expect(result.errors).toBeUndefined();
      expect(result.valid).toBe(true);
      expect(validator.version).toBe('3.1');
      expect(() => validator.resolveRefs()).not.toThrow();
    }
  });

  it('names its one server as the origin it is served from, and gives a contact and the terms', () => {
    expect(openApiDocument.servers).toEqual([{ url: '/', description: expect.stringMatching(/^The origin serving this document/) }]);
    expect(openApiDocument.info.license).toEqual({ name: 'Proprietary' });
    expect(openApiDocument.info.contact).toEqual({ name: 'Site Visibility Service support', email: 'support@visibility.example.com' });
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

  it('shows an example on every JSON answer, request body, webhook body and path parameter of the API, each accepted by its own schema, and every error example with a code that answer documents', () => {
    const seg = (s: string) => s.replaceAll('~', '~0').replaceAll('/', '~1');
    const checked: string[] = [];
    const missing: string[] = [];
    const problems: string[] = [];
    const check = (example: unknown, schemaPointer: string, where: string) => {
      checked.push(where);
      const validate = validatorAt(schemaPointer);
      if (!validate(example)) problems.push(`${where}: ${JSON.stringify(validate.errors?.slice(0, 2))}`);
    };
    /** A JSON media type's example; `required`: an example must be there. */
    const inspectMedia = (holder: unknown, pointer: string, required: boolean) => {
      const media = (holder as { content?: Record<string, { schema?: unknown; example?: unknown }> }).content?.['application/json'];
      if (!media) return;
      if (media.example === undefined) {
        if (required) missing.push(pointer);
        return;
      }
      check(media.example, `${pointer}/content/application~1json/schema`, pointer);
      const code = (media.example as { error?: { code?: string } }).error?.code;
      const allowed = JSON.stringify(media.schema).match(/"enum":\[([^\]]*)\]/g)?.pop();
      if (code !== undefined && allowed !== undefined && !allowed.includes(`"${code}"`)) problems.push(`${pointer}: example code ${code} is not among ${allowed}`);
    };
    const inspectOperation = (operation: OpenApiOperation, itemParameters: unknown[] | undefined, pointer: string, api: boolean) => {
      for (const [status, response] of Object.entries(operation.responses)) inspectMedia(response, `${pointer}/responses/${status}`, api);
      if (operation.requestBody) inspectMedia(operation.requestBody, `${pointer}/requestBody`, true);
      const parameters: Array<[OpenApiParameter, string]> = [
        ...(itemParameters ?? []).map((p, i): [OpenApiParameter, string] => [p as OpenApiParameter, `${pointer.slice(0, pointer.lastIndexOf('/'))}/parameters/${i}`]),
        ...(operation.parameters ?? []).map((p, i): [OpenApiParameter, string] => [p as OpenApiParameter, `${pointer}/parameters/${i}`]),
      ];
      for (const [parameter, at] of parameters) {
        if (parameter.example !== undefined) check(parameter.example, `${at}/schema`, at);
        else if (api && parameter.in === 'path') missing.push(at);
      }
    };
    for (const [name, response] of Object.entries(openApiDocument.components.responses)) inspectMedia(response, `/components/responses/${seg(name)}`, false);
    for (const { path, method, operation } of operations) {
      const item = (openApiDocument.paths as Record<string, OpenApiPathItem>)[path]!;
      inspectOperation(operation, item.parameters, `/paths/${seg(path)}/${method}`, path.startsWith('/api/v1/'));
    }
    for (const [name, item] of Object.entries(openApiDocument.webhooks as Record<string, OpenApiPathItem>)) {
      inspectOperation(item.post!, item.parameters, `/webhooks/${seg(name)}/post`, true);
    }

    expect(problems).toEqual([]);
    expect(missing).toEqual([]);
    // The error answers shared by every operation, each operation's own answers and bodies, the three events.
    expect(checked.length).toBeGreaterThanOrEqual(60);
  });

  it('shows on each 404 a message the service gives for that operation', async () => {
    // One account holding a site, a scan and a subscription, and a fresh key per request (the limit here is 2).
    const { accountId } = await seedAccount(api.db);
    const site = await createSite(api.db, accountId, { domain: `not-found-${uniqueTag()}.example` });
    const real: Record<string, string> = {
      siteId: site.id,
      scanId: (await startScan(api.db, site.id)).id,
      subscriptionId: (await createSubscription(api.db, accountId, { url: 'https://hooks.acme.example/svc', events: ['*'] })).id,
    };
    const mismatches: unknown[] = [];
    let checked = 0;
    for (const { path, method, operation } of operations.filter((o) => o.path.startsWith('/api/v1/') && o.operation.responses['404'])) {
      const example = (operation.responses['404'] as { content: Record<string, { example: { error: { message: string } } }> }).content['application/json']!.example;
      const item = (openApiDocument.paths as Record<string, OpenApiPathItem>)[path]!;
      const parameters = [...(item.parameters ?? []), ...(operation.parameters ?? [])] as OpenApiParameter[];
      const names = parameters.filter((p) => p.in === 'path').map((p) => p.name);
      const body = (operation.requestBody as { content?: Record<string, { example?: unknown }> } | undefined)?.content?.['application/json']?.example;
      // Real ids for the first k path parameters and the examples (which name nothing) for the rest: every 404 the path can give.
      const answers: string[] = [];
      for (let k = 0; k < names.length; k += 1) {
        const url = names.reduce((filled, name, i) => filled.replace(`{${name}}`, i < k ? real[name]! : String(parameters.find((p) => p.name === name)!.example)), path);
        const { key } = await createApiKey(api.db, accountId, { name: 'not found', scopes: ALL_SCOPES });
        const res = await request(api.app)[method](url).set(bearer(key)).send(body as object);
        if (res.status === 404) answers.push(res.body.error.message);
      }
      checked += 1;
      if (!answers.includes(example.error.message)) mismatches.push({ operation: `${method.toUpperCase()} ${path}`, documented: example.error.message, answered: answers });
    }

    expect(mismatches).toEqual([]);
    expect(checked).toBeGreaterThanOrEqual(10);
  });

  it('shows ids, timestamps and cursors in the form the service writes them', () => {
    const KIND_OF: Record<string, string> = { siteId: 'site', scanId: 'scan', runId: 'run', subscriptionId: 'wh', deliveryId: 'dlv', eventId: 'evt', deploymentId: 'dep', redeliveryOf: 'dlv' };
    const ID = /^(acct|site|scan|key|wh|evt|dlv|run|dep)_[0-9a-f]{32}$/;
    const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
    const problems: string[] = [];
    /** Every example with where it is and, for a parameter's, the parameter's name. */
    const examples: Array<[string, unknown, string]> = [];
    const collect = (node: unknown, pointer: string): void => {
      if (Array.isArray(node)) node.forEach((item, i) => collect(item, `${pointer}/${i}`));
      else if (node && typeof node === 'object') {
        for (const [key, value] of Object.entries(node)) {
          if (key === 'example') examples.push([pointer, value, 'in' in node ? String((node as { name?: unknown }).name) : '']);
          else collect(value, `${pointer}/${key}`);
        }
      }
    };
    const inspect = (value: unknown, key: string, where: string): void => {
      if (Array.isArray(value)) return value.forEach((item, i) => inspect(item, key, `${where}/${i}`));
      if (value && typeof value === 'object') return Object.entries(value).forEach(([k, v]) => inspect(v, k, `${where}/${k}`));
      if (typeof value !== 'string') return;
      const kind = KIND_OF[key];
      if ((key === 'id' || kind) && !(kind ? new RegExp(`^${kind}_[0-9a-f]{32}$`) : ID).test(value)) problems.push(`${where}: ${value} is not an id of the service's form`);
      if ((/At$/.test(key) || key === 'timestamp') && !TIMESTAMP.test(value)) problems.push(`${where}: ${value} is not a timestamp as the service writes it`);
      if (key === 'nextCursor') {
        const [at, id] = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as [string, string];
        if (!TIMESTAMP.test(at) || !ID.test(id)) problems.push(`${where}: ${value} is not a cursor the service would accept`);
      }
    };
    collect(openApiDocument.paths, '/paths');
    collect(openApiDocument.webhooks, '/webhooks');
    // A parameter's example is a bare value: it is checked under the parameter's name.
    for (const [pointer, example, parameterName] of examples) inspect(example, parameterName, pointer);

    expect(problems).toEqual([]);
    expect(examples.length).toBeGreaterThan(40);
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

describe('what is for operators only', () => {
  const OPERATOR_PATHS = ['/healthz', '/readyz', '/docs/assets/{file}'];

  it('is left out of the document customers get, the probes and the reference page’s files with it', async () => {
    const served = (await request(api.app).get('/openapi.json')).body as typeof openApiDocument;

    for (const path of [...OPERATOR_PATHS, '/metrics']) expect({ path, served: Object.hasOwn(served.paths, path) }).toEqual({ path, served: false });
    expect(JSON.stringify(served)).not.toContain('x-internal');
    // What customers use stays: the API, this document and its page.
    expect(Object.keys(served.paths).filter((path) => !path.startsWith('/api/v1/'))).toEqual(['/openapi.json', '/docs']);
    // Nothing a customer cannot see is left behind: no component only the operator paths used, no parameter component.
    expect(Object.keys(served.components)).not.toContain('parameters');
    expect(Object.keys(served.components.schemas)).not.toContain('Readiness');
  });

  it('is still described, marked x-internal, where every response is checked, and nothing else differs', () => {
    const complete = completeOpenApiDocument.paths as Record<string, OpenApiPathItem>;
    const internal = Object.entries(complete).filter(([, item]) => METHODS.some((method) => item[method]?.['x-internal'] === true));

    expect(internal.map(([path]) => path).sort()).toEqual([...OPERATOR_PATHS].sort());
    expect({ ...completeOpenApiDocument, paths: Object.fromEntries(Object.entries(complete).filter(([path]) => !OPERATOR_PATHS.includes(path))), components: { ...completeOpenApiDocument.components, parameters: undefined } }).toEqual({
      ...openApiDocument,
      components: { ...openApiDocument.components, parameters: undefined },
    });
    // The contract check knows them: a probe answering off its description is caught.
    const probe = { method: 'GET', path: '/healthz', status: 200, headers: { 'request-id': '7f0c3f9e-0b7c-4c1e-9d35-2f0b1a8e4d11', 'content-type': 'application/json' } };
    expect(contractProblems({ ...probe, body: Buffer.from('{"status":"ok"}') })).toEqual([]);
    expect(contractProblems({ ...probe, body: Buffer.from('{"status":"fine"}') }).join()).toMatch(/does not match/);
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
