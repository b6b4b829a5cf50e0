import { ref, type JsonSchema, type OpenApiModule } from './openapi-types.js';

/** The one security scheme; an operation names the scope it needs in its security requirement. */
export const SECURITY_SCHEME = 'apiKey';

/** Every handled error code of v1 (spec §7) and the additive ones after it. */
export const ERROR_CODES = [
  'unauthorized',
  'invalid_key',
  'insufficient_scope',
  'not_found',
  'rate_limited',
  'invalid_body',
  'invalid_url',
  'invalid_events',
  'payload_too_large',
  'invalid_query',
  'subscription_disabled',
  'delivery_pending',
] as const;

const isoTimestamp: JsonSchema = { type: 'string', format: 'date-time' };

/** A success body: `{ "data": { <name>: <schema> } }` (spec §2.1). */
export function dataEnvelope(properties: Record<string, JsonSchema>): JsonSchema {
  return {
    type: 'object',
    required: ['data'],
    properties: { data: { type: 'object', required: Object.keys(properties), properties } },
  };
}

/** The error envelope with `code` narrowed to the codes one answer can carry. */
function envelopeWith(codes: readonly string[]): JsonSchema {
  return {
    allOf: [
      ref('schemas', 'ErrorEnvelope'),
      { type: 'object', properties: { error: { type: 'object', properties: { code: { enum: [...codes] } } } } },
    ],
  };
}

/** Headers every answer carries, and those every answer past authentication and the rate limit carries. */
const requestIdHeader = { 'Request-Id': ref('headers', 'Request-Id') };
const rateLimitHeaders = {
  'X-RateLimit-Limit': ref('headers', 'X-RateLimit-Limit'),
  'X-RateLimit-Remaining': ref('headers', 'X-RateLimit-Remaining'),
  'X-RateLimit-Reset': ref('headers', 'X-RateLimit-Reset'),
};

/** A 2xx JSON answer of a /api/v1 operation: counted by the rate limit, so it carries its headers. */
export function apiSuccess(description: string, schema: JsonSchema): Record<string, unknown> {
  return { description, headers: { ...requestIdHeader, ...rateLimitHeaders }, content: { 'application/json': { schema } } };
}

/** A JSON answer outside /api/v1 (no key, no rate limit). */
export function serviceSuccess(description: string, content: Record<string, unknown>): Record<string, unknown> {
  return { description, headers: { ...requestIdHeader }, content };
}

/**
 * A handled error after authentication and the rate limit, with the error codes this status
 * can carry here: `{ "error": { code, message } }`.
 */
export function apiError(description: string, codes: ReadonlyArray<(typeof ERROR_CODES)[number]>): Record<string, unknown> {
  return {
    description,
    headers: { ...requestIdHeader, ...rateLimitHeaders },
    content: {
      'application/json': {
        schema: envelopeWith(codes),
      },
    },
  };
}

/** The answers every /api/v1 operation can give besides its own: 401, 403, 429, 5xx. */
export function apiStandardResponses(): Record<string, unknown> {
  return {
    '401': ref('responses', 'Unauthorized'),
    '403': ref('responses', 'InsufficientScope'),
    '429': ref('responses', 'RateLimited'),
    '500': ref('responses', 'ServerError'),
  };
}

/** `[{ apiKey: [scope] }]`: the key must hold this scope (spec §5). */
export const requiresScope = (scope: string) => [{ [SECURITY_SCHEME]: [scope] }];

export const common: OpenApiModule = {
  securitySchemes: {
    [SECURITY_SCHEME]: {
      type: 'http',
      scheme: 'bearer',
      description:
        'An API key sent as `Authorization: Bearer <API key>` (spec §5). Each operation lists the one scope it needs: ' +
        '`read:sites`, `read:scans`, `read:ai-monitor`, `read:webhooks` or `write:webhooks`. A key without it gets ' +
        '`403 insufficient_scope` naming the scope.',
    },
  },
  headers: {
    'Request-Id': {
      description: 'A unique id of this request; quote it when reporting a problem.',
      required: true,
      schema: { type: 'string', format: 'uuid' },
    },
    'X-RateLimit-Limit': {
      description: 'Requests this key may make in any 60-second window (spec §8).',
      required: true,
      schema: { type: 'integer', minimum: 1 },
    },
    'X-RateLimit-Remaining': {
      description: 'Requests left in the current window.',
      required: true,
      schema: { type: 'integer', minimum: 0 },
    },
    'X-RateLimit-Reset': {
      description: 'When the window has room again, in Unix seconds.',
      required: true,
      schema: { type: 'integer', minimum: 0 },
    },
    'Retry-After': {
      description: 'Seconds to wait before trying again (spec §7, §8).',
      required: true,
      schema: { type: 'string', const: '60' },
    },
    'WWW-Authenticate': {
      description: 'The authentication scheme the API expects.',
      required: true,
      schema: { type: 'string', const: 'Bearer' },
    },
  },
  schemas: {
    ErrorCode: {
      type: 'string',
      enum: [...ERROR_CODES],
      description: 'Stable and machine-readable (spec §2.1, §7). New codes may be added (spec §9).',
    },
    ErrorEnvelope: {
      type: 'object',
      required: ['error'],
      properties: {
        error: {
          type: 'object',
          required: ['code', 'message'],
          properties: {
            code: ref('schemas', 'ErrorCode'),
            message: { type: 'string', description: 'For humans; it names the scope or parameter at fault.' },
          },
        },
      },
    },
    Timestamp: { ...isoTimestamp, description: 'An ISO 8601 (RFC 3339) timestamp in UTC with milliseconds.' },
  },
  responses: {
    Unauthorized: {
      description: '`unauthorized`: the Authorization header is missing or malformed; `invalid_key`: the key is unknown, revoked or no longer active.',
      headers: { ...requestIdHeader, 'WWW-Authenticate': ref('headers', 'WWW-Authenticate') },
      content: {
        'application/json': {
          schema: envelopeWith(['unauthorized', 'invalid_key']),
        },
      },
    },
    InsufficientScope: apiError('`insufficient_scope`: the key lacks the scope this operation needs; the message names it.', ['insufficient_scope']),
    NotFound: apiError('`not_found`: no such resource in your account (another account’s resource is not found too).', ['not_found']),
    InvalidQuery: apiError('`invalid_query`: a query parameter cannot be used; the message names it.', ['invalid_query']),
    RateLimited: {
      description: '`rate_limited`: more requests than the limit in 60 seconds for this key (spec §8).',
      headers: { ...requestIdHeader, ...rateLimitHeaders, 'Retry-After': ref('headers', 'Retry-After') },
      content: {
        'application/json': {
          schema: envelopeWith(['rate_limited']),
        },
      },
    },
    ServerError: {
      description:
        'An unexpected failure: plain text, never the error envelope, no code to rely on (spec §2.1, §7). Retry with backoff.',
      headers: { ...requestIdHeader },
      content: { 'text/plain': { schema: { type: 'string' } } },
    },
  },
};
