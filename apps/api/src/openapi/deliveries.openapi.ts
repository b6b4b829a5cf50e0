import { DELIVERY_CURSOR_MAX_LENGTH, DELIVERY_PAGE_LIMIT_DEFAULT, DELIVERY_PAGE_LIMIT_MAX, DELIVERY_STATUSES } from '../deliveries/deliveries.schemas.js';
import { apiError, apiStandardResponses, apiSuccess, dataEnvelope, idempotencyResponses, idempotentSuccess, notFound, requiresScope } from './common.openapi.js';
import { EXAMPLE_DELIVERIES, EXAMPLE_DELIVERIES_NEXT_CURSOR, EXAMPLE_DELIVERY_DETAIL, EXAMPLE_IDS, EXAMPLE_REDELIVERY } from './examples.js';
import { ref, type OpenApiModule } from './openapi-types.js';

const timestampOrNull = { oneOf: [ref('schemas', 'Timestamp'), { type: 'null' }] };
const attemptFields = {
  n: { type: 'integer', minimum: 1, maximum: 7, description: 'The attempt number, 1..7.' },
  at: ref('schemas', 'Timestamp'),
  statusCode: { type: ['integer', 'null'], description: 'The receiver’s status; null when no answer came (timeout, connection failure).' },
  error: { type: ['string', 'null'], description: 'Why the attempt failed without a status; null otherwise.' },
  durationMs: { type: 'integer', minimum: 0 },
};
const deliveryFields = {
  id: { type: 'string' },
  eventId: { type: 'string' },
  event: { type: 'string', description: 'The event type.' },
  status: { type: 'string', enum: ['pending', 'delivered', 'failed'] },
  createdAt: ref('schemas', 'Timestamp'),
  nextAttemptAt: { ...timestampOrNull, description: 'When the next attempt is due; null unless pending.' },
  redeliveryOf: { type: ['string', 'null'], description: 'The delivery this one redelivers; null for a first delivery.' },
};
const deliveryRequired = ['id', 'eventId', 'event', 'status', 'createdAt', 'nextAttemptAt', 'redeliveryOf', 'attempts'];

/**
 * Issue 10: a subscription's delivery log, one delivery, and redelivery. The route's query
 * parser is compiled from these parameters (validateQuery), so they are the only statement of
 * the rules.
 */
