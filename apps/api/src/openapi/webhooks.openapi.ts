import { EVENT_TYPES, MAX_ROTATION_OVERLAP_SECONDS, DEFAULT_ROTATION_OVERLAP_SECONDS, RECOVERY_MAX, WILDCARD_EVENT } from '@svc/core';
import { apiError, apiStandardResponses, apiSuccess, dataEnvelope, idempotencyResponses, idempotentSuccess, jsonBody, notFound, requiresScope } from './common.openapi.js';
import {
  EXAMPLE_CREATE_WEBHOOK_REQUEST,
  EXAMPLE_CREATED_SUBSCRIPTION,
  EXAMPLE_IDS,
  EXAMPLE_RECOVER_REQUEST,
  EXAMPLE_RECOVERY,
  EXAMPLE_ROTATE_REQUEST,
  EXAMPLE_ROTATED_SECRET,
  EXAMPLE_SUBSCRIPTIONS,
  EXAMPLE_UPDATE_WEBHOOK_REQUEST,
  EXAMPLE_UPDATED_SUBSCRIPTION,
} from './examples.js';
import { HTTPS_URL_FORMAT, ref, type OpenApiModule } from './openapi-types.js';

/** Spec §4.3, §8: the longest url a subscription may have. */
export const WEBHOOK_URL_MAX_LENGTH = 500;

