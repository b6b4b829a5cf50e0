import { EXAMPLE_AI_CHECK_COMPLETED_EVENT, EXAMPLE_POWER_UP_DEPLOYED_EVENT, EXAMPLE_SCAN_COMPLETED_EVENT } from './examples.js';
import { ref, type JsonSchema, type OpenApiModule, type OpenApiPathItem } from './openapi-types.js';

/** Spec §6.2: the headers of every delivery. */
const deliveryHeaders = [
  {
    name: 'X-Service-Signature',
    in: 'header' as const,
    required: true,
    description: '`sha256=` and the hex HMAC-SHA256 of the raw body bytes, keyed with the subscription secret exactly as returned.',
    schema: { type: 'string', pattern: '^sha256=[0-9a-f]{64}$' },
  },
  {
    name: 'X-Service-Event',
    in: 'header' as const,
    required: true,
    description: 'The event type; equals the body’s `event`.',
    schema: { type: 'string' },
  },
  {
    name: 'X-Service-Delivery-Id',
    in: 'header' as const,
    required: true,
    description: 'The same on every retry of one delivery, unique per delivery: deduplicate with it.',
    schema: { type: 'string' },
  },
  {
    name: 'webhook-id',
    in: 'header' as const,
    required: true,
    description: 'Standard Webhooks: the delivery id (equals X-Service-Delivery-Id).',
    schema: { type: 'string' },
  },
  {
    name: 'webhook-timestamp',
    in: 'header' as const,
    required: true,
    description: 'Standard Webhooks: Unix seconds when this attempt was signed; reject old ones to stop replays.',
    schema: { type: 'string', pattern: '^[0-9]+$' },
  },
  {
    name: 'webhook-signature',
    in: 'header' as const,
    required: true,
    description: 'Standard Webhooks: `v1,` and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>`.',
    schema: { type: 'string', pattern: '^v1,' },
  },
  {
    name: 'User-Agent',
    in: 'header' as const,
    required: true,
    description: 'The delivery protocol’s version.',
    schema: { type: 'string', const: 'Service-Webhooks/1.0' },
  },
];

/** The delivery envelope of spec §2.5 for one event type. */
function envelope(event: string, data: string): JsonSchema {
  return {
    type: 'object',
    required: ['event', 'timestamp', 'data'],
    properties: { event: { const: event }, timestamp: ref('schemas', 'Timestamp'), data: ref('schemas', data) },
  };
}

/** One top-level `webhooks` entry: the POST we send to a subscription's url, with a body as we send it. */
function delivery(event: string, operationId: string, summary: string, envelopeSchema: string, example: unknown): OpenApiPathItem {
  return {
    post: {
      operationId,
      summary,
      description:
        `Sent to subscriptions whose events include \`${event}\` or \`*\`. Verify the signature over the raw bytes; ` +
        'any 2xx within 10 seconds acknowledges it; anything else is retried up to 7 attempts.',
      tags: ['Webhook events'],
      // Deliveries are authenticated by their signature (spec §5.8, §6.2), not by an API key.
      security: [],
      parameters: deliveryHeaders,
      requestBody: { required: true, content: { 'application/json': { schema: ref('schemas', envelopeSchema), example } } },
      responses: {
        '2XX': { description: 'Acknowledged; the delivery is done.' },
        default: { description: 'Any other status, a timeout or a connection failure: the attempt failed and is retried.' },
      },
    },
  };
}

/** Spec §6.1, §6.2: the events we deliver, in the document's top-level `webhooks`. Payloads are exactly §6.1's. */
export const webhookEvents: OpenApiModule = {
  schemas: {
    ScanCompletedData: {
      type: 'object',
      required: ['scanId', 'siteId', 'domain', 'score'],
      properties: { scanId: { type: 'string' }, siteId: { type: 'string' }, domain: { type: 'string' }, score: { type: 'number' } },
    },
    AiCheckCompletedData: {
      type: 'object',
      required: ['runId', 'siteId', 'domain', 'compositeScore'],
      properties: { runId: { type: 'string' }, siteId: { type: 'string' }, domain: { type: 'string' }, compositeScore: { type: 'number' } },
    },
    PowerUpDeployedData: {
      type: 'object',
      required: ['deploymentId', 'siteId', 'powerUpId'],
      properties: { deploymentId: { type: 'string' }, siteId: { type: 'string' }, powerUpId: { type: 'string' } },
    },
    ScanCompletedEvent: envelope('scan.completed', 'ScanCompletedData'),
    AiCheckCompletedEvent: envelope('ai_check.completed', 'AiCheckCompletedData'),
    PowerUpDeployedEvent: envelope('power_up.deployed', 'PowerUpDeployedData'),
  },
  webhooks: {
    'scan.completed': delivery('scan.completed', 'scanCompletedEvent', 'A scheduled or manual scan completed', 'ScanCompletedEvent', EXAMPLE_SCAN_COMPLETED_EVENT),
    'ai_check.completed': delivery('ai_check.completed', 'aiCheckCompletedEvent', 'An AI Monitor run finished scoring', 'AiCheckCompletedEvent', EXAMPLE_AI_CHECK_COMPLETED_EVENT),
    'power_up.deployed': delivery('power_up.deployed', 'powerUpDeployedEvent', 'A Power-Up was deployed to a site', 'PowerUpDeployedEvent', EXAMPLE_POWER_UP_DEPLOYED_EVENT),
  },
};