export const deliveries: OpenApiModule = {
  tag: { name: 'Deliveries', description: 'The delivery log of a webhook subscription, and redelivery.' },
  parameters: {
    DeliveryId: { name: 'deliveryId', in: 'path', required: true, description: 'A delivery id.', schema: { type: 'string' }, example: EXAMPLE_IDS.delivery },
    DeliveryLimit: {
      name: 'limit',
      in: 'query',
      description: `The most deliveries in the page, 1 to ${DELIVERY_PAGE_LIMIT_MAX}, as plain digits; ${DELIVERY_PAGE_LIMIT_DEFAULT} when absent.`,
      schema: { type: 'integer', minimum: 1, maximum: DELIVERY_PAGE_LIMIT_MAX, default: DELIVERY_PAGE_LIMIT_DEFAULT },
      example: 20,
      'x-rule': `a whole number from 1 to ${DELIVERY_PAGE_LIMIT_MAX} (default ${DELIVERY_PAGE_LIMIT_DEFAULT}), given once`,
    },
    DeliveryCursor: {
      name: 'cursor',
      in: 'query',
      description: 'The `nextCursor` of the previous page, unchanged; opaque.',
      schema: { type: 'string', minLength: 1, maxLength: DELIVERY_CURSOR_MAX_LENGTH, pattern: '^[A-Za-z0-9_-]+$' },
      'x-rule': 'the nextCursor of a previous page, unchanged, given once',
    },
    DeliveryStatus: {
      name: 'status',
      in: 'query',
      description: 'Only deliveries in this state.',
      schema: { type: 'string', enum: [...DELIVERY_STATUSES] },
      'x-rule': `one of ${DELIVERY_STATUSES.join(', ')}, given once`,
    },
  },
  schemas: {
    DeliveryAttempt: { type: 'object', required: Object.keys(attemptFields), properties: attemptFields },
    DeliveryAttemptDetail: {
      type: 'object',
      required: [...Object.keys(attemptFields), 'responseExcerpt', 'responseExcerptBase64'],
      properties: {
        ...attemptFields,
        responseExcerpt: { type: ['string', 'null'], description: 'The first bytes of the receiver’s answer as text, for reading.' },
        responseExcerptBase64: { type: ['string', 'null'], description: 'The same bytes exactly, base64.' },
      },
    },
    Delivery: {
      type: 'object',
      required: deliveryRequired,
      properties: { ...deliveryFields, attempts: { type: 'array', maxItems: 7, items: ref('schemas', 'DeliveryAttempt') } },
    },
    DeliveryDetail: {
      type: 'object',
      required: [...deliveryRequired, 'payload'],
      properties: {
        ...deliveryFields,
        payload: { type: 'object', additionalProperties: true, description: 'The event body exactly as sent: { event, timestamp, data }.' },
        attempts: { type: 'array', maxItems: 7, items: ref('schemas', 'DeliveryAttemptDetail') },
      },
    },
  },
  paths: {
    '/api/v1/webhooks/{subscriptionId}/deliveries': {
      parameters: [ref('parameters', 'SubscriptionId')],
      get: {
        operationId: 'listWebhookDeliveries',
        summary: 'Read the delivery log of a subscription',
        description: 'Newest first, keyset-paged: follow `nextCursor` until it is null. Unknown parameters are ignored.',
        tags: ['Deliveries'],
        security: requiresScope('read:webhooks'),
        parameters: [ref('parameters', 'DeliveryLimit'), ref('parameters', 'DeliveryCursor'), ref('parameters', 'DeliveryStatus')],
        responses: {
          '200': apiSuccess(
            'One page of the log.',
            dataEnvelope({
              deliveries: { type: 'array', maxItems: DELIVERY_PAGE_LIMIT_MAX, items: ref('schemas', 'Delivery') },
              nextCursor: { type: ['string', 'null'] },
            }),
            { data: { deliveries: EXAMPLE_DELIVERIES, nextCursor: EXAMPLE_DELIVERIES_NEXT_CURSOR } },
          ),
          '400': ref('responses', 'InvalidQuery'),
          '404': notFound('subscription'),
          ...apiStandardResponses(),
        },
      },
    },
    '/api/v1/webhooks/{subscriptionId}/deliveries/{deliveryId}': {
      parameters: [ref('parameters', 'SubscriptionId'), ref('parameters', 'DeliveryId')],
      get: {
        operationId: 'getWebhookDelivery',
        summary: 'Read one delivery with its payload and the receiver’s answers',
        tags: ['Deliveries'],
        security: requiresScope('read:webhooks'),
        responses: {
          '200': apiSuccess('The delivery.', dataEnvelope({ delivery: ref('schemas', 'DeliveryDetail') }), { data: { delivery: EXAMPLE_DELIVERY_DETAIL } }),
          '404': notFound('delivery'),
          ...apiStandardResponses(),
        },
      },
    },
    '/api/v1/webhooks/{subscriptionId}/deliveries/{deliveryId}/redeliver': {
      parameters: [ref('parameters', 'SubscriptionId'), ref('parameters', 'DeliveryId')],
      post: {
        operationId: 'redeliverWebhookDelivery',
        summary: 'Send a delivery’s event again, as a new delivery',
        tags: ['Deliveries'],
        security: requiresScope('write:webhooks'),
        parameters: [ref('parameters', 'IdempotencyKey')],
        responses: {
          '202': idempotentSuccess('Accepted: the new delivery, queued.', dataEnvelope({ delivery: ref('schemas', 'Delivery') }), { data: { delivery: EXAMPLE_REDELIVERY } }),
          '404': notFound('delivery'),
          ...idempotencyResponses({
            conflict: [
              '`subscription_disabled`: the subscription was auto-disabled and never resumes; `delivery_pending`: a delivery of this event to this subscription is still pending.',
              ['subscription_disabled', 'delivery_pending'],
            ],
          }),
          ...apiStandardResponses(),
        },
      },
    },
  },
};
