import { aiMonitor } from './ai-monitor.openapi.js';
import { withCodeSamples } from './code-samples.js';
import { common } from './common.openapi.js';
import { deliveries } from './deliveries.openapi.js';
import { EXAMPLE_ORIGIN } from './examples.js';
import type { OpenApiModule, OpenApiPathItem } from './openapi-types.js';
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

/**
 * The paths with every parameter written out where it is used instead of as a `$ref`: Swagger UI
 * shows a path parameter given by `$ref` as a nameless row, so "Try it out" could not fill
 * `{siteId}` and the like (swagger-ui#4327). The modules still define each parameter once.
 */
function inlineParameters(paths: Record<string, Record<string, unknown>>, parameters: Record<string, unknown>) {
  const inline = (list: unknown) =>
    Array.isArray(list)
      ? list.map((entry: { $ref?: string }) => {
          const name = entry.$ref?.replace('#/components/parameters/', '');
          if (name === undefined) return entry;
          const parameter = parameters[name];
          if (parameter === undefined) throw new Error(`OpenAPI parameter ${entry.$ref} is not defined`);
          return parameter;
        })
      : list;
  return Object.fromEntries(
    Object.entries(paths).map(([path, item]) => [
      path,
      Object.fromEntries(
        Object.entries(item).map(([key, value]) =>
          key === 'parameters'
            ? [key, inline(value)]
            : value && typeof value === 'object' && 'parameters' in value
              ? [key, { ...value, parameters: inline((value as { parameters: unknown }).parameters) }]
              : [key, value],
        ),
      ),
    ]),
  );
}

function buildDocument() {
  const parameters = merge('parameters');
  const paths = inlineParameters(merge('paths') as Record<string, Record<string, unknown>>, parameters as Record<string, unknown>);
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    info: {
      title: 'Site Visibility Service API',
      version: '1.0.0',
      summary: 'Sites, scans, AI Monitor runs and webhook subscriptions of your account.',
      description:
        'The v1 API. Every `/api/v1` request needs `Authorization: Bearer <API key>` and counts ' +
        'against 60 requests per minute per key. Successes are `{ "data": … }`, handled errors `{ "error": { code, message } }`, ' +
        'and a 5xx is plain text with no code: retry it with backoff. v1 only grows: new optional fields and endpoints; ignore ' +
        'fields you do not know.',
      contact: { name: 'Site Visibility Service support', email: 'support@visibility.example.com' },
      // The API's terms are the customer's agreement, not an open licence (the client library is MIT, in its own package).
      license: { name: 'Proprietary' },
    },
    servers: [
      {
        url: '/',
        description: `The origin serving this document, such as ${EXAMPLE_ORIGIN}; "Try it out" in /docs sends its requests there.`,
      },
    ],
    security: [{ apiKey: [] }],
    tags: MODULES.flatMap((module) => (module.tag ? [module.tag] : [])),
    paths: withCodeSamples(paths as Record<string, OpenApiPathItem>),
    webhooks: merge('webhooks'),
    components: {
      schemas: merge('schemas'),
      responses: merge('responses'),
      parameters,
      headers: merge('headers'),
      securitySchemes: merge('securitySchemes'),
    },
  };
}

export type OpenApiDocument = ReturnType<typeof buildDocument>;

/** What customers are given: no operator-only operation, no parameter component (each is written out where used). */
export type CustomerOpenApiDocument = Omit<OpenApiDocument, 'components'> & { components: Omit<OpenApiDocument['components'], 'parameters'> };

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

/**
 * The document without what is `x-internal` (the probes, the reference page's files): operations
 * go, and a path left with none goes too. The parameter components go as well: every use is
 * written out, so nothing there is referenced and a reader would see them twice.
 */
function forCustomers(document: OpenApiDocument): CustomerOpenApiDocument {
  const paths = Object.fromEntries(
    Object.entries(document.paths as Record<string, OpenApiPathItem>).flatMap(([path, item]) => {
      const kept: OpenApiPathItem = { ...item };
      for (const method of METHODS) if (item[method]?.['x-internal']) delete kept[method];
      return METHODS.some((method) => kept[method]) ? [[path, kept]] : [];
    }),
  );
  const { parameters: _inlined, ...components } = document.components;
  return { ...document, paths, components };
}

/**
 * Every operation the API process serves, the operator-only ones (`x-internal`) included: what
 * the request validators compile from and every test response is checked against.
 */
export const completeOpenApiDocument: OpenApiDocument = buildDocument();

/** The OpenAPI 3.1 document customers get at /openapi.json (and /docs renders): the one description of the v1 API. */
export const openApiDocument: CustomerOpenApiDocument = forCustomers(completeOpenApiDocument);
