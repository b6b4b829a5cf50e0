import { serviceSuccess } from './common.openapi.js';
import { ref, type JsonSchema, type OpenApiModule } from './openapi-types.js';

const noKey: Array<Record<string, string[]>> = [];
const serverError = { '500': ref('responses', 'ServerError') };

/** What /readyz answers; written here, not in components: the customer document has no use for it. */
const readiness: JsonSchema = {
  type: 'object',
  required: ['status', 'checks', 'rateLimiter'],
  properties: {
    status: { type: 'string', enum: ['ready', 'not_ready'] },
    checks: {
      type: 'object',
      required: ['postgres', 'redis'],
      properties: { postgres: { enum: ['ok', 'down'] }, redis: { enum: ['ok', 'down'] } },
    },
    rateLimiter: { enum: ['shared', 'per-process-fallback'] },
    redisCluster: {
      type: 'object',
      description: 'Present on a Redis Cluster (REDIS_CLUSTER_NODES): its cluster_state as a master reports it, and how many of the masters this process knows answered PING.',
      required: ['state', 'masters', 'mastersAnswering'],
      additionalProperties: false,
      properties: {
        state: { enum: ['ok', 'fail', 'unknown'] },
        masters: { type: 'integer', minimum: 0 },
        mastersAnswering: { type: 'integer', minimum: 0 },
      },
    },
    reasons: { type: 'array', items: { type: 'string' }, description: 'Present when not ready: what is wrong.' },
  },
};

/**
 * What the service serves outside /api/v1: no key, no rate limit (operator contract §3). The
 * probes and the reference page's files are for operators and the page itself: `x-internal`,
 * so /openapi.json leaves them out while responses are still checked against them.
 */
export const service: OpenApiModule = {
  tag: { name: 'Service', description: 'Served without a key and outside the rate limit.' },
  paths: {
    '/healthz': {
      get: {
        operationId: 'getLiveness',
        summary: 'Liveness',
        tags: ['Service'],
        security: noKey,
        'x-internal': true,
        responses: {
          '200': serviceSuccess('The process is up.', {
            'application/json': { schema: { type: 'object', required: ['status'], properties: { status: { const: 'ok' } } }, example: { status: 'ok' } },
          }),
          ...serverError,
        },
      },
    },
    '/readyz': {
      get: {
        operationId: 'getReadiness',
        summary: 'Readiness: Postgres and Redis answer',
        tags: ['Service'],
        security: noKey,
        'x-internal': true,
        responses: {
          '200': serviceSuccess('Ready.', {
            'application/json': { schema: readiness, example: { status: 'ready', checks: { postgres: 'ok', redis: 'ok' }, rateLimiter: 'shared' } },
          }),
          '503': serviceSuccess('Not ready: a dependency is down.', {
            'application/json': {
              schema: readiness,
              example: { status: 'not_ready', checks: { postgres: 'ok', redis: 'down' }, rateLimiter: 'per-process-fallback', reasons: ['redis: connection refused'] },
            },
          }),
          ...serverError,
        },
      },
    },
    '/openapi.json': {
      get: {
        operationId: 'getOpenApiDocument',
        summary: 'This document',
        tags: ['Service'],
        security: noKey,
        responses: {
          '200': serviceSuccess('The OpenAPI 3.1 document.', { 'application/json': { schema: { type: 'object', required: ['openapi'], properties: { openapi: { const: '3.1.0' } } } } }),
          ...serverError,
        },
      },
    },
    '/docs': {
      get: {
        operationId: 'getApiReference',
        summary: 'The HTML reference rendered from this document',
        tags: ['Service'],
        security: noKey,
        responses: {
          '200': serviceSuccess('An HTML page; it loads its scripts from /docs/assets and works offline.', {
            'text/html': { schema: { type: 'string' } },
          }),
          ...serverError,
        },
      },
    },
    '/docs/assets/{file}': {
      get: {
        operationId: 'getApiReferenceAsset',
        summary: 'A script, style sheet or icon of the HTML reference',
        tags: ['Service'],
        security: noKey,
        'x-internal': true,
        parameters: [{ name: 'file', in: 'path', required: true, schema: { type: 'string' } }],
        responses: {
          '200': { description: 'The file.', headers: { 'Request-Id': ref('headers', 'Request-Id') } },
          '404': {
            description: '`not_found`: no such file.',
            headers: { 'Request-Id': ref('headers', 'Request-Id') },
            content: { 'application/json': { schema: ref('schemas', 'ErrorEnvelope') } },
          },
          ...serverError,
        },
      },
    },
  },
};