/** Spec §4.3–§4.5: webhook subscriptions. The request body rules here are the ones the API enforces. */
export const webhooks: OpenApiModule = {
  tag: { name: 'Webhooks', description: 'Webhook subscriptions; what they receive is under Webhooks below.' },
  parameters: {
    SubscriptionId: { name: 'subscriptionId', in: 'path', required: true, description: 'A subscription id.', schema: { type: 'string' }, example: EXAMPLE_IDS.subscription },
  },
  schemas: {
    WebhookUrl: {
      type: 'string',
      minLength: 'https://'.length + 1,
      maxLength: WEBHOOK_URL_MAX_LENGTH,
      // The host must follow the scheme at once: `https:///x` would otherwise parse with host `x`.
      pattern: '^[Hh][Tt][Tt][Pp][Ss]://[^/\\\\]',
      format: HTTPS_URL_FORMAT,
      description: `A valid URL starting with https://, at most ${WEBHOOK_URL_MAX_LENGTH} characters.`,
      'x-error-code': 'invalid_url',
      'x-rule': `a valid URL starting with https:// and at most ${WEBHOOK_URL_MAX_LENGTH} characters`,
    },
    WebhookEventList: {
      type: 'array',
      minItems: 1,
      items: { type: 'string', enum: [...EVENT_TYPES, WILDCARD_EVENT] },
      // "*" covers every event: it stands alone.
      if: { contains: { const: WILDCARD_EVENT } },
      then: { items: { const: WILDCARD_EVENT } },
      description: 'Event types, or `["*"]` alone for every current and future type. Repeats are dropped.',
      'x-error-code': 'invalid_events',
      'x-rule': `a non-empty array of ${EVENT_TYPES.join(', ')}, or ["*"] alone`,
    },
    CreateWebhookRequest: {
      type: 'object',
      required: ['url', 'events'],
      properties: { url: ref('schemas', 'WebhookUrl'), events: ref('schemas', 'WebhookEventList') },
      description: 'Unknown fields are ignored.',
      'x-error-code': 'invalid_body',
      'x-rule': 'a JSON object with url and events',
    },
    UpdateWebhookRequest: {
      type: 'object',
      properties: { url: ref('schemas', 'WebhookUrl'), events: ref('schemas', 'WebhookEventList') },
      description: 'Either field, or both; unknown fields are ignored.',
      'x-error-code': 'invalid_body',
      'x-rule': 'a JSON object with url or events, or both',
      'x-at-least-one': true,
    },
    OverlapSeconds: {
      type: 'integer',
      minimum: 0,
      maximum: MAX_ROTATION_OVERLAP_SECONDS,
      default: DEFAULT_ROTATION_OVERLAP_SECONDS,
      description: `How long the replaced secret keeps signing beside the new one, in seconds (default ${DEFAULT_ROTATION_OVERLAP_SECONDS}, one day); 0 ends it at once.`,
      'x-error-code': 'invalid_body',
      'x-rule': `a whole number of seconds from 0 to ${MAX_ROTATION_OVERLAP_SECONDS}`,
    },
    RotateWebhookSecretRequest: {
      type: 'object',
      properties: { overlapSeconds: ref('schemas', 'OverlapSeconds') },
      description: 'Optional; unknown fields are ignored.',
      'x-error-code': 'invalid_body',
      'x-rule': 'a JSON object, with overlapSeconds or empty',
    },
    RecoveryTime: {
      type: 'string',
      format: 'date-time',
      description: 'An ISO 8601 (RFC 3339) time with its offset, such as 2026-11-20T00:00:00Z.',
      'x-error-code': 'invalid_body',
      'x-rule': 'an ISO 8601 time with its offset, such as 2026-11-20T00:00:00Z',
    },
    DryRun: {
      type: 'boolean',
      description: 'true: only count what would be sent.',
      'x-error-code': 'invalid_body',
      'x-rule': 'true or false',
    },
    RecoverWebhookRequest: {
      type: 'object',
      required: ['since'],
      properties: { since: ref('schemas', 'RecoveryTime'), until: ref('schemas', 'RecoveryTime'), dryRun: ref('schemas', 'DryRun') },
      description: 'The window of failure times, since included, until (default: now) excluded.',
      'x-error-code': 'invalid_body',
      'x-rule': 'a JSON object with since, and optionally until and dryRun',
    },
    CreatedWebhookSubscription: {
      type: 'object',
      required: ['id', 'url', 'events', 'secret', 'standardWebhooksSecret', 'createdAt'],
      properties: {
        id: { type: 'string' },
        url: { type: 'string' },
        events: { type: 'array', items: { type: 'string' } },
        secret: { type: 'string', pattern: '^[0-9a-f]{64}$', description: 'The HMAC key; shown only here. Store it now.' },
        standardWebhooksSecret: ref('schemas', 'StandardWebhooksSecret'),
        createdAt: ref('schemas', 'Timestamp'),
      },
    },
    StandardWebhooksSecret: {
      type: 'string',
      pattern: '^whsec_[A-Za-z0-9+/]+={0,2}$',
      description: 'The same secret in the form Standard Webhooks libraries take: `whsec_` + base64 of the secret’s 64 characters.',
    },
    RotatedWebhookSecret: {
      type: 'object',
      required: ['id', 'secret', 'standardWebhooksSecret', 'previousSecretExpiresAt'],
      properties: {
        id: { type: 'string' },
        secret: { type: 'string', pattern: '^[0-9a-f]{64}$', description: 'The new HMAC key; shown only here. Store it now.' },
        standardWebhooksSecret: ref('schemas', 'StandardWebhooksSecret'),
        previousSecretExpiresAt: {
          oneOf: [ref('schemas', 'Timestamp'), { type: 'null' }],
          description: 'Until then the replaced secret also signs every attempt (webhook-signature); null when the overlap was 0.',
        },
      },
    },
    WebhookRecovery: {
      type: 'object',
      required: ['count', 'since', 'until'],
      properties: {
        count: { type: 'integer', minimum: 0, maximum: RECOVERY_MAX, description: 'Deliveries sent again (with dryRun: that would be).' },
        since: ref('schemas', 'Timestamp'),
        until: ref('schemas', 'Timestamp'),
      },
    },
    WebhookSubscription: {
      type: 'object',
      required: ['id', 'url', 'events', 'createdAt', 'lastDeliveryAt', 'failureCount', 'status'],
      properties: {
        id: { type: 'string' },
        url: { type: 'string' },
        events: { type: 'array', items: { type: 'string' } },
        createdAt: ref('schemas', 'Timestamp'),
        lastDeliveryAt: { oneOf: [ref('schemas', 'Timestamp'), { type: 'null' }], description: 'The time of the latest successful delivery; null before the first.' },
        failureCount: { type: 'integer', minimum: 0, description: 'Deliveries that exhausted all 7 attempts since the last success.' },
        status: { type: 'string', enum: ['active', 'disabled'], description: '`disabled` after 100 failed deliveries.' },
      },
    },
  },
  paths: {
    '/api/v1/webhooks': {
      post: {
        operationId: 'createWebhook',
        summary: 'Create a webhook subscription',
        tags: ['Webhooks'],
        security: requiresScope('write:webhooks'),
        parameters: [ref('parameters', 'IdempotencyKey')],
        requestBody: jsonBody(true, ref('schemas', 'CreateWebhookRequest'), EXAMPLE_CREATE_WEBHOOK_REQUEST),
        responses: {
          '201': idempotentSuccess(
            'Created; the secret is shown only here (and in a replay of this answer for the same Idempotency-Key).',
            dataEnvelope({ subscription: ref('schemas', 'CreatedWebhookSubscription') }),
            { data: { subscription: EXAMPLE_CREATED_SUBSCRIPTION } },
          ),
          ...idempotencyResponses({
            badRequest: ['The body is not a JSON object (`invalid_body`), or its url (`invalid_url`) or events (`invalid_events`) break the rules.', ['invalid_body', 'invalid_url', 'invalid_events']],
          }),
          '413': apiError('`payload_too_large`: the body is over 1 MB.', ['payload_too_large']),
          ...apiStandardResponses(),
        },
      },
      get: {
        operationId: 'listWebhooks',
        summary: 'List the webhook subscriptions of your account',
        description: 'Every subscription, newest first, including auto-disabled ones. Never the secret.',
        tags: ['Webhooks'],
        security: requiresScope('read:webhooks'),
        responses: {
          '200': apiSuccess('The subscriptions.', dataEnvelope({ subscriptions: { type: 'array', items: ref('schemas', 'WebhookSubscription') } }), {
            data: { subscriptions: EXAMPLE_SUBSCRIPTIONS },
          }),
          ...apiStandardResponses(),
        },
      },
    },
    '/api/v1/webhooks/{subscriptionId}': {
      parameters: [ref('parameters', 'SubscriptionId')],
      delete: {
        operationId: 'deleteWebhook',
        summary: 'Revoke a webhook subscription',
        description: 'No further delivery is attempted; its delivery history is deleted, which cancels queued retries.',
        tags: ['Webhooks'],
        security: requiresScope('write:webhooks'),
        responses: {
          '200': apiSuccess('Revoked.', dataEnvelope({ deleted: { const: true }, id: { type: 'string' } }), { data: { deleted: true, id: EXAMPLE_IDS.subscription } }),
          '404': notFound('subscription'),
          ...apiStandardResponses(),
        },
      },
      patch: {
        operationId: 'updateWebhook',
        summary: 'Change a webhook subscription’s url or events',
        description: 'Its delivery history, failure count and secret are kept; attempts already queued go to the new url. An auto-disabled subscription stays disabled: 409.',
        tags: ['Webhooks'],
        security: requiresScope('write:webhooks'),
        parameters: [ref('parameters', 'IdempotencyKey')],
        requestBody: jsonBody(true, ref('schemas', 'UpdateWebhookRequest'), EXAMPLE_UPDATE_WEBHOOK_REQUEST),
        responses: {
          '200': idempotentSuccess('Changed: the subscription as listed.', dataEnvelope({ subscription: ref('schemas', 'WebhookSubscription') }), {
            data: { subscription: EXAMPLE_UPDATED_SUBSCRIPTION },
          }),
          '404': notFound('subscription'),
          ...idempotencyResponses({
            badRequest: ['The body has neither url nor events, or is not a JSON object (`invalid_body`), or its url (`invalid_url`) or events (`invalid_events`) break the rules.', ['invalid_body', 'invalid_url', 'invalid_events']],
            conflict: ['`subscription_disabled`: the subscription was auto-disabled and never resumes.', ['subscription_disabled']],
          }),
          '413': apiError('`payload_too_large`: the body is over 1 MB.', ['payload_too_large']),
          ...apiStandardResponses(),
        },
      },
    },
    '/api/v1/webhooks/{subscriptionId}/rotate-secret': {
      parameters: [ref('parameters', 'SubscriptionId')],
      post: {
        operationId: 'rotateWebhookSecret',
        summary: 'Give a webhook subscription a new secret, the old one signing beside it for a while',
        description:
          'The new secret is shown only here. Until `previousSecretExpiresAt` every attempt’s `webhook-signature` carries a signature with each ' +
          'secret (new first, space-separated) and `X-Service-Signature` is made with the new one; a rotation during an overlap ends the older one.',
        tags: ['Webhooks'],
        security: requiresScope('write:webhooks'),
        parameters: [ref('parameters', 'IdempotencyKey')],
        requestBody: jsonBody(false, ref('schemas', 'RotateWebhookSecretRequest'), EXAMPLE_ROTATE_REQUEST),
        responses: {
          '200': idempotentSuccess('Rotated; the new secret is shown only here.', dataEnvelope({ subscription: ref('schemas', 'RotatedWebhookSecret') }), {
            data: { subscription: EXAMPLE_ROTATED_SECRET },
          }),
          '404': notFound('subscription'),
          ...idempotencyResponses({ badRequest: ['`invalid_body`: the body is not a JSON object, or overlapSeconds is not 0..604800.', ['invalid_body']] }),
          '413': apiError('`payload_too_large`: the body is over 1 MB.', ['payload_too_large']),
          ...apiStandardResponses(),
        },
      },
    },
    '/api/v1/webhooks/{subscriptionId}/recover': {
      parameters: [ref('parameters', 'SubscriptionId')],
      post: {
        operationId: 'recoverWebhookDeliveries',
        summary: 'Send again every delivery that failed in a window',
        description:
          `Every delivery of this subscription that failed for good (all 7 attempts) between since and until is sent again as a new delivery ` +
          `(\`redeliveryOf\` the failed one, its own 7 attempts), oldest first; an event already pending or delivered again is not. ` +
          `At most ${RECOVERY_MAX} per call: more is \`409 recovery_too_large\` with the count, and nothing is sent. \`dryRun\` only counts.`,
        tags: ['Webhooks'],
        security: requiresScope('write:webhooks'),
        parameters: [ref('parameters', 'IdempotencyKey')],
        requestBody: jsonBody(true, ref('schemas', 'RecoverWebhookRequest'), EXAMPLE_RECOVER_REQUEST),
        responses: {
          '202': idempotentSuccess('Accepted: the deliveries are stored and queued (or, for a dry run, counted).', dataEnvelope({ recovery: ref('schemas', 'WebhookRecovery') }), {
            data: { recovery: EXAMPLE_RECOVERY },
          }),
          '404': notFound('subscription'),
          ...idempotencyResponses({
            badRequest: ['`invalid_body`: the body is not a JSON object, since is missing, a time is not ISO 8601, or until is not after since.', ['invalid_body']],
            conflict: [
              '`subscription_disabled`: the subscription was auto-disabled and never resumes; `recovery_too_large`: more than 10,000 deliveries failed in the window (the message gives the count).',
              ['subscription_disabled', 'recovery_too_large'],
            ],
          }),
          '413': apiError('`payload_too_large`: the body is over 1 MB.', ['payload_too_large']),
          ...apiStandardResponses(),
        },
      },
    },
  },
};
