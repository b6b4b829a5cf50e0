import { EVENT_TYPES, WILDCARD_EVENT } from '@svc/core';
import { apiError, apiStandardResponses, apiSuccess, dataEnvelope, requiresScope } from './common.openapi.js';
import { HTTPS_URL_FORMAT, ref, type OpenApiModule } from './openapi-types.js';

/** Spec §4.3, §8: the longest url a subscription may have. */
export const WEBHOOK_URL_MAX_LENGTH = 500;

/** Spec §4.3–§4.5: webhook subscriptions. The request body rules here are the ones the API enforces. */
export const webhooks: OpenApiModule = {
  tag: { name: 'Webhooks', description: 'Webhook subscriptions (spec §4.3–§4.5); what they receive is under Webhooks below.' },
  parameters: {
    SubscriptionId: { name: 'subscriptionId', in: 'path', required: true, description: 'A subscription id.', schema: { type: 'string' } },
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
      description: 'Event types of spec §6.1, or `["*"]` alone for every current and future type. Repeats are dropped.',
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
    CreatedWebhookSubscription: {
      type: 'object',
      required: ['id', 'url', 'events', 'secret', 'createdAt'],
      properties: {
        id: { type: 'string' },
        url: { type: 'string' },
        events: { type: 'array', items: { type: 'string' } },
        secret: { type: 'string', pattern: '^[0-9a-f]{64}$', description: 'The HMAC key; shown only here. Store it now.' },
        createdAt: ref('schemas', 'Timestamp'),
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
        lastDeliveryAt: { oneOf: [ref('schemas', 'Timestamp'), { type: 'null' }], description: 'null before the first delivery.' },
        failureCount: { type: 'integer', minimum: 0, description: 'Deliveries that exhausted all 7 attempts since the last success.' },
        status: { type: 'string', enum: ['active', 'disabled'], description: '`disabled` after 100 failed deliveries (spec §3.2).' },
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
        requestBody: { required: true, content: { 'application/json': { schema: ref('schemas', 'CreateWebhookRequest') } } },
        responses: {
          '201': apiSuccess('Created; the secret is shown only here.', dataEnvelope({ subscription: ref('schemas', 'CreatedWebhookSubscription') })),
          '400': apiError('The body is not a JSON object (`invalid_body`), or its url (`invalid_url`) or events (`invalid_events`) break the rules.', [
            'invalid_body',
            'invalid_url',
            'invalid_events',
          ]),
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
          '200': apiSuccess('The subscriptions.', dataEnvelope({ subscriptions: { type: 'array', items: ref('schemas', 'WebhookSubscription') } })),
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
          '200': apiSuccess('Revoked.', dataEnvelope({ deleted: { const: true }, id: { type: 'string' } })),
          '404': ref('responses', 'NotFound'),
          ...apiStandardResponses(),
        },
      },
    },
  },
};
