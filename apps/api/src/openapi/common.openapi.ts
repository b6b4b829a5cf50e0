import { EXAMPLE_IDS } from './examples.js';
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
  'recovery_too_large',
  'invalid_idempotency_key',
  'idempotency_key_reused',
  'idempotency_key_in_use',
] as const;

const isoTimestamp: JsonSchema = { type: 'string', format: 'date-time' };

/**
 * A message the service answers with each code (the first code an answer documents is its
 * example): what a reader of the reference sees instead of an example made up from the schema,
 * which would show the first code of all (`unauthorized`) on every error.
 */
const EXAMPLE_MESSAGES: Record<(typeof ERROR_CODES)[number], string> = {
  unauthorized: 'The Authorization header is missing; send "Authorization: Bearer <API key>".',
  invalid_key: 'The API key is unknown, revoked or no longer active.',
  insufficient_scope: 'This API key lacks the scope "write:webhooks" that this endpoint requires.',
  not_found: 'No webhook subscription with this id exists in your account.',
  rate_limited: 'More than 60 requests per minute for this API key; retry after 60 seconds.',
  invalid_body: 'The request body must be a JSON object with url and events.',
  invalid_url: 'url must be a valid URL starting with https:// and at most 500 characters.',
  invalid_events: 'events must be a non-empty array of scan.completed, ai_check.completed, power_up.deployed, or ["*"] alone.',
  payload_too_large: 'The request body is too large.',
  invalid_query: 'limit must be a whole number from 1 to 100 (default 50), given once.',
  subscription_disabled: 'This webhook subscription was disabled after repeated failures and never resumes; create a new one instead.',
  delivery_pending: `A delivery of this event to this subscription is still pending (${EXAMPLE_IDS.redelivery}); redeliver once it is delivered or failed.`,
  recovery_too_large: '12840 failed deliveries are in this window; a recovery sends at most 10000. Narrow the window with since and until.',
  invalid_idempotency_key: 'The Idempotency-Key header must be given once, as 1 to 255 printable ASCII characters (a UUID, say).',
  idempotency_key_reused: 'This Idempotency-Key was used in the last 24 hours for another request (method, path or body); nothing was done. Use a new key for a new request.',
  idempotency_key_in_use: 'A request with this Idempotency-Key is still being answered; try again in a moment.',
};

/** The example of an error answer: its first code, with the message the service gives (or the one given). */
const errorExample = (codes: readonly (typeof ERROR_CODES)[number][], message?: string) => ({ error: { code: codes[0]!, message: message ?? EXAMPLE_MESSAGES[codes[0]!] } });

/** What the service says when the resource a path names is not in the caller's account. */
export const NOT_FOUND_MESSAGES = {
  site: 'No site with this id exists in your account.',
  scan: 'No scan with this id exists in your account.',
  subscription: 'No webhook subscription with this id exists in your account.',
  delivery: 'No delivery with this id exists for this webhook subscription.',
} as const;

/** A success body: `{ "data": { <name>: <schema> } }` (spec §2.1). */
export function dataEnvelope(properties: Record<string, JsonSchema>): JsonSchema {
  return {
    type: 'object',
    required: ['data'],
    properties: { data: { type: 'object', required: Object.keys(properties), properties } },
  };
}

/**
 * The error envelope with `code` narrowed to the codes one answer can carry. The narrowing names
 * `message` too, so that it describes the whole `error` object on its own: a reader (or a linter
 * that holds examples to the properties a schema names) sees no field it does not explain.
 */
