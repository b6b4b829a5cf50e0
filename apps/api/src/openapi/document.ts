import { aiMonitor } from './ai-monitor.openapi.js';
import { common } from './common.openapi.js';
import { deliveries } from './deliveries.openapi.js';
import type { OpenApiModule } from './openapi-types.js';
import { scans } from './scans.openapi.js';
import { service } from './service.openapi.js';
import { sites } from './sites.openapi.js';
import { webhookEvents } from './webhook-events.openapi.js';
import { webhooks } from './webhooks.openapi.js';

/**
 * Every part of the document, in the order its tags appear. A new resource is one module
 * (`export const x: OpenApiModule`) imported above and named here.
 */
const MODULES: OpenApiModule[] = [common, sites, scans, aiMonitor, webhooks, deliveries, webhookEvents, service];

type Mergeable = Exclude<keyof OpenApiModule, 'tag'>;

/** Merges one kind of map from every module; a name defined twice is a mistake caught at startup, never a silent overwrite. */
function merge<K extends Mergeable>(kind: K): NonNullable<OpenApiModule[K]> {
  const merged: Record<string, unknown> = {};
  for (const module of MODULES) {
    for (const [name, value] of Object.entries(module[kind] ?? {})) {
      if (Object.hasOwn(merged, name)) throw new Error(`OpenAPI ${kind} "${name}" is defined twice`);
      merged[name] = value;
    }
  }
  return merged as NonNullable<OpenApiModule[K]>;
}

function buildDocument() {
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    info: {
      title: 'Site Visibility Service API',
      version: '1.0.0',
      summary: 'Sites, scans, AI Monitor runs and webhook subscriptions of your account.',
      description:
        'The v1 API (spec: site-visibility-api-v1). Every `/api/v1` request needs `Authorization: Bearer <API key>` and counts ' +
        'against 60 requests per minute per key. Successes are `{ "data": … }`, handled errors `{ "error": { code, message } }`, ' +
        'and a 5xx is plain text with no code: retry it with backoff. v1 only grows: new optional fields and endpoints; ignore ' +
        'fields you do not know.',
    },
    security: [{ apiKey: [] }],
    tags: MODULES.flatMap((module) => (module.tag ? [module.tag] : [])),
    paths: merge('paths'),
    webhooks: merge('webhooks'),
    components: {
      schemas: merge('schemas'),
      responses: merge('responses'),
      parameters: merge('parameters'),
      headers: merge('headers'),
      securitySchemes: merge('securitySchemes'),
    },
  };
}

export type OpenApiDocument = ReturnType<typeof buildDocument>;

/** The OpenAPI 3.1 document: the one description of the API the validators compile from and /openapi.json serves. */
export const openApiDocument: OpenApiDocument = buildDocument();