function envelopeWith(codes: readonly string[]): JsonSchema {
  return {
    allOf: [
      ref('schemas', 'ErrorEnvelope'),
      { type: 'object', properties: { error: { type: 'object', properties: { code: { enum: [...codes] }, message: { type: 'string' } } } } },
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

/**
 * A 2xx JSON answer of a /api/v1 operation: counted by the rate limit, so it carries its headers.
 * `example` is what the service answers (examples.ts), shown instead of one made up from the schema.
 */
export function apiSuccess(description: string, schema: JsonSchema, example: unknown): Record<string, unknown> {
  return { description, headers: { ...requestIdHeader, ...rateLimitHeaders }, content: { 'application/json': { schema, example } } };
}

/** A JSON request body with the example "Try it out" starts from. */
export function jsonBody(required: boolean, schema: JsonSchema, example: unknown): Record<string, unknown> {
  return { required, content: { 'application/json': { schema, example } } };
}

/** A JSON answer outside /api/v1 (no key, no rate limit). */
export function serviceSuccess(description: string, content: Record<string, unknown>): Record<string, unknown> {
  return { description, headers: { ...requestIdHeader }, content };
}

/**
 * A handled error after authentication and the rate limit, with the error codes this status
 * can carry here: `{ "error": { code, message } }`.
 */
export function apiError(description: string, codes: ReadonlyArray<(typeof ERROR_CODES)[number]>, message?: string): Record<string, unknown> {
  return {
    description,
    headers: { ...requestIdHeader, ...rateLimitHeaders },
    content: {
      'application/json': {
        schema: envelopeWith(codes),
        example: errorExample(codes, message),
      },
    },
  };
}

/** The 404 of an operation whose path names a resource, with the message the service gives for that resource. */
export function notFound(resource: keyof typeof NOT_FOUND_MESSAGES): Record<string, unknown> {
  return apiError('`not_found`: no such resource in your account (another account’s resource is not found too).', ['not_found'], NOT_FOUND_MESSAGES[resource]);
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

type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * The 400, 409 and 422 answers of a POST or PATCH of /api/v1: the operation's own 400 and 409 codes
 * (if any) with those its Idempotency-Key can bring (docs/api-behaviour.md, "Retrying a POST or
 * PATCH"), and the header a replayed answer carries is listed on its success.
 */
export function idempotencyResponses(own: { badRequest?: [string, ErrorCode[]]; conflict?: [string, ErrorCode[]] } = {}): Record<string, unknown> {
  const [badDescription, badCodes] = own.badRequest ?? ['', []];
  const [conflictDescription, conflictCodes] = own.conflict ?? ['', []];
  return {
    '400': apiError(`${badDescription}${badDescription ? ' ' : ''}\`invalid_idempotency_key\`: the Idempotency-Key header is not 1–255 printable ASCII characters.`, [
      ...badCodes,
      'invalid_idempotency_key',
    ]),
    '409': apiError(`${conflictDescription}${conflictDescription ? ' ' : ''}\`idempotency_key_in_use\`: a request with this Idempotency-Key is still being answered; try again.`, [
      ...conflictCodes,
      'idempotency_key_in_use',
    ]),
    '422': apiError('`idempotency_key_reused`: this Idempotency-Key was used in the last 24 hours with another method, path or body; nothing was done.', [
      'idempotency_key_reused',
    ]),
  };
}

/** A 2xx JSON answer of a POST or PATCH: as apiSuccess, plus `Idempotent-Replayed` when it is a replay. */
export function idempotentSuccess(description: string, schema: JsonSchema, example: unknown): Record<string, unknown> {
  const success = apiSuccess(description, schema, example) as { headers: Record<string, unknown> };
  return { ...success, headers: { ...success.headers, 'Idempotent-Replayed': ref('headers', 'Idempotent-Replayed') } };
}

/** `[{ apiKey: [scope] }]`: the key must hold this scope (spec §5). */
export const requiresScope = (scope: string) => [{ [SECURITY_SCHEME]: [scope] }];

export const common: OpenApiModule = {
  securitySchemes: {
    [SECURITY_SCHEME]: {
      type: 'http',
      scheme: 'bearer',
      description:
        'An API key sent as `Authorization: Bearer <API key>`. Each operation lists the one scope it needs: ' +
        '`read:sites`, `read:scans`, `read:ai-monitor`, `read:webhooks` or `write:webhooks`. A key without it gets ' +
        '`403 insufficient_scope` naming the scope.',
    },
  },
  parameters: {
    IdempotencyKey: {
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description:
        'Makes a retry of this request safe: the same key with the same method, path and body within 24 hours gets the first answer again ' +
        '(with `Idempotent-Replayed: true`) and changes nothing. Keys are per account; 1–255 printable ASCII characters (a UUID is a good choice).',
      schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7E]+$' },
    },
  },
  headers: {
    'Idempotent-Replayed': {
      description: '`true` on an answer replayed for a repeated Idempotency-Key.',
      required: false,
      schema: { type: 'string', const: 'true' },
    },
    'Request-Id': {
      description: 'A unique id of this request; quote it when reporting a problem.',
      required: true,
      schema: { type: 'string', format: 'uuid' },
    },
    'X-RateLimit-Limit': {
      description: 'Requests this key may make in any 60-second window.',
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
      description: 'Seconds to wait before trying again.',
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
      description: 'Stable and machine-readable. New codes may be added.',
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
          example: errorExample(['unauthorized', 'invalid_key']),
        },
      },
    },
    InsufficientScope: apiError('`insufficient_scope`: the key lacks the scope this operation needs; the message names it.', ['insufficient_scope']),
    InvalidQuery: apiError('`invalid_query`: a query parameter cannot be used; the message names it.', ['invalid_query']),
    RateLimited: {
      description: '`rate_limited`: more requests than the limit in 60 seconds for this key.',
      headers: { ...requestIdHeader, ...rateLimitHeaders, 'Retry-After': ref('headers', 'Retry-After') },
      content: {
        'application/json': {
          schema: envelopeWith(['rate_limited']),
          example: errorExample(['rate_limited']),
        },
      },
    },
    ServerError: {
      description:
        'An unexpected failure: plain text, never the error envelope, no code to rely on. Retry with backoff.',
      headers: { ...requestIdHeader },
      content: { 'text/plain': { schema: { type: 'string' } } },
    },
  },
};
